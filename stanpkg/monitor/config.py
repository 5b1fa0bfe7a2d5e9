"""Whether and where to listen for monitoring, from the plan. Apart from the listener
(:mod:`stanpkg.monitor.service`) so that a server without monitoring never loads the
HTTP stack (aiohttp: a fifth of an idle server's memory and half its start-up time)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from stanpkg.server.errors import StartupError

if TYPE_CHECKING:
    from stanpkg.plan.model import Plan

__all__ = ["MonitorConfig", "monitor_config"]


@dataclass(frozen=True)
class MonitorConfig:
    host: str
    port: int  # -1 or 0: a free port
    tls_cert: str = ""  # both set: HTTPS
    tls_key: str = ""

    @property
    def secure(self) -> bool:
        return bool(self.tls_cert or self.tls_key)


def monitor_config(plan: Plan) -> MonitorConfig | None:
    """The listener the plan asks for, None when monitoring is off. Raises
    :class:`StartupError` for what nats-server itself would refuse."""
    ns = plan.nats_server
    if not ns.http_port and not ns.https_port:
        return None
    if ns.http_port and ns.https_port:
        raise StartupError(
            f"can't specify both HTTP ({ns.http_port}) and HTTPs ({ns.https_port}) ports"
        )
    host = ns.http_host or ns.host or "0.0.0.0"
    if ns.http_port:
        return MonitorConfig(host, ns.http_port)
    # The plan resolved the certificate (the -tls* options, else the NATS tls {} block).
    cert, key = ns.monitor_tls_cert, ns.monitor_tls_key
    if not (cert and key):
        raise StartupError("TLS cert and key required for HTTPS")
    return MonitorConfig(host, ns.https_port, cert, key)
