"""Options of the table: clustering (``cluster``)."""

from __future__ import annotations

from stanpkg.plan.options.core import Kind, Option, moot_in_clustered_mode

OPTIONS: tuple[Option, ...] = (
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
        doc=moot_in_clustered_mode("JetStream caches its own Raft log"),
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
        doc=moot_in_clustered_mode("JetStream snapshots and compacts its Raft logs itself"),
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
        doc=moot_in_clustered_mode("JetStream snapshots and compacts its Raft logs itself"),
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
        doc=moot_in_clustered_mode(
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
        doc=moot_in_clustered_mode(
            "there is no bbolt log store; JetStream keeps its files in `log_path`"
        ),
    ),
    Option(
        "cluster.bolt_free_list_map",
        Kind.BOOL,
        False,
        "Use a map instead of an array for the free list of the Raft log store",
        keys=("bolt_free_list_map",),
        doc=moot_in_clustered_mode(
            "there is no bbolt log store; JetStream keeps its files in `log_path`"
        ),
    ),
    Option(
        "cluster.nodes_connections",
        Kind.BOOL,
        False,
        "Use one NATS connection per peer for the Raft transport",
        keys=("nodes_connections",),
        doc=moot_in_clustered_mode(
            "JetStream's replication uses the NATS routes between the nodes"
        ),
    ),
    Option(
        "cluster.channel_streams",
        Kind.INT,
        4,
        "Number of JetStream streams the channels of a clustered server are kept in",
        keys=("channel_streams",),
        doc="Number of replicated JetStream streams new channels are spread over (each "
        "channel is a subject of one of them; creating a channel creates no stream). Any "
        "number of channels fits: more streams spread the replication work over more Raft "
        "groups, fewer mean fewer elections when the serving node dies (the last channel "
        "serves after the slowest of them). One stream takes more messages a second than "
        "a serving node writes. A channel stays in its stream when this changes. No effect "
        "unless clustered (docs/clustering.md)",
        flags=("--cluster_channel_streams",),
        minimum=1,
        maximum=1000,
        range_error="cluster channel_streams must be between 1 and 1000 (got {value})",
    ),
    Option(
        "cluster.pack_bytes",
        Kind.SIZE,
        0,
        "Size of the stream messages a clustered server packs small messages in (0: none)",
        keys=("pack_bytes",),
        doc="Size of the JetStream messages a clustered server packs small messages in. "
        "0 (the default) stores every message as a stream message of its own, which any "
        "JetStream client reads as published. A size packs the messages of one flush of a "
        "channel, up to it, into one stream message: JetStream's servers then spend about "
        "a third less CPU per message, and a cluster on a busy host publishes up to a "
        "third faster, but plain JetStream clients must decode the packs "
        "(docs/clustering.md). A larger message is stored alone. Once packs are written "
        "the cluster's layout is 3, which earlier releases refuse; every node of this "
        "release reads both. No effect unless clustered (docs/clustering.md)",
        flags=("--cluster_pack_bytes",),
        maximum=512 * 1024,
        range_error="cluster pack_bytes must be at most 512KB (got {value})",
    ),
    Option(
        "cluster.read_cache",
        Kind.SIZE,
        64 * 1024 * 1024,
        "Memory the serving node of a cluster keeps channels' messages in",
        keys=("read_cache",),
        doc="Memory the serving node of a cluster keeps channels' messages in, newest "
        "written and most recently read first. Every message is in JetStream: what is not "
        "in memory is read from the node's own replica when a subscription needs it, so "
        "the node's memory does not grow with what is stored, and a promotion reads no "
        "message. No effect unless clustered (docs/clustering.md)",
        flags=("--cluster_read_cache",),
        minimum=1024 * 1024,
        range_error="cluster read_cache must be at least 1MB (got {value})",
    ),
)
