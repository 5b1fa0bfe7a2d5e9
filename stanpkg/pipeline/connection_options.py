"""How the ``stan`` live source and sink connect to a STAN server: one option set, declared
once (fields, defaults, Spark option names, checks), that both carry as ``.connection``.

A picklable value (executors receive it with every task); credentials stay out of ``repr``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from stanpkg.pipeline.options import OptionError, _flag, _seconds

__all__ = ["CONNECTION_OPTIONS", "ConnectionOptions"]

# Lower-cased, as Spark hands options case-insensitively ("clusterid": cluster_id's alias).
CONNECTION_OPTIONS = frozenset(
    {
        "servers", "cluster_id", "clusterid", "user", "password", "token", "credentials",
        "nkeyseedfile", "tlsca", "tlscert", "tlskey", "tlsskipverify", "connecttimeout",
        "clientidprefix",
    }
)  # fmt: skip


@dataclass(frozen=True)
class ConnectionOptions:
    """What connecting to a STAN server needs (live_client.connected)."""

    servers: str
    cluster_id: str
    user: str = field(default="", repr=False)
    password: str = field(default="", repr=False)
    token: str = field(default="", repr=False)
    credentials: str = ""
    nkey_seed_file: str = ""
    tls_ca: str = ""
    tls_cert: str = ""
    tls_key: str = ""
    tls_skip_verify: bool = False
    connect_timeout: float = 5.0
    client_id_prefix: str = "stanpkg-spark"

    @classmethod
    def parse(cls, opts: Mapping[str, str]) -> ConnectionOptions:
        """The connection options, checked (``opts``: lower-cased keys; others ignored).
        Defaults are the fields' (class attributes of the dataclass)."""
        servers = opts.get("servers", "").strip()
        if not servers:
            raise OptionError("servers: expected NATS URLs (nats://host:4222,...)")
        cluster_id = (opts.get("cluster_id") or opts.get("clusterid") or "").strip()
        if not cluster_id:
            raise OptionError("cluster_id: the STAN cluster ID is required")
        return cls(
            servers=servers,
            cluster_id=cluster_id,
            user=opts.get("user", ""),
            password=opts.get("password", ""),
            token=opts.get("token", ""),
            credentials=opts.get("credentials", ""),
            nkey_seed_file=opts.get("nkeyseedfile", ""),
            tls_ca=opts.get("tlsca", ""),
            tls_cert=opts.get("tlscert", ""),
            tls_key=opts.get("tlskey", ""),
            tls_skip_verify=_flag(opts, "tlsskipverify"),
            connect_timeout=_seconds(opts, "connecttimeout", cls.connect_timeout),
            client_id_prefix=_client_id_prefix(opts.get("clientidprefix", cls.client_id_prefix)),
        )

    @property
    def uses_tls(self) -> bool:
        return bool(self.tls_ca or self.tls_cert or self.tls_skip_verify)


def _client_id_prefix(text: str) -> str:
    text = text.strip()
    if not text or not all(c.isalnum() or c in "-_" for c in text):
        raise OptionError(
            f"clientIdPrefix: letters, digits, '-' and '_' only (a STAN client ID), got {text!r}"
        )
    return text
