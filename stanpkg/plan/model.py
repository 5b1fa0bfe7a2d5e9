"""The plan: immutable, validated, fully resolved configuration.

The plan is the only thing the runtime and the renderers see. Section dataclasses have
one field per option of the table in ``options.py`` (same names; a test keeps them in
step), so the typed access the runtime uses and the declarative table cannot drift apart.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from types import MappingProxyType

from stanpkg.conf import Position
from stanpkg.plan.limits import StoreLimits


class StoreType(StrEnum):
    MEMORY = "MEMORY"
    FILE = "FILE"
    SQL = "SQL"


class Mode(StrEnum):
    STANDALONE = "standalone"
    FAULT_TOLERANT = "fault-tolerant"
    CLUSTERED = "clustered"
    PARTITIONED = "partitioned"


@dataclass(frozen=True)
class Secret:
    """A value that is never printed: repr/str redact it; ``reveal()`` gives it."""

    value: str = field(repr=False)

    def reveal(self) -> str:
        return self.value

    def __str__(self) -> str:
        return "<redacted>" if self.value else ""

    def __bool__(self) -> bool:
        return bool(self.value)


@dataclass(frozen=True)
class Source:
    """Where a value came from: the default, a file position, a flag or the environment."""

    kind: str  # "default" | "file" | "flag" | "env"
    where: str = ""  # "stan.conf:3:5", "-mm", "NATS_STREAMING_ENCRYPTION_KEY"

    def __str__(self) -> str:
        return self.kind if not self.where else f"{self.kind} {self.where}"


@dataclass(frozen=True)
class FileOptions:
    compact_enabled: bool
    compact_frag: int
    compact_interval: int  # seconds
    compact_min_size: int
    buffer_size: int
    crc: bool
    crc_poly: int
    sync_on_flush: bool
    slice_max_msgs: int
    slice_max_bytes: int
    slice_max_age: int  # ns
    slice_archive_script: str
    file_descriptors_limit: int
    parallel_recovery: int
    read_buffer_size: int
    auto_sync: int  # ns, <= 0 disables
    truncate_bad_eof: bool


@dataclass(frozen=True)
class SqlOptions:
    driver: str
    source: Secret
    no_caching: bool
    max_open_conns: int
    bulk_insert_limit: int


@dataclass(frozen=True)
class ClusterOptions:
    clustered: bool
    node_id: str
    bootstrap: bool
    peers: tuple[str, ...]  # this node's own ID removed
    log_path: str  # resolved: "<cluster_id>/<node_id>" when not configured and node_id known
    log_cache_size: int
    log_snapshots: int
    trailing_logs: int
    sync: bool
    proceed_on_restore_failure: bool
    allow_add_remove_node: bool
    raft_logging: bool
    raft_heartbeat_timeout: int  # ns
    raft_election_timeout: int
    raft_lease_timeout: int
    raft_commit_timeout: int
    bolt_free_list_sync: bool
    bolt_free_list_map: bool
    nodes_connections: bool
    channel_streams: int  # the JetStream streams new channels are spread over
    pack_bytes: int  # a stream message packing small messages at most (0: none)
    read_cache: int  # bytes of channels' messages the serving node keeps in memory


@dataclass(frozen=True)
class TlsOptions:
    """TLS of the streaming server's own connection to NATS."""

    client_cert: str
    client_key: str
    client_ca: str
    server_name: str
    skip_verify: bool

    @property
    def configured(self) -> bool:
        return bool(self.client_cert or self.client_key or self.client_ca)


@dataclass(frozen=True)
class NatsServerOptions:
    """The embedded NATS server (ignored when ``nats_server_url`` points elsewhere)."""

    host: str
    port: int
    http_port: int
    https_port: int
    http_host: str  # the monitoring listener's address; "" = ``host``
    pid_file: str
    log_file: str
    logtime: bool
    syslog: bool
    remote_syslog: str
    debug: bool
    trace: bool
    user: str
    password: Secret
    token: Secret
    tls: bool
    tls_cert: str
    tls_key: str
    tls_verify: bool
    tls_ca_cert: str
    routes: tuple[str, ...]
    cluster_listen: str
    memory_limit: int  # bytes: the embedded nats-server's GOMEMLIMIT (0: none)
    cluster_name: str
    # NATS-server-only entries of the NATS config file (authorization, accounts, cluster,
    # leafnodes, ...), rendered back to NATS config text for the embedded server.
    passthrough: str = ""
    # Where each line of ``passthrough`` was written (nats_errors.py maps nats-server's
    # complaints about the generated file back to the operator's file).
    passthrough_positions: tuple[Position, ...] = field(default=(), repr=False)
    config_file: str = ""  # the file the NATS options were read from (for the log)
    # HTTPS monitoring's certificate: the -tls* options, else the NATS tls {} block's.
    monitor_tls_cert: str = ""
    monitor_tls_key: str = ""


@dataclass(frozen=True)
class Plan:
    cluster_id: str
    discover_prefix: str
    store_type: StoreType
    dir: str
    nats_server_url: str
    credentials: str
    username: str
    password: Secret
    token: Secret
    nkey_seed_file: str
    secure: bool
    hb_interval: int  # ns
    hb_timeout: int  # ns
    hb_fail_count: int
    ft_group: str
    partitioning: bool
    encrypt: bool
    encryption_cipher: str  # resolved: "AES" | "CHACHA" (by CPU when not configured)
    encryption_key: Secret  # resolved: flag > environment > file
    replace_durable: bool
    stan_debug: bool
    stan_trace: bool
    syslog_name: str
    nats_reconnect_wait: int  # ns
    nats_max_reconnects: int  # -1: forever
    io_batch_size: int
    io_sleep_time: int
    store_limits: StoreLimits
    file_options: FileOptions
    sql_options: SqlOptions
    cluster: ClusterOptions
    tls: TlsOptions
    nats_server: NatsServerOptions
    config_file: str = ""  # the streaming configuration file, if any
    provenance: Mapping[str, Source] = field(default_factory=lambda: MappingProxyType({}))

    @property
    def mode(self) -> Mode:
        if self.cluster.clustered:
            return Mode.CLUSTERED
        if self.ft_group:
            return Mode.FAULT_TOLERANT
        if self.partitioning:
            return Mode.PARTITIONED
        return Mode.STANDALONE

    @property
    def store_label(self) -> str:
        """What the startup log prints after ``Message store is``."""
        if self.cluster.clustered:
            return f"RAFT_{self.store_type.value}"
        return self.store_type.value

    @property
    def embedded_nats(self) -> bool:
        return not self.nats_server_url

    @property
    def discover_subject(self) -> str:
        return f"{self.discover_prefix}.{self.cluster_id}"
