"""Where and as whom a NATS connection is made, as one value."""

from __future__ import annotations

import ssl
from dataclasses import dataclass
from typing import Any

__all__ = ["NatsEndpoint"]


@dataclass(frozen=True)
class NatsEndpoint:
    """The NATS server(s) to connect to and the identity to connect with. Built once by
    the node from the plan; the server opens its connections from it."""

    url: str  # comma-separated list, tried in order
    user: str = ""
    password: str = ""
    token: str = ""
    credentials: str = ""  # a .creds file (JWT and nkey seed)
    nkey_seed_file: str = ""
    tls: ssl.SSLContext | None = None
    tls_required: bool = False
    tls_hostname: str = ""  # expected name in the server's certificate, when not the URL's

    def connect_keywords(self) -> dict[str, Any]:
        """The keywords of ``NatsConnection.connect`` this endpoint sets (all but the URL)."""
        return {
            "user": self.user,
            "password": self.password,
            "token": self.token,
            "credentials": self.credentials,
            "nkey_seed_file": self.nkey_seed_file,
            "tls": self.tls,
            "tls_required": self.tls_required,
            "tls_hostname": self.tls_hostname,
        }
