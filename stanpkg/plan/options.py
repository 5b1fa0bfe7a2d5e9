"""The one table of streaming-server options.

Every option is declared here exactly once: its canonical path in the normalised
configuration, the keys (aliases) that set it in a config file, its command-line flags,
its type, default, valid range and help text. The argument parser, the JSON Schema in
``schemas/``, the defaults, ``docs/configuration.md`` and the Ansible role's variables are
derived from this table (tests check the generated files are up to date).

Paths are ``section.name``; the sections are the maps of a streaming configuration
(``store_limits``, ``file_options``, ``sql_options``, ``cluster``, ``tls``), the top level of
the streaming configuration (no dot), and ``nats_server``: options of the embedded NATS
server, which live at the top level of a NATS configuration file (not in the streaming
block) or come from the NATS server's own flags.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from enum import StrEnum


class Kind(StrEnum):
    INT = "int"
    SIZE = "size"  # integer, NATS size suffixes allowed (10MB, 1KiB)
    DURATION = "duration"  # Go duration string ("1h30m"), stored as nanoseconds
    BOOL = "bool"
    STRING = "string"
    STRINGS = "strings"  # array of strings in a file, comma-separated on the command line


# Sections of the normalised configuration, in documentation order, with the config keys
# that name each section's map (first = canonical). Top level has no map.
SECTION_KEYS: dict[str, tuple[str, ...]] = {
    "": (),
    "store_limits": ("store_limits", "limits", "storelimits"),
    "file_options": ("file_options", "file"),
    "sql_options": ("sql_options", "sql"),
    "cluster": ("cluster",),
    "tls": ("tls",),
    "nats_server": (),
}

SECTION_TITLES: dict[str, str] = {
    "": "Streaming server",
    "store_limits": "Store limits",
    "file_options": "File store",
    "sql_options": "SQL store",
    "cluster": "Clustering",
    "tls": "TLS connection to NATS",
    "nats_server": "Embedded NATS server and logging",
}

# Keys of a per-channel limits map inside store_limits (and the keys naming that map).
CHANNELS_KEYS = (
    "channels",
    "channels_limits",
    "channelslimits",
    "per_channel",
    "per_channel_limits",
)


def _moot_in_clustered_mode(instead: str) -> str:
    """The doc of one of the reference's Raft/bbolt tuning options (plan/rules.py warns)."""
    return (
        f"Accepted for compatibility and ignored (a warning when clustered): {instead} "
        "(docs/clustering.md)."
    )


@dataclass(frozen=True)
class Option:
    path: str
    kind: Kind
    default: object
    help: str
    keys: tuple[str, ...] = ()  # config-file keys within the section; () = not settable in a file
    flags: tuple[str, ...] = ()  # command-line flags as the reference's usage shows them
    minimum: int | None = None
    maximum: int | None = None
    range_error: str = ""  # message when out of range; {value} is the value as written
    choices: tuple[str, ...] = ()  # case-insensitive allowed values of a STRING
    env: str = ""  # environment variable that overrides the file (flags still win)
    secret: bool = False  # never printed, never written into a plan dump
    url_credentials: bool = False  # URLs: the password (or token) in them is never shown
    per_channel: bool = False  # also a key of per-channel limit maps
    file_path: bool = False  # names a file that must exist and be readable
    dir_path: bool = False  # names a directory the server creates if missing and writes into
    metavar: str = ""
    # Where ``help`` (the reference's usage text, kept for --help) is wrong for stanpkg:
    # the description docs/configuration.md shows instead, and the default in words when
    # the literal default stands for a choice made at run time.
    doc: str = ""
    default_doc: str = ""
    # 0 stands for the default (as the reference reads the Raft timeouts), so the
    # minimum applies to the other values only.
    zero_is_default: bool = False

    @property
    def description(self) -> str:
        """What the docs and the schema say of the option."""
        return self.doc or self.help

    @property
    def section(self) -> str:
        return self.path.rpartition(".")[0]

    @property
    def name(self) -> str:
        return self.path.rpartition(".")[2]


