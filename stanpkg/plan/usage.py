"""The server's usage text, generated from the options table."""

from __future__ import annotations

from stanpkg.plan.options import OPTIONS, Kind, Option

_NATS_GROUPS: dict[str, str] = {
    "host": "Embedded NATS Server Options",
    "port": "Embedded NATS Server Options",
    "pid_file": "Embedded NATS Server Options",
    "http_port": "Embedded NATS Server Options",
    "https_port": "Embedded NATS Server Options",
    "memory_limit": "Embedded NATS Server Options",
    "log_file": "Logging Options",
    "logtime": "Logging Options",
    "syslog": "Logging Options",
    "remote_syslog": "Logging Options",
    "debug": "Logging Options",
    "trace": "Logging Options",
    "user": "Authorization Options",
    "password": "Authorization Options",
    "token": "Authorization Options",
    "tls": "TLS Options",
    "tls_cert": "TLS Options",
    "tls_key": "TLS Options",
    "tls_verify": "TLS Options",
    "tls_ca_cert": "TLS Options",
    "routes": "NATS Clustering Options",
    "cluster_listen": "NATS Clustering Options",
    "cluster_name": "NATS Clustering Options",
}
_SECTION_GROUPS = {
    "": "Streaming Server Options",
    "store_limits": "Streaming Server Options",
    "cluster": "Streaming Server Clustering Options",
    "file_options": "Streaming Server File Store Options",
    "sql_options": "Streaming Server SQL Store Options",
    "tls": "Streaming Server TLS Options",
}
_LOGGING = ("stan_debug", "stan_trace", "syslog_name")
_EXTRA: dict[str, list[tuple[str, str]]] = {
    "Streaming Server Options": [
        ("-sc,  --stan_config <string>", "Streaming server configuration file"),
        (
            "-sl,  --signal <signal>[=<pid>]",
            "Send signal to nats-streaming-server process (stop, quit, reopen)",
        ),
    ],
    "Streaming Server Logging Options": [("-SDV", "Debug and trace STAN")],
    "Embedded NATS Server Options": [("-c,  --config <file>", "Configuration file")],
    "Logging Options": [("-DV", "Debug and trace")],
    "Common Options": [("-h,  --help", "Show this message"), ("-v,  --version", "Show version")],
}
_ORDER = (
    "Streaming Server Options",
    "Streaming Server Clustering Options",
    "Streaming Server File Store Options",
    "Streaming Server SQL Store Options",
    "Streaming Server TLS Options",
    "Streaming Server Logging Options",
    "Embedded NATS Server Options",
    "Logging Options",
    "Authorization Options",
    "TLS Options",
    "NATS Clustering Options",
    "Common Options",
)


def group_of(opt: Option) -> str:
    if opt.path in _LOGGING:
        return "Streaming Server Logging Options"
    if opt.section == "nats_server":
        return _NATS_GROUPS[opt.name]
    return _SECTION_GROUPS[opt.section]


def _metavar(opt: Option) -> str:
    if opt.metavar:
        return f"<{opt.metavar}>"
    return {
        Kind.BOOL: "<bool>",
        Kind.INT: "<int>",
        Kind.SIZE: "<size>",
        Kind.DURATION: "<duration>",
        Kind.STRINGS: "<string, ...>",
    }.get(opt.kind, "<string>")


def _flag_column(opt: Option) -> str:
    shorts = [f for f in opt.flags if not f.startswith("--")]
    longs = [f for f in opt.flags if f.startswith("--")]
    text = f"{shorts[0] + ',':<5} {longs[0]}" if shorts and longs else (shorts or longs)[0]
    return f"{text} {_metavar(opt)}"


def usage_text(program: str = "nats-streaming-server") -> str:
    groups: dict[str, list[tuple[str, str]]] = {g: list(_EXTRA.get(g, [])) for g in _ORDER}
    for opt in OPTIONS:
        if opt.flags:
            groups[group_of(opt)].append((_flag_column(opt), opt.help))
    lines = [f"Usage: {program} [options]", ""]
    for group in _ORDER:
        if not groups[group]:
            continue
        lines.append(f"{group}:")
        lines += [f"    {flag:<36} {help}" for flag, help in groups[group]]
        lines.append("")
    return "\n".join(lines)
