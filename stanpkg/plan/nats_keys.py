"""Top-level keys of a NATS server configuration that stanpkg hands to the embedded server.

The options the streaming server itself uses (host, port, monitoring ports, logging) are in
the options table; these other NATS-server-only keys are passed through verbatim, so an
existing ``-c nats.conf`` (accounts, authorization, routes, leafnodes, ...) keeps working.

Each key says which types of value nats-server takes for it (its ``opts.go`` asserts them):
a value of another type is rejected here, at the value's ``file:line:col``, with
nats-server's own complaint in parentheses. What lies inside a passed-through map is
left to ``nats-server -t`` (``stanpkg validate`` runs it).
"""

from __future__ import annotations

from dataclasses import dataclass

from stanpkg.conf import Kind, Node

_STRING, _INT, _BOOL, _MAP, _ARRAY = Kind.STRING, Kind.INT, Kind.BOOL, Kind.MAP, Kind.ARRAY

# How nats-server names the Go type of each kind of value in its messages.
GO_TYPES: dict[Kind, str] = {
    Kind.STRING: "string",
    Kind.INT: "int64",
    Kind.FLOAT: "float64",
    Kind.BOOL: "bool",
    Kind.DATETIME: "time.Time",
    Kind.ARRAY: "[]interface {}",
    Kind.MAP: "map[string]interface {}",
}

_IN_WORDS: dict[Kind, str] = {
    Kind.STRING: "a string",
    Kind.INT: "an integer",
    Kind.FLOAT: "a number",
    Kind.BOOL: "a boolean",
    Kind.DATETIME: "a date",
    Kind.ARRAY: "an array",
    Kind.MAP: "a map",
}


@dataclass(frozen=True)
class NatsKey:
    names: tuple[str, ...]  # the key and its aliases, as nats-server spells them
    takes: tuple[Kind, ...]  # the kinds of value nats-server accepts; () = any
    # nats-server's complaint about a value of another kind: {got} is that value's Go
    # type, {key} the key; "" = its type assertion's "interface conversion" panic text.
    complaint: str = ""

    def expected(self) -> str:
        """The accepted kinds in words: 'a string or an array'."""
        words = [_IN_WORDS[k] for k in self.takes]
        return " or ".join(filter(None, (", ".join(words[:-1]), words[-1])))

    def reference_text(self, key: str, got: Node) -> str:
        if self.complaint:
            return self.complaint.format(key=key, got=GO_TYPES[got.kind])
        want = GO_TYPES[self.takes[0]]
        return f"interface conversion: interface {{}} is {GO_TYPES[got.kind]}, not {want}"

    def accepts(self, node: Node) -> bool:
        return not self.takes or node.kind in self.takes


def _key(names: str, *takes: Kind, complaint: str = "") -> NatsKey:
    return NatsKey(tuple(names.split()), takes, complaint)


_DURATION = 'invalid use of field "{key}": {key} should be converted to a duration'
_OPERATORS = "error parsing operators: unsupported type {got}"
_RESOLVER = "error parsing operator resolver, wrong type {got}"