def _limit(
    name: str,
    kind: Kind,
    default: int,
    keys: tuple[str, ...],
    flags: tuple[str, ...],
    what: str,
    help: str,
) -> Option:
    return Option(
        f"store_limits.{name}",
        kind,
        default,
        help,
        keys=keys,
        flags=flags,
        minimum=0,
        range_error=f"max {what} limit cannot be negative ({{value}})",
        per_channel=name != "max_channels",
    )


OPTIONS: tuple[Option, ...] = (
    # --- streaming server, top level -------------------------------------------------
    Option(
        "cluster_id",
        Kind.STRING,
        "test-cluster",
        "Cluster ID",
        keys=("cluster_id", "cid", "id"),
        flags=("-cid", "--cluster_id"),
    ),
    Option(
        "discover_prefix",
        Kind.STRING,
        "_STAN.discover",
        "Prefix of the subject clients send connect requests to",
        keys=("discover_prefix",),
    ),
    Option(
        "store_type",
        Kind.STRING,
        "MEMORY",
        "Store type: MEMORY|FILE|SQL",
        keys=("store_type", "st", "store", "storetype"),
        flags=("-st", "--store"),
        choices=("MEMORY", "FILE", "SQL"),
    ),
    Option(
        "dir",
        Kind.STRING,
        "",
        "For FILE store type, this is the root directory",
        keys=("dir", "datastore"),
        flags=("--dir",),
        dir_path=True,
    ),
    Option(
        "nats_server_url",
        Kind.STRING,
        "",
        "Connect to this external NATS Server URL (embedded otherwise)",
        keys=("nats_server_url", "ns", "nats_server"),
        flags=("-ns", "--nats_server"),
        url_credentials=True,
    ),
    Option(
        "credentials",
        Kind.STRING,
        "",
        "Credentials file used to connect to NATS",
        keys=("credentials",),
        file_path=True,
    ),
    Option(
        "username", Kind.STRING, "", "User name used to connect to NATS", keys=("username", "user")
    ),
    Option(
        "password",
        Kind.STRING,
        "",
        "Password used to connect to NATS",
        keys=("password", "pass"),
        secret=True,
    ),
    Option("token", Kind.STRING, "", "Token used to connect to NATS", keys=("token",), secret=True),
    Option(
        "nkey_seed_file",
        Kind.STRING,
        "",
        "NKey seed file used to connect to NATS",
        keys=("nkey_seed_file",),
        file_path=True,
    ),
    Option(
        "secure",
        Kind.BOOL,
        False,
        "Use a TLS connection to the NATS server without verification; weaker than "
        "specifying certificates.",
        keys=("secure",),
        flags=("-secure",),
    ),
    Option(
        "hb_interval",
        Kind.DURATION,
        30_000_000_000,
        "Interval at which server sends heartbeat to a client",
        keys=("hb_interval", "hbi", "server_to_client_hb_interval"),
        flags=("-hbi", "--hb_interval"),
        minimum=1,
        range_error="heartbeat interval must be positive (got {value})",
    ),
    Option(
        "hb_timeout",
        Kind.DURATION,
        10_000_000_000,
        "How long server waits for a heartbeat response",
        keys=("hb_timeout", "hbt", "server_to_client_hb_timeout"),
        flags=("-hbt", "--hb_timeout"),
        minimum=1,
        range_error="heartbeat timeout must be positive (got {value})",
    ),
    Option(
        "hb_fail_count",
        Kind.INT,
        10,
        "Number of failed heartbeats before server closes the client connection",
        keys=("hb_fail_count", "hbf", "server_to_client_hb_fail_count"),
        flags=("-hbf", "--hb_fail_count"),
        minimum=0,
        range_error="heartbeat fail count cannot be negative (got {value})",
    ),
    Option(
        "ft_group",
        Kind.STRING,
        "",
        "Name of the FT Group. A group can be 2 or more servers with a single active "
        "server and all sharing the same datastore",
        keys=("ft_group", "ft_group_name"),
        flags=("--ft_group",),
    ),
    Option(
        "partitioning",
        Kind.BOOL,
        False,
        "Serve only the channels listed in store_limits.channels (wildcards allowed)",
        keys=("partitioning",),
    ),
    Option(
        "encrypt",
        Kind.BOOL,
        False,
        "Specify if server should use encryption at rest",
        keys=("encrypt",),
        flags=("--encrypt",),
        doc="Encrypt message payloads at rest, with every store type (MEMORY, FILE, SQL). "
        "Messages stored before it was turned on are still served. See docs/running.md.",
    ),
    Option(
        "encryption_cipher",
        Kind.STRING,
        "",
        "Cipher to use for encryption. Currently support AES and CHAHA (ChaChaPoly). "
        "Defaults to AES",
        keys=("encryption_cipher",),
        flags=("--encryption_cipher",),
        choices=("AES", "CHACHA"),
        doc="Cipher for encryption at rest (case-insensitive); `stanpkg plan` shows the one "
        "in use.",
        # plan/encryption.py (default_cipher_name) implements this rule.
        default_doc="by machine architecture, AES on x86 (amd64, 386), CHACHA elsewhere",
    ),
    Option(
        "encryption_key",
        Kind.STRING,
        "",
        "Encryption Key. It is recommended to specify it through the "
        "NATS_STREAMING_ENCRYPTION_KEY environment variable instead",
        keys=("encryption_key",),
        flags=("--encryption_key",),
        env="NATS_STREAMING_ENCRYPTION_KEY",
        secret=True,
    ),
    Option(
        "replace_durable",
        Kind.BOOL,
        False,
        "Replace the existing durable subscription instead of reporting a duplicate durable error",
        keys=(
            "replace_durable",
            "replace_durables",
            "replace_duplicate_durable",
            "replace_duplicate_durables",
        ),
        flags=("--replace_durable",),
    ),
    Option(
        "stan_debug",
        Kind.BOOL,
        False,
        "Enable STAN debugging output",
        keys=("stan_debug", "sd"),
        flags=("-SD", "--stan_debug"),
    ),
    Option(
        "stan_trace",
        Kind.BOOL,
        False,
        "Trace the raw STAN protocol",
        keys=("stan_trace", "sv"),
        flags=("-SV", "--stan_trace"),
    ),
    Option(
        "syslog_name",
        Kind.STRING,
        "",
        "On Windows, when running several servers as a service, use this name for the event source",
        keys=("syslog_name",),
        flags=("--syslog_name",),
    ),
    Option(
        "io_batch_size",
        Kind.INT,
        1024,
        "Maximum number of messages the server processes in one batch",
        flags=("--io_batch_size",),
        minimum=1,
        range_error="io batch size must be at least 1 (got {value})",
    ),
    Option(
        "io_sleep_time",
        Kind.INT,
        0,
        "Time (in microseconds) the server waits for more messages before flushing",
        flags=("--io_sleep_time",),
        minimum=0,
        range_error="io sleep time cannot be negative (got {value})",
    ),
    # --- store limits ------------------------------------------------------------------
    _limit(
        "max_channels",
        Kind.INT,
        100,
        ("max_channels", "mc", "maxchannels"),
        ("-mc", "--max_channels"),
        "channels",
        "Max number of channels (0 for unlimited)",
    ),
    _limit(
        "max_subs",
        Kind.INT,
        1000,
        ("max_subs", "msu", "max_subscriptions", "maxsubscriptions"),
        ("-msu", "--max_subs"),
        "subscriptions",
        "Max number of subscriptions per channel (0 for unlimited)",
    ),
    _limit(
        "max_msgs",
        Kind.INT,
        1_000_000,
        ("max_msgs", "mm", "maxmsgs", "max_count", "maxcount"),
        ("-mm", "--max_msgs"),
        "messages",
        "Max number of messages per channel (0 for unlimited)",
    ),
    _limit(
        "max_bytes",
        Kind.SIZE,
        1_024_000_000,
        ("max_bytes", "mb", "maxbytes"),
        ("-mb", "--max_bytes"),
        "bytes",
        "Max messages total size per channel (0 for unlimited)",
    ),
    _limit(
        "max_age",
        Kind.DURATION,
        0,
        ("max_age", "ma", "maxage"),
        ("-ma", "--max_age"),
        "age",
        'Max duration a message can be stored ("0s" for unlimited)',
    ),
    _limit(
        "max_inactivity",
        Kind.DURATION,
        0,
        ("max_inactivity", "mi", "maxinactivity"),
        ("-mi", "--max_inactivity"),
        "inactivity",
        "Max inactivity (no new message, no subscription) after which a channel can be "
        "garbage collected (0 for unlimited)",
    ),
    # --- file store --------------------------------------------------------------------
    Option(
        "file_options.compact_enabled",
        Kind.BOOL,
        True,
        "Enable file compaction",
        keys=("compact_enabled", "compact"),
        flags=("--file_compact_enabled",),
    ),
    Option(
        "file_options.compact_frag",
        Kind.INT,
        50,
        "File fragmentation threshold for compaction",
        keys=("compact_frag", "compact_fragmentation"),
        flags=("--file_compact_frag",),
        minimum=1,
        range_error="compact fragmentation value must at least be 1",
    ),
    Option(
        "file_options.compact_interval",
        Kind.INT,
        300,
        "Minimum interval (in seconds) between file compactions",
        keys=("compact_interval",),
        flags=("--file_compact_interval",),
        minimum=1,
        range_error="compact interval value must at least be 1 seconds",
    ),
    Option(
        "file_options.compact_min_size",
        Kind.SIZE,
        1024 * 1024,
        "Minimum file size for compaction",
        keys=("compact_min_size",),
        flags=("--file_compact_min_size",),
        minimum=0,
        range_error="compact minimum file size value must be a positive number",
    ),
    Option(
        "file_options.buffer_size",
        Kind.SIZE,
        2 * 1024 * 1024,
        "File buffer size (in bytes)",
        keys=("buffer_size",),
        flags=("--file_buffer_size",),
        minimum=0,
        range_error="buffer size value must be a positive number",
    ),
    Option(
        "file_options.crc",
        Kind.BOOL,
        True,
        "Enable file CRC-32 checksum",
        keys=("crc", "do_crc"),
        flags=("--file_crc",),
    ),
    Option(
        "file_options.crc_poly",
        Kind.INT,
        0xEDB88320,
        "Polynomial used to make the table used for CRC-32 checksum",
        keys=("crc_poly",),
        flags=("--file_crc_poly",),
        minimum=1,
        maximum=0xFFFFFFFF,
        range_error="crc polynomial should be between 1 and 4294967295",
    ),
    Option(
        "file_options.sync_on_flush",
        Kind.BOOL,
        True,
        "Enable File.Sync on Flush",
        keys=("sync_on_flush", "sync", "do_sync"),
        flags=("--file_sync",),
    ),
    Option(
        "file_options.slice_max_msgs",
        Kind.INT,
        0,
        "Maximum number of messages per file slice (subject to channel limits)",
        keys=("slice_max_msgs", "slice_max_count", "slice_msgs", "slice_count"),
        flags=("--file_slice_max_msgs",),
        minimum=0,
        range_error="slice max values must be positive numbers",
    ),
    Option(
        "file_options.slice_max_bytes",
        Kind.SIZE,
        64 * 1024 * 1024,
        "Maximum file slice size - including index file (subject to channel limits)",
        keys=("slice_max_bytes", "slice_max_size", "slice_bytes", "slice_size"),
        flags=("--file_slice_max_bytes",),
        minimum=0,
        range_error="slice max values must be positive numbers",
    ),
    Option(
        "file_options.slice_max_age",
        Kind.DURATION,
        0,
        "Maximum file slice duration starting when the first message is stored "
        "(subject to channel limits)",
        keys=("slice_max_age", "slice_age", "slice_max_time", "slice_time_limit"),
        flags=("--file_slice_max_age",),
        minimum=0,
        range_error="slice max values must be positive numbers",
    ),
    Option(
        "file_options.slice_archive_script",
        Kind.STRING,
        "",
        "Path to script to use if you want to archive a file slice being removed",
        keys=("slice_archive_script", "slice_archive", "slice_script"),
        flags=("--file_slice_archive_script",),
        file_path=True,
    ),
    Option(
        "file_options.file_descriptors_limit",
        Kind.INT,
        0,
        "Store will try to use no more file descriptors than this given limit",
        keys=("file_descriptors_limit", "fds_limit"),
        flags=("--file_fds_limit",),
        minimum=0,
        range_error="file descriptor limit must be a positive number",
    ),
    Option(
        "file_options.parallel_recovery",
        Kind.INT,
        1,
        "On startup, number of channels that can be recovered in parallel",
        keys=("parallel_recovery",),
        flags=("--file_parallel_recovery",),
        minimum=1,
        range_error="parallel recovery value must be at least 1",
    ),
    Option(
        "file_options.read_buffer_size",
        Kind.SIZE,
        2 * 1024 * 1024,
        "Size of messages read ahead buffer (0 to disable)",
        keys=("read_buffer_size", "file_read_buffer_size"),
        flags=("--file_read_buffer_size",),
        minimum=0,
        range_error="read buffer size value must be a positive number",
    ),
    Option(
        "file_options.auto_sync",
        Kind.DURATION,
        60_000_000_000,
        "Interval at which the store should be automatically flushed and sync'ed on "
        "disk (<= 0 to disable)",
        keys=("auto_sync", "file_auto_sync"),
        flags=("--file_auto_sync",),
    ),
    Option(
        "file_options.truncate_bad_eof",
        Kind.BOOL,
        False,
        "Truncate files for which there is an unexpected EOF on recovery, dataloss may occur",
        flags=("--file_truncate_bad_eof",),
    ),
    # --- SQL store ---------------------------------------------------------------------
    Option(
        "sql_options.driver",
        Kind.STRING,
        "",
        'Name of the SQL Driver ("mysql", "postgres" or "sqlite")',
        keys=("driver",),
        flags=("--sql_driver",),
        choices=("mysql", "postgres", "sqlite"),
    ),
    Option(
        "sql_options.source",
        Kind.STRING,
        "",
        "Datasource used when opening an SQL connection to the database",
        keys=("source",),
        flags=("--sql_source",),
        secret=True,
    ),
    Option(
        "sql_options.no_caching",
        Kind.BOOL,
        False,
        "Enable/Disable caching for improved performance",
        keys=("no_caching",),
        flags=("--sql_no_caching",),
    ),
    Option(
        "sql_options.max_open_conns",
        Kind.INT,
        0,
        "Maximum number of opened connections to the database",
        keys=("max_open_conns", "max_conns"),
        flags=("--sql_max_open_conns",),
        minimum=0,
        range_error="max open connections cannot be negative (got {value})",
    ),
    Option(
        "sql_options.bulk_insert_limit",
        Kind.INT,
        0,
        "Maximum number of messages stored with a single SQL insert (0 to disable)",
        keys=("bulk_insert_limit",),
        flags=("--sql_bulk_insert_limit",),
        minimum=0,
        range_error="bulk insert limit cannot be negative (got {value})",
    ),
    # --- clustering --------------------------------------------------------------------
    Option(
        "cluster.clustered",
        Kind.BOOL,
        False,
        "Run the server in a clustered configuration (default: false)",
        flags=("--clustered",),
    ),
    Option(
        "cluster.node_id",
        Kind.STRING,
        "",
        "ID of the node within the cluster if there is no stored ID (default: random UUID)",
        keys=("node_id",),
        doc="ID of the node within the cluster if there is no stored ID (default: a unique ID). "
        "It names the embedded nats-server among its JetStream peers (`server_name`); once "
        "used it is kept in the store directory and the configured one is ignored",
        flags=("--cluster_node_id",),
    ),
    Option(
        "cluster.bootstrap",
        Kind.BOOL,
        False,
        "Bootstrap the cluster if there is no existing state by electing self as leader "
        "(default: false)",
        keys=("bootstrap",),
        doc="Start a one-node cluster when there are no peers (JetStream replicas: 1)",
        flags=("--cluster_bootstrap",),
    ),
    Option(
        "cluster.peers",
        Kind.STRINGS,
        (),
        "Comma separated list of cluster peer node IDs to bootstrap cluster state",
        keys=("peers",),
        doc="Node IDs of the other nodes (comma-separated on the command line). Every channel "
        "and record is replicated on 1 + peers nodes, at most 5 (JetStream's limit)",
        flags=("--cluster_peers",),
    ),
    Option(
        "cluster.log_path",
        Kind.STRING,
        "",
        "Directory to store log replication data",
        keys=("log_path",),
        doc="The node's JetStream store (the embedded nats-server's `store_dir`), relative to "
        "the working directory; never shared by two nodes",
        default_doc="the cluster ID/the node ID, in the working directory",
        flags=("--cluster_log_path",),
        dir_path=True,
    ),
    Option(
        "cluster.log_cache_size",
        Kind.INT,
        512,
        "Number of log entries to cache in memory to reduce disk IO (default: 512)",
        keys=("log_cache_size",),
        doc=_moot_in_clustered_mode("JetStream caches its own Raft log"),
        flags=("--cluster_log_cache_size",),
        minimum=0,
        range_error="log cache size cannot be negative (got {value})",
    ),
    Option(
        "cluster.log_snapshots",
        Kind.INT,
        2,
        "Number of log snapshots to retain (default: 2)",
        keys=("log_snapshots",),
        doc=_moot_in_clustered_mode("JetStream snapshots and compacts its Raft logs itself"),
        flags=("--cluster_log_snapshots",),
        minimum=0,
        range_error="log snapshots cannot be negative (got {value})",
    ),
    Option(
        "cluster.trailing_logs",
        Kind.INT,
        10240,
        "Number of log entries to leave after a snapshot and compaction",
        keys=("trailing_logs",),
        doc=_moot_in_clustered_mode("JetStream snapshots and compacts its Raft logs itself"),
        flags=("--cluster_trailing_logs",),
        minimum=0,
        range_error="trailing logs cannot be negative (got {value})",
    ),
    Option(
        "cluster.sync",
        Kind.BOOL,
        False,
        "Do a file sync after every write to the replication log and message store",
        keys=("sync",),
        doc="Sync every write to disk: the embedded JetStream runs with `sync_interval: always`. "
        "Without it an acknowledged message is on a quorum of nodes, in memory or the page "
        "cache. An external NATS server's JetStream is configured by its operator",
        flags=("--cluster_sync",),
    ),
    Option(
        "cluster.proceed_on_restore_failure",
        Kind.BOOL,
        False,
        "Proceed to start the server if snapshot restoration fails",
        keys=("proceed_on_restore_failure",),
        doc=_moot_in_clustered_mode(
            "there is no snapshot to restore; a node that was down catches up from its "
            "JetStream peers"
        ),
        flags=("--cluster_proceed_on_restore_failure",),
    ),
    Option(
        "cluster.allow_add_remove_node",
        Kind.BOOL,
        False,
        "Enable the ability to send NATS requests to the leader to add/remove cluster nodes",
        keys=("allow_add_remove_node",),
        flags=("--cluster_allow_add_remove_node",),
    ),
    Option(
        "cluster.raft_logging",
        Kind.BOOL,
        False,
        "Enable logging from the Raft library (disabled by default)",
        keys=("raft_logging",),
        flags=("--cluster_raft_logging",),
    ),
    Option(
        "cluster.raft_heartbeat_timeout",
        Kind.DURATION,
        2_000_000_000,
        "Raft heartbeat timeout",
        keys=("raft_heartbeat_timeout",),
        doc="Checked as the Go server checks it (at least 5ms, 0 for the default, at least "
        "`raft_lease_timeout`); JetStream's own Raft timings are not tunable",
        minimum=5_000_000,
        range_error="raft_heartbeat_timeout is too low ({value}): at least 5ms, or 0 for the "
        "default (HeartbeatTimeout is too low)",
        zero_is_default=True,
    ),
    Option(
        "cluster.raft_election_timeout",
        Kind.DURATION,
        2_000_000_000,
        "Raft election timeout",
        keys=("raft_election_timeout",),
        doc="With `raft_lease_timeout`, the serving node's lease time: the larger of twice this "
        "and `raft_lease_timeout`. Checked as the Go server checks it (at least 5ms, 0 for the "
        "default, at least `raft_heartbeat_timeout`)",
        minimum=5_000_000,
        range_error="raft_election_timeout is too low ({value}): at least 5ms, or 0 for the "
        "default (ElectionTimeout is too low)",
        zero_is_default=True,
    ),
    Option(
        "cluster.raft_lease_timeout",
        Kind.DURATION,
        1_000_000_000,
        "Raft leader lease timeout",
        keys=("raft_lease_timeout",),
        doc="With `raft_election_timeout`, the serving node's lease time: the larger of this and "
        "twice `raft_election_timeout`. Checked as the Go server checks it (at least 5ms, 0 for "
        "the default, at most `raft_heartbeat_timeout`)",
        minimum=5_000_000,
        range_error="raft_lease_timeout is too low ({value}): at least 5ms, or 0 for the "
        "default (LeaderLeaseTimeout is too low)",
        zero_is_default=True,
    ),
    Option(
        "cluster.raft_commit_timeout",
        Kind.DURATION,
        100_000_000,
        "Raft commit timeout",
        keys=("raft_commit_timeout",),
        doc="Checked as the Go server checks it (at least 1ms, 0 for the default); JetStream's "
        "own Raft timings are not tunable",
        minimum=1_000_000,
        range_error="raft_commit_timeout is too low ({value}): at least 1ms, or 0 for the "
        "default (CommitTimeout is too low)",
        zero_is_default=True,
    ),
    Option(
        "cluster.bolt_free_list_sync",
        Kind.BOOL,
        False,
        "Sync the free list of the Raft log store",
        keys=("bolt_free_list_sync",),
        doc=_moot_in_clustered_mode(
            "there is no bbolt log store; JetStream keeps its files in `log_path`"
        ),
    ),
    Option(
        "cluster.bolt_free_list_map",
        Kind.BOOL,
        False,
        "Use a map instead of an array for the free list of the Raft log store",
        keys=("bolt_free_list_map",),
        doc=_moot_in_clustered_mode(
            "there is no bbolt log store; JetStream keeps its files in `log_path`"
        ),
    ),
    Option(
        "cluster.nodes_connections",
        Kind.BOOL,
        False,
        "Use one NATS connection per peer for the Raft transport",
        keys=("nodes_connections",),
        doc=_moot_in_clustered_mode(
            "JetStream's replication uses the NATS routes between the nodes"
        ),
    ),
    # --- TLS to NATS -------------------------------------------------------------------
    Option(
        "tls.client_cert",
        Kind.STRING,
        "",
        "Client certificate for the streaming server",
        keys=("client_cert",),
        flags=("-tls_client_cert",),
        file_path=True,
    ),
    Option(
        "tls.client_key",
        Kind.STRING,
        "",
        "Client key for the streaming server",
        keys=("client_key",),
        flags=("-tls_client_key",),
        file_path=True,
    ),
    Option(
        "tls.client_ca",
        Kind.STRING,
        "",
        "Client certificate CA for the streaming server",
        keys=("client_ca", "client_cacert"),
        flags=("-tls_client_cacert",),
        file_path=True,
    ),
    Option(
        "tls.server_name",
        Kind.STRING,
        "",
        "Expected host name of the NATS server's certificate",
        keys=("server_name", "server_hostname"),
    ),
    Option(
        "tls.skip_verify",
        Kind.BOOL,
        False,
        "Do not verify the NATS server's certificate (DO NOT USE IN PRODUCTION)",
        keys=("skip_verify", "insecure"),
    ),
    # --- embedded NATS server, process and logging -------------------------------------
    Option(
        "nats_server.host",
        Kind.STRING,
        "0.0.0.0",
        "Bind to host address (default: 0.0.0.0)",
        keys=("host", "net"),
        flags=("-a", "--addr", "--net"),
        metavar="host",
    ),
    Option(
        "nats_server.port",
        Kind.INT,
        4222,
        "Use port for clients (default: 4222)",
        keys=("port",),
        flags=("-p", "--port"),
        minimum=-1,
        maximum=65535,
        range_error="port must be between -1 (random) and 65535 (got {value})",
        metavar="port",
    ),
    Option(
        "nats_server.http_port",
        Kind.INT,
        0,
        "Use port for http monitoring",
        keys=("http_port", "monitor_port"),
        flags=("-m", "--http_port"),
        minimum=-1,
        maximum=65535,
        range_error="port must be between -1 (random) and 65535 (got {value})",
        metavar="port",
    ),
    Option(
        "nats_server.https_port",
        Kind.INT,
        0,
        "Use port for https monitoring",
        keys=("https_port",),
        flags=("-ms", "--https_port"),
        minimum=-1,
        maximum=65535,
        range_error="port must be between -1 (random) and 65535 (got {value})",
        metavar="port",
    ),
    Option(
        "nats_server.http_host",
        Kind.STRING,
        "",
        "Bind the monitoring port to this address (default: the client address, -a)",
        keys=("http_host",),
        metavar="host",
    ),
    Option(
        "nats_server.pid_file",
        Kind.STRING,
        "",
        "File to store PID",
        keys=("pid_file", "pidfile"),
        flags=("-P", "--pid"),
        metavar="file",
    ),
    Option(
        "nats_server.log_file",
        Kind.STRING,
        "",
        "File to redirect log output",
        keys=("log_file", "logfile"),
        flags=("-l", "--log"),
        metavar="file",
    ),
    Option(
        "nats_server.logtime",
        Kind.BOOL,
        True,
        "Timestamp log entries (default: true)",
        keys=("logtime",),
        flags=("-T", "--logtime"),
    ),
    Option(
        "nats_server.syslog",
        Kind.BOOL,
        False,
        "Enable syslog as log method",
        keys=("syslog",),
        flags=("-s", "--syslog"),
    ),
    Option(
        "nats_server.remote_syslog",
        Kind.STRING,
        "",
        "Syslog server addr (udp://localhost:514)",
        keys=("remote_syslog",),
        flags=("-r", "--remote_syslog"),
        metavar="host",
    ),
    Option(
        "nats_server.debug",
        Kind.BOOL,
        False,
        "Enable debugging output",
        keys=("debug",),
        flags=("-D", "--debug"),
    ),
    Option(
        "nats_server.trace",
        Kind.BOOL,
        False,
        "Trace the raw protocol",
        keys=("trace",),
        flags=("-V", "--trace"),
    ),
    Option(
        "nats_server.user",
        Kind.STRING,
        "",
        "User required for connections",
        flags=("--user",),
        metavar="user",
    ),
    Option(
        "nats_server.password",
        Kind.STRING,
        "",
        "Password required for connections",
        flags=("--pass",),
        secret=True,
        metavar="password",
    ),
    Option(
        "nats_server.token",
        Kind.STRING,
        "",
        "Authorization token required for connections",
        flags=("--auth",),
        secret=True,
        metavar="token",
    ),
    Option(
        "nats_server.tls",
        Kind.BOOL,
        False,
        "Enable TLS, do not verify clients (default: false)",
        flags=("--tls",),
    ),
    Option(
        "nats_server.tls_cert",
        Kind.STRING,
        "",
        "Server certificate file",
        flags=("--tlscert",),
        file_path=True,
        metavar="file",
    ),
    Option(
        "nats_server.tls_key",
        Kind.STRING,
        "",
        "Private key for server certificate",
        flags=("--tlskey",),
        file_path=True,
        metavar="file",
    ),
    Option(
        "nats_server.tls_verify",
        Kind.BOOL,
        False,
        "Enable TLS, verify client certificates",
        flags=("--tlsverify",),
    ),
    Option(
        "nats_server.tls_ca_cert",
        Kind.STRING,
        "",
        "Client certificate CA for verification",
        flags=("--tlscacert",),
        file_path=True,
        metavar="file",
    ),
    Option(
        "nats_server.routes",
        Kind.STRINGS,
        (),
        "Routes to solicit and connect",
        flags=("--routes",),
        metavar="rurl-1, rurl-2",
        url_credentials=True,
    ),
    Option(
        "nats_server.cluster_listen",
        Kind.STRING,
        "",
        "Cluster URL for solicited routes",
        flags=("--cluster",),
        metavar="cluster-url",
        url_credentials=True,
    ),
    Option(
        "nats_server.cluster_name",
        Kind.STRING,
        "",
        "Cluster name of the NATS routes",
        flags=("--cluster_name",),
        metavar="name",
    ),
)

# Flags that set several boolean options at once.
COMPOUND_FLAGS: dict[str, tuple[str, ...]] = {
    "-SDV": ("stan_debug", "stan_trace"),
    "-DV": ("nats_server.debug", "nats_server.trace"),
}

BY_PATH: dict[str, Option] = {o.path: o for o in OPTIONS}


def options_in(section: str) -> Iterator[Option]:
    return (o for o in OPTIONS if o.section == section)


def key_index(section: str) -> dict[str, Option]:
    """Lower-cased config key -> option, for one section (keys are case-insensitive)."""
    return {k.lower(): o for o in options_in(section) for k in o.keys}


def per_channel_key_index() -> dict[str, Option]:
    return {k.lower(): o for o in options_in("store_limits") if o.per_channel for k in o.keys}
