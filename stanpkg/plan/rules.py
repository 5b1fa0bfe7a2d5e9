"""Cross-field rules: what no single option's type or range can say.

Each rule reads the normalised configuration (after defaults, flags and environment) and
adds diagnostics; none raises. Messages name the options involved and, in parentheses, the
reference server's wording where an operator may search for it.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from urllib.parse import urlsplit

from stanpkg.plan.context import Context
from stanpkg.plan.gotime import format_duration
from stanpkg.plan.options import OPTIONS, Kind
from stanpkg.plan.path_checks import directory_problem, file_problem
from stanpkg.plan.redact import redact_urls
from stanpkg.plan.sql_source import DsnError, parse_mysql_dsn
from stanpkg.plan.subjects import channel_name_problem, is_literal
from stanpkg.plan.syslog_address import parse_remote_syslog

Rule = Callable[[Context], None]


def channel_names(ctx: Context) -> list[str]:
    channels = ctx.get(("store_limits", "channels"), {})
    return list(channels) if isinstance(channels, dict) else []


def store_type(ctx: Context) -> str:
    """The store type, "" when its value was rejected."""
    return str(ctx.value(("store_type",)) or "")


def clustered(ctx: Context) -> bool:
    return bool(ctx.value(("cluster", "clustered")))


def check_identity(ctx: Context) -> None:
    if ctx.is_valid(("cluster_id",)):
        _check_cluster_id(ctx)
    if ctx.is_valid(("discover_prefix",)):
        _check_discover_prefix(ctx)


def _check_cluster_id(ctx: Context) -> None:
    cid = str(ctx.value(("cluster_id",)))
    problem = channel_name_problem(cid, allow_wildcards=False) if cid else None
    if not cid:
        ctx.error(
            ("cluster_id",),
            "cluster_id cannot be empty (clients use it in every subject)",
            "invalid-value",
        )
    elif problem is not None:
        ctx.error(
            ("cluster_id",),
            f'cluster_id "{cid}" is not usable in NATS subjects: {problem.message}',
            "invalid-value",
        )


def _check_discover_prefix(ctx: Context) -> None:
    prefix = str(ctx.value(("discover_prefix",)))
    problem = channel_name_problem(prefix, allow_wildcards=False) if prefix else None
    if not prefix or problem is not None:
        why = problem.message if problem else "it is empty"
        ctx.error(
            ("discover_prefix",),
            f'discover_prefix "{prefix}" is not a valid subject: {why}',
            "invalid-value",
        )


def check_channels(ctx: Context) -> None:
    names = channel_names(ctx)
    for name in names:
        problem = channel_name_problem(name, allow_wildcards=True)
        if problem is not None:
            ctx.error(
                ("store_limits", "channels", name),
                f'invalid channel name "{name}": {problem.message}',
                "channel-name",
            )
    max_channels = ctx.value(("store_limits", "max_channels"))
    literal = [n for n in names if is_literal(n)]
    if isinstance(max_channels, int) and max_channels > 0 and len(literal) > max_channels:
        ctx.error(
            ("store_limits", "channels", literal[max_channels]),
            f"{len(literal)} channels are defined but max_channels is {max_channels} "
            f"(too many channels defined ({max_channels + 1}). The max channels limit "
            f"is set to {max_channels})",
            "too-many-channels",
        )


def check_store(ctx: Context) -> None:
    kind = store_type(ctx)
    if kind == "FILE" and not ctx.value(("dir",)) and ctx.is_valid(("dir",)):
        ctx.error(
            ("store_type",),
            "the FILE store needs a root directory: set dir "
            "(for FILE stores, root directory must be specified)",
            "missing-dir",
        )
    if kind == "MEMORY" and ctx.value(("dir",)):
        ctx.warning(
            ("dir",),
            "dir is not used by the MEMORY store; messages are kept in "
            "memory only and lost on restart",
            "unused",
        )
    if kind == "FILE":
        _check_slices_against_limits(ctx)
    _check_sql(ctx, used=kind == "SQL")


def _check_slices_against_limits(ctx: Context) -> None:
    pairs = (
        ("slice_max_msgs", "max_msgs", "messages"),
        ("slice_max_bytes", "max_bytes", "bytes"),
        ("slice_max_age", "max_age", "age"),
    )
    for slice_key, limit_key, what in pairs:
        slice_value = ctx.value(("file_options", slice_key))
        limit = ctx.value(("store_limits", limit_key))
        if (
            isinstance(slice_value, int)
            and isinstance(limit, int)
            and 0 < limit < slice_value
            and ctx.is_set(("file_options", slice_key))
        ):
            ctx.warning(
                ("file_options", slice_key),
                f"{slice_key} ({slice_value}) is larger than the channel {what} limit "
                f"{limit_key} ({limit}): a slice will never fill up",
                "slice-limit",
            )


def _check_sql(ctx: Context, used: bool) -> None:
    if not ctx.is_valid(("sql_options", "driver"), ("sql_options", "source")):
        return
    driver = str(ctx.value(("sql_options", "driver")))
    source = ctx.value(("sql_options", "source"))
    if used and not driver:
        ctx.error(
            ("store_type",),
            "the SQL store needs sql_options.driver: mysql, postgres "
            'or sqlite (sql: unknown driver "" (forgotten import?))',
            "sql-driver",
        )
    if used and driver and not source:
        ctx.error(("sql_options", "driver"), "the SQL store needs sql_options.source", "sql-source")
    if driver == "mysql" and source and isinstance(source, str):
        try:
            parse_mysql_dsn(source)
        except DsnError as exc:
            ctx.error(
                ("sql_options", "source"),
                "sql_options.source is not a MySQL DSN such as "
                f"user:password@tcp(host:3306)/dbname ({exc})",
                "sql-source",
            )


def check_modes(ctx: Context) -> None:
    kind = store_type(ctx)
    is_clustered = clustered(ctx)
    ft_group = ctx.value(("ft_group",))
    partitioning = ctx.value(("partitioning",))
    if is_clustered and kind == "MEMORY":
        ctx.error(
            ("cluster",) if ctx.is_set(("cluster",)) else ("cluster", "clustered"),
            "clustering needs a FILE or SQL store (stan: clustering mode not supported "
            "with MEMORY store type)",
            "mode",
        )
    if is_clustered and partitioning:
        ctx.error(
            ("partitioning",),
            "partitioning cannot be used with clustering (stan: "
            "channels partitioning in clustering mode is not supported)",
            "mode",
        )
    if is_clustered and ft_group:
        ctx.error(
            ("ft_group",),
            "ft_group cannot be used with clustering: a cluster "
            "already replicates and elects a leader",
            "mode",
        )
    if ft_group and kind == "MEMORY":
        ctx.error(
            ("ft_group",),
            "fault-tolerance needs a FILE or SQL store shared by the "
            "group (ft: only FILE or SQL stores supported in FT mode)",
            "mode",
        )
    if ft_group and kind and kind != "MEMORY" and not _shares_a_nats_cluster(ctx):
        ctx.warning(
            ("ft_group",),
            "the servers of a fault-tolerant group must share one NATS cluster to hear each "
            "other's heartbeats: set nats_server_url, or give the embedded NATS server "
            "routes (--routes, or a cluster block in the NATS configuration)",
            "ft-nats",
        )
    if partitioning and not channel_names(ctx) and ctx.is_valid(("store_limits", "channels")):
        ctx.error(
            ("partitioning",),
            "partitioning needs the channels this server serves in "
            "store_limits.channels (stan: no configured channel)",
            "mode",
        )


def _shares_a_nats_cluster(ctx: Context) -> bool:
    return bool(
        ctx.value(("nats_server_url",))
        or ctx.value(("nats_server", "routes"))
        or ctx.value(("nats_server", "cluster_listen"))
        or {"cluster", "gateway", "leafnodes"} & ctx.nats_passthrough_keys
    )


# The reference's Raft and bbolt tuning: JetStream replicates instead (its Raft is not
# tunable), so these are accepted and ignored, with a word (clustering-jetstream.md §3).
# Not clustered, every cluster option is ignored silently, as the reference does.
JETSTREAM_MANAGED = (
    "log_cache_size",
    "log_snapshots",
    "trailing_logs",
    "nodes_connections",
    "bolt_free_list_sync",
    "bolt_free_list_map",
    "proceed_on_restore_failure",
)


def check_cluster(ctx: Context) -> None:
    for name in JETSTREAM_MANAGED if clustered(ctx) else ():
        if ctx.is_set(("cluster", name)):
            ctx.warning(
                ("cluster", name),
                f"cluster.{name} has no effect: stanpkg's clustered mode replicates "
                "through JetStream, which manages this itself",
                "jetstream",
            )
    peers = ctx.value(("cluster", "peers"))
    if isinstance(peers, (list, tuple)):
        for peer in peers:
            if isinstance(peer, str) and "," in peer:
                ctx.warning(
                    ("cluster", "peers"),
                    f'peer name "{peer}" contains ","; give '
                    "peers as an array of names, not one comma-separated string",
                    "peers",
                )
    if clustered(ctx):
        _check_raft_timeouts(ctx)


_HEARTBEAT = ("cluster", "raft_heartbeat_timeout")
_ELECTION = ("cluster", "raft_election_timeout")
_LEASE = ("cluster", "raft_lease_timeout")


def _check_raft_timeouts(ctx: Context) -> None:
    """The relations hashicorp/raft's ValidateConfig checks when the Go server starts a
    clustered node (each timeout's minimum is its range in the options table)."""
    heartbeat, election, lease = (ctx.value(p) for p in (_HEARTBEAT, _ELECTION, _LEASE))
    if not (isinstance(heartbeat, int) and isinstance(election, int) and isinstance(lease, int)):
        return  # one of them was rejected already
    if lease > heartbeat:
        ctx.error(
            _configured(ctx, _LEASE, _HEARTBEAT),
            f"raft_lease_timeout ({format_duration(lease)}) cannot be larger than "
            f"raft_heartbeat_timeout ({format_duration(heartbeat)}) (LeaderLeaseTimeout "
            "cannot be larger than heartbeat timeout)",
            "raft",
        )
    if election < heartbeat:
        ctx.error(
            _configured(ctx, _ELECTION, _HEARTBEAT),
            f"raft_election_timeout ({format_duration(election)}) must be equal to or greater "
            f"than raft_heartbeat_timeout ({format_duration(heartbeat)}) (ElectionTimeout must "
            "be equal or greater than Heartbeat Timeout)",
            "raft",
        )


def _configured(ctx: Context, *paths: tuple[str, ...]) -> tuple[str, ...]:
    """The first of ``paths`` set by the operator (a default has no position)."""
    return next((p for p in paths if p in ctx.sources), paths[0])


def check_encryption(ctx: Context) -> None:
    key_valid = ctx.is_valid(("encryption_key",))
    if ctx.value(("encrypt",)) and not ctx.value(("encryption_key",)) and key_valid:
        ctx.error(
            ("encrypt",),
            "encryption is on but no key is given: set "
            "NATS_STREAMING_ENCRYPTION_KEY (preferred) or encryption_key "
            "(encryption key required)",
            "encryption-key",
        )


def check_tls(ctx: Context) -> None:
    cert = ctx.value(("tls", "client_cert"))
    key = ctx.value(("tls", "client_key"))
    both_valid = ctx.is_valid(("tls", "client_cert"), ("tls", "client_key"))
    if bool(cert) != bool(key) and both_valid:
        missing = "client_key" if cert else "client_cert"
        ctx.error(
            ("tls", "client_cert" if cert else "client_key"),
            f"tls: {missing} is required together with {'client_cert' if cert else 'client_key'}",
            "tls",
        )


def check_files(ctx: Context) -> None:
    """Every option that names a file must name a readable one (relative to the cwd)."""
    for opt in OPTIONS:
        if not opt.file_path or opt.kind is not Kind.STRING:
            continue
        path = tuple(opt.path.split("."))
        value = ctx.value(path)
        if not isinstance(value, str) or not value:
            continue
        script = opt.name == "slice_archive_script"
        problem = file_problem(value, executable=script)
        if problem:
            ctx.error(path, f'{opt.name}: file "{value}" {problem}', "file")


def check_directories(ctx: Context) -> None:
    """Every directory the server will create and write must be creatable and writable
    (relative to the cwd), checked without creating anything: validate has no side effects."""
    in_use = {"dir": store_type(ctx) == "FILE", "cluster.log_path": clustered(ctx)}
    for opt in OPTIONS:
        if not opt.dir_path or not in_use.get(opt.path, True):
            continue
        path = tuple(opt.path.split("."))
        value = ctx.value(path)
        if isinstance(value, str) and value:
            problem = directory_problem(Path(value))
            if problem:
                ctx.error(path, f'{opt.name}: directory "{value}" {problem}', "directory")


def check_remote_syslog(ctx: Context) -> None:
    """The address the server will dial at start-up, checked as it parses it."""
    path = ("nats_server", "remote_syslog")
    url = ctx.value(path)
    if not isinstance(url, str) or not url:
        return
    try:
        parse_remote_syslog(url)
    except ValueError as exc:
        ctx.error(path, f"remote_syslog: {exc}", "invalid-value")


def check_nats_urls(ctx: Context) -> None:
    """The NATS cluster's URLs (--cluster, --routes): a port that is a number from 0 to
    65535, as Go's URL parser wants it. Shown without their password."""
    for opt in (o for o in OPTIONS if o.url_credentials and o.section == "nats_server"):
        path = tuple(opt.path.split("."))
        value = ctx.value(path)
        urls = [value] if isinstance(value, str) else value if isinstance(value, list) else []
        for url in urls:
            if not isinstance(url, str) or "://" not in url:
                continue
            try:
                urlsplit(url).port  # noqa: B018 - raises on a bad port
            except ValueError as exc:
                reason = "its port must be a number from 0 to 65535" if "ort" in str(exc) else exc
                ctx.error(
                    path,
                    f'{opt.name}: "{redact_urls(url)}" is not a valid URL: {reason}',
                    "invalid-value",
                )


RULES: tuple[Rule, ...] = (
    check_identity,
    check_channels,
    check_store,
    check_modes,
    check_cluster,
    check_encryption,
    check_tls,
    check_files,
    check_directories,
    check_remote_syslog,
    check_nats_urls,
)


def run_rules(ctx: Context) -> None:
    for rule in RULES:
        rule(ctx)