# From the processConfigFileLine switch of nats-server 2.15's server/opts.go. Checked
# against the binary by tests/plan/test_nats_types.py and tests/fuzz/nats_types.py.
NATS_KEYS: tuple[NatsKey, ...] = (
    # accounts: nats-server ignores a value that is neither a map nor an array.
    _key("accounts"),
    _key("authorization", _MAP),
    _key("client_advertise", _STRING),
    _key("cluster", _MAP, complaint="Expected map to define cluster, got {got}"),
    _key("connect_error_reports", _INT),
    _key(
        "default_js_domain",
        _MAP,
        complaint="error default_js_domain config: unsupported type {got}",
    ),
    _key("default_sentinel", _STRING),
    _key("disable_sublist_cache no_sublist_cache", _BOOL),
    _key("feature_flags", _MAP, complaint="error parsing feature flags: unsupported type {got}"),
    _key("gateway", _MAP, complaint="Expected gateway to be a map, got {got}"),
    _key("http_base_path", _STRING),
    _key(
        "jetstream",
        _MAP,
        _BOOL,
        _STRING,
        complaint="Expected map, bool or string to define JetStream, got {got}",
    ),
    _key("lame_duck_duration", _STRING),
    _key("lame_duck_grace_period", _STRING),
    _key("leafnodes leaf", _MAP, complaint="Expected map to define a leafnode, got {got}"),
    _key("logfile_max_num log_max_num", _INT),
    _key("logfile_size_limit log_size_limit", _INT),
    _key("logtime_utc", _BOOL),
    _key("mappings maps", _MAP),
    _key("max_closed_clients", _INT),
    _key("max_connections max_conn", _INT),
    _key("max_control_line", _INT),
    _key("max_payload", _INT),
    _key("max_pending", _INT),
    _key("max_sub_tokens max_subscription_tokens", _INT),
    _key("max_subscriptions max_subs", _INT),
    _key("max_traced_msg_len", _INT),
    _key("mqtt", _MAP, complaint="Expected mqtt to be a map, got {got}"),
    _key("allow_non_tls", _BOOL),
    _key("no_auth_user", _STRING),
    _key("no_fast_producer_stall", _BOOL),
    _key("no_header_support", _BOOL),
    _key("no_system_account no_system no_sys_acc", _BOOL),
    _key("ocsp", _BOOL, _MAP, complaint="error parsing ocsp config: unsupported type {got}"),
    # (sic: nats-server reuses the server_tags text here)
    _key("ocsp_cache", _BOOL, _MAP, complaint="error parsing tags: unsupported type {got}"),
    _key(
        "operator operators roots root root_operators root_operator",
        _STRING,
        _ARRAY,
        complaint=_OPERATORS,
    ),
    _key("ping_interval", _STRING, complaint=_DURATION),
    _key("ping_max", _INT),
    _key("ports_file_dir", _STRING),
    _key("prof_block_rate", _INT),
    _key("prof_port", _INT),
    _key("proxies", _MAP, complaint="expected proxies to be a map/struct, got {got}"),
    _key("proxy_protocol", _BOOL),
    _key("reconnect_error_reports", _INT),
    _key("resolver account_resolver accounts_resolver", _STRING, _MAP, complaint=_RESOLVER),
    _key(
        "resolver_pinned_accounts",
        _STRING,
        _ARRAY,
        complaint="error parsing resolver_pinned_accounts: unsupported type {got}",
    ),
    _key(
        "resolver_preload",
        _MAP,
        complaint="preload should be a map of account_public_key:account_jwt",
    ),
    _key("resolver_tls", _MAP),
    _key("server_metadata", _MAP, complaint="error parsing metadata: unsupported type {got}"),
    _key("server_name", _STRING),
    _key("server_tags", _STRING, _ARRAY, complaint="error parsing tags: unsupported type {got}"),
    _key("store_dir storedir", _STRING),
    _key("system_account system", _STRING, complaint="system account name must be a string"),
    _key("tls", _MAP),
    _key("trace_headers", _BOOL),
    _key("trace_verbose", _BOOL),
    _key(
        "trusted trusted_keys",
        _STRING,
        _ARRAY,
        complaint="error parsing trusted: unsupported type {got}",
    ),
    _key("websocket ws", _MAP, complaint="Expected websocket to be a map, got {got}"),
    _key("write_deadline", _STRING, complaint=_DURATION),
    _key("write_timeout", _STRING),
)

NATS_KEY_INDEX: dict[str, NatsKey] = {name: key for key in NATS_KEYS for name in key.names}

NATS_PASSTHROUGH_KEYS: frozenset[str] = frozenset(NATS_KEY_INDEX)

# Keys written as "host:port" or a bare port, and the port option each one sets.
NATS_ADDRESS_KEYS: dict[str, str] = {"listen": "port", "http": "http_port", "https": "https_port"}
