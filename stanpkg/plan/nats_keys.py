"""Top-level keys of a NATS server configuration that stanpkg hands to the embedded server.

The options the streaming server itself uses (host, port, monitoring ports, logging) are in
the options table; these other NATS-server-only keys are passed through verbatim, so an
existing ``-c nats.conf`` (accounts, authorization, routes, leafnodes, ...) keeps working.
"""

from __future__ import annotations

NATS_PASSTHROUGH_KEYS: frozenset[str] = frozenset(
    {
        "accounts",
        "authorization",
        "client_advertise",
        "cluster",
        "connect_error_reports",
        "default_js_domain",
        "disable_sublist_cache",
        "gateway",
        "http_base_path",
        "jetstream",
        "lame_duck_duration",
        "lame_duck_grace_period",
        "leaf",
        "leafnodes",
        "logfile_size_limit",
        "max_closed_clients",
        "max_conn",
        "max_connections",
        "max_control_line",
        "max_payload",
        "max_pending",
        "max_subs",
        "max_subscriptions",
        "max_traced_msg_len",
        "mqtt",
        "no_auth_user",
        "no_header_support",
        "no_system_account",
        "ocsp",
        "operator",
        "operators",
        "ping_interval",
        "ping_max",
        "ports_file_dir",
        "reconnect_error_reports",
        "resolver",
        "resolver_preload",
        "resolver_tls",
        "server_name",
        "server_tags",
        "system_account",
        "tls",
        "trusted",
        "trusted_keys",
        "websocket",
        "write_deadline",
    }
)

# Keys written as "host:port" or a bare port, and the port option each one sets.
NATS_ADDRESS_KEYS: dict[str, str] = {"listen": "port", "http": "http_port", "https": "https_port"}
