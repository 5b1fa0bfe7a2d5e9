"""Hiding secrets in what is shown: whole values of secret options, and the credentials
of URLs (``nats://user:password@host``, ``nats://token@host``).

The options table says which options are secret (``Option.secret``) and which hold URLs
that may carry credentials (``Option.url_credentials``); the plan dump, ``--explain``,
diagnostics and the server's log use these helpers.
"""

from __future__ import annotations

import re

REDACTED = "<redacted>"

# scheme://userinfo@ : a password after the user's colon, or a userinfo without a colon
# (a NATS token).
_URL_USERINFO = re.compile(r"(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*://)(?P<userinfo>[^/@\s\"']+)@")


def _hide(match: re.Match[str]) -> str:
    user, colon, _password = match["userinfo"].partition(":")
    shown = f"{user}:{REDACTED}" if colon else REDACTED
    return f"{match['scheme']}{shown}@"


def redact_urls(text: str) -> str:
    """``text`` with the password (or token) of every URL in it replaced."""
    if "@" not in text:
        return text
    return _URL_USERINFO.sub(_hide, text)
