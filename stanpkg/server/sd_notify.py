"""systemd readiness notification (``Type=notify`` units, sd_notify(3)).

One datagram to the socket named by ``$NOTIFY_SOCKET``; without it (not under systemd)
nothing happens. Written here rather than taken from a library: the protocol is one
``sendto`` and the packages that wrap it (python-systemd, sdnotify) add a C build or
nothing more.
"""

from __future__ import annotations

import os
import socket

__all__ = ["notify"]


def notify(*assignments: str, environ: dict[str, str] | None = None) -> bool:
    """Send ``READY=1``, ``STATUS=...``, ``STOPPING=1``...; True when sent."""
    address = (os.environ if environ is None else environ).get("NOTIFY_SOCKET", "")
    if not address or address[0] not in "/@" or not hasattr(socket, "AF_UNIX"):
        return False
    if address[0] == "@":  # abstract namespace
        address = "\0" + address[1:]
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
            sock.sendto("\n".join(assignments).encode(), address)
    except OSError:
        return False  # the service manager went away: nothing to tell
    return True
