"""Compile command-line flags, configuration files and environment into a plan.

Stages, each doing one job and never looking back: flags are parsed (usage errors stop
here), the files they name are parsed by ``stanpkg.conf``, their entries are read into the
normalised configuration (``collect``), the environment and then the flags override it,
durations are converted, the JSON Schema checks types and ranges, the cross-field rules
run, and finally the frozen :class:`~stanpkg.plan.model.Plan` is built. Problems are
diagnostics; nothing here raises on bad input.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields, replace
from types import MappingProxyType
from typing import Any

from stanpkg.conf import ConfError, Node, Position, gc_paused, parse_file
from stanpkg.conf import Kind as NodeKind
from stanpkg.plan.collect import (
    collect_nats,
    collect_streaming,
    nats_tls_files,
    render_passthrough,
    warn_repeated,
    with_nats_cluster_name,
)
from stanpkg.plan.context import Context, Path, dotted, option_for
from stanpkg.plan.diagnostics import Diagnostic, error, has_errors
from stanpkg.plan.encryption import resolve_cipher_name
from stanpkg.plan.flags import ParsedFlags, UsageError, parse_flags, parse_go_bool
from stanpkg.plan.gotime import DurationError, parse_duration
from stanpkg.plan.limits import Limits, PartialLimits, StoreLimits, resolve_store_limits
from stanpkg.plan.model import (
    ClusterOptions,
    FileOptions,
    NatsServerOptions,
    Plan,
    Secret,
    Source,
    SqlOptions,
    StoreType,
    TlsOptions,
)
from stanpkg.plan.options import OPTIONS, Kind
from stanpkg.plan.rules import run_rules
from stanpkg.plan.validation import check_file_types, check_schema


@dataclass(frozen=True)
class Compilation:
    plan: Plan | None
    diagnostics: tuple[Diagnostic, ...] = ()
    usage_error: str = ""  # set: a command-line error (exit status 2)
    flags: ParsedFlags | None = None

    @property
    def ok(self) -> bool:
        return self.plan is not None and not self.usage_error


def compile_args(
    argv: Sequence[str], env: Mapping[str, str] | None = None, *, positional_config: bool = False
) -> Compilation:
    """Compile a server command line. ``positional_config`` lets one bare word name the
    streaming configuration file (``stanpkg validate stan.conf``)."""
    try:
        flags = parse_flags(list(argv), interspersed=positional_config)
    except UsageError as exc:
        return Compilation(None, usage_error=str(exc))
    if flags.positional:
        if positional_config and len(flags.positional) == 1 and not flags.stan_config:
            flags.stan_config = flags.positional[0]
            flags.positional = []
        else:
            return Compilation(
                None, usage_error=f'unrecognized command: "{flags.positional[0]}"', flags=flags
            )
    return compile_flags(flags, os.environ if env is None else env)


@dataclass(frozen=True)
class FileCompilations:
    """One compilation per configuration file named on a command line (``stanpkg
    validate a.conf b.conf``, ``stanpkg diff OLD NEW``), all with the same flags."""

    files: tuple[str, ...] = ()
    results: tuple[Compilation, ...] = ()
    usage_error: str = ""


def compile_each(argv: Sequence[str], env: Mapping[str, str] | None = None) -> FileCompilations:
    """Every bare word of ``argv`` is short for ``-sc`` that file, compiled on its own with
    the other flags; with no bare word, the command line as it is. A bare word together
    with ``-sc`` is a usage error, as for :func:`compile_args`."""
    try:
        flags = parse_flags(list(argv), interspersed=True)
    except UsageError as exc:
        return FileCompilations(usage_error=str(exc))
    files = tuple(flags.positional)
    # ``-SD true a.conf``: a Go bool flag takes no separate value; the word is the
    # reference's "unrecognized command", not a file (and so is any word with -sc).
    stray = [f for f in files if _is_go_bool(f)] if len(files) > 1 else []
    if (flags.stan_config and files) or stray:
        word = (stray or files)[0]
        return FileCompilations(usage_error=f'unrecognized command: "{word}"')
    environment = os.environ if env is None else env
    if not files:
        return FileCompilations(("",), (compile_flags(flags, environment),))
    results = []
    for file in files:
        one = replace(flags, stan_config=file, positional=[], values=dict(flags.values))
        results.append(compile_flags(one, environment))
    return FileCompilations(files, tuple(results))


def _is_go_bool(word: str) -> bool:
    try:
        parse_go_bool(word)
    except ValueError:
        return False
    return True


def compile_flags(flags: ParsedFlags, env: Mapping[str, str]) -> Compilation:
    with gc_paused():
        return _compile_flags(flags, env)


def _compile_flags(flags: ParsedFlags, env: Mapping[str, str]) -> Compilation:
    ctx = Context()
    trees: dict[str, Node] = {}
    for file in dict.fromkeys(p for p in (flags.stan_config, flags.config) if p):
        try:
            trees[file] = parse_file(file, env=env)
        except ConfError as exc:
            if exc.pos.line == 0:  # the file as a whole: no position to show
                ctx.diagnostics.append(error(exc.message, code="file"))
            else:
                ctx.diagnostics.append(error(exc.message, exc.pos, code="syntax"))
    if has_errors(ctx.diagnostics):
        return Compilation(None, tuple(ctx.diagnostics), flags=flags)

    streaming_file = flags.stan_config or flags.config
    nats_file = flags.config or flags.stan_config
    block_here = False
    if streaming_file:
        tree = trees[streaming_file]
        warn_repeated(tree, ctx)  # e.g. two streaming blocks: the first is lost
        block = _streaming_block(tree)
        if block is None:
            collect_streaming(tree, ctx, nats_keys_here=streaming_file == nats_file)
        elif block.kind is NodeKind.MAP:
            collect_streaming(block, ctx, nats_keys_here=False)
        else:
            ctx.diagnostics.append(
                error(
                    f'"streaming" must be a map of options, got {block.kind.value.lower()}',
                    block.pos,
                    code="type",
                )
            )
        block_here = block is None
    if nats_file:
        collect_nats(
            trees[nats_file], ctx, streaming_here=nats_file == streaming_file and block_here
        )

    # Every value of the files is type-checked before the environment and the flags
    # override any: as the reference, a file with a value of the wrong type is refused
    # whatever the command line says (ranges are checked on the merged result).
    _convert_durations(ctx)
    _reject_fractional_numbers(ctx)
    check_file_types(ctx)
    _request_encryption(ctx, ctx.sources.get(("encryption_key",)))
    _apply_environment(ctx, env)
    for option_path, flag_value in flags.values.items():
        ctx.set(tuple(option_path.split(".")), flag_value.value, Source("flag", flag_value.flag))
    _request_encryption(ctx, ctx.sources.get(("encryption_key",)))
    _zero_means_default(ctx)
    if ("cluster",) in ctx.positions and not ctx.is_set(("cluster", "clustered")):
        # The presence of a cluster map turns clustering on (a --clustered flag still wins).
        ctx.set(("cluster", "clustered"), True, Source("file", str(ctx.positions[("cluster",)])))
    _normalise_case(ctx)
    check_schema(ctx)
    # The rules run on what is well typed even after errors, so one run reports all.
    run_rules(ctx)
    diagnostics = sort_diagnostics(ctx.diagnostics)
    if has_errors(diagnostics):
        return Compilation(None, diagnostics, flags=flags)
    nats_entries = ctx.passthrough
    if ctx.value(("cluster", "clustered")):
        nats_entries = with_nats_cluster_name(
            nats_entries, nats_cluster_name(ctx.value(("cluster_id",)))
        )
    passthrough = render_passthrough(nats_entries, Position(nats_file, 1, 1))
    plan = build_plan(ctx, streaming_file, nats_file, passthrough, nats_tls_files(ctx.passthrough))
    return Compilation(plan, diagnostics, flags=flags)


def sort_diagnostics(diags: list[Diagnostic]) -> tuple[Diagnostic, ...]:
    """File diagnostics in file order first, then those of flags and environment."""

    def key(d: Diagnostic) -> tuple[int, str, int, int]:
        return (0, d.pos.file, d.pos.line, d.pos.col) if d.pos else (1, d.where, 0, 0)

    return tuple(sorted(diags, key=key))


def _streaming_block(tree: Node) -> Node | None:
    for entry in tree.entries:
        if entry.key.lower() == "streaming":
            return entry.node
    return None


def _request_encryption(ctx: Context, key_source: Source | None) -> None:
    """A key given in the file or by flag turns encryption on; the environment alone
    does not (it only supplies the key)."""
    requested = key_source is not None and key_source.kind in ("file", "flag")
    if requested and key_source is not None and not ctx.is_set(("encrypt",)):
        ctx.set(("encrypt",), True, key_source)


def _apply_environment(ctx: Context, env: Mapping[str, str]) -> None:
    for opt in OPTIONS:
        value = env.get(opt.env) if opt.env else None
        if value:  # an empty variable is as good as unset, as for the reference
            path = tuple(opt.path.split("."))
            ctx.set(path, value, Source("env", opt.env))


_PER_CHANNEL_DURATIONS = frozenset(
    o.name for o in OPTIONS if o.per_channel and o.kind is Kind.DURATION
)


def _duration_paths(ctx: Context) -> list[Path]:
    """Paths of the duration values that are set (globals and per channel)."""
    paths: list[Path] = [tuple(o.path.split(".")) for o in OPTIONS if o.kind is Kind.DURATION]
    channels = ctx.get(("store_limits", "channels"), {})
    if isinstance(channels, dict):
        for name, limits in channels.items():
            if isinstance(limits, dict):
                paths += [
                    ("store_limits", "channels", name, key)
                    for key in limits.keys() & _PER_CHANNEL_DURATIONS
                ]
    return paths


def _convert_durations(ctx: Context) -> None:
    """Durations are written as Go duration strings and kept as nanoseconds."""
    for path in _duration_paths(ctx):
        if not ctx.is_set(path):
            continue
        value = ctx.get(path)
        if (
            isinstance(value, int)
            and not isinstance(value, bool)
            and path in ctx.sources
            and ctx.sources[path].kind == "flag"
        ):
            continue  # flags arrive already converted
        if isinstance(value, str):
            try:
                ctx.set(path, parse_duration(value), ctx.sources.get(path, Source("file")))
            except DurationError as exc:
                ctx.error(path, f"{path[-1]}: {exc}", "duration")
                ctx.reject(path)
        else:
            shown = "a boolean" if isinstance(value, bool) else f"{value!r}"
            hint = (
                f' (write "{value}s" for seconds)'
                if isinstance(value, int) and not isinstance(value, bool)
                else ""
            )
            ctx.error(
                path,
                f'{path[-1]} must be a duration string such as "10s" or "1h30m", got {shown}{hint}',
                "type",
            )
            ctx.reject(path)


_WHOLE_NUMBERS = (Kind.INT, Kind.SIZE)
_SIZE = "a size (an integer, optionally with a suffix such as 10MB or 1GiB)"


def _reject_fractional_numbers(ctx: Context) -> None:
    """A number written with a fraction (``5000.0``) where an integer belongs is an error,
    as for the reference; JSON Schema would take ``5000.0`` as an integer, and the plan
    holds ints."""
    paths = [(tuple(o.path.split(".")), o) for o in OPTIONS if o.kind in _WHOLE_NUMBERS and o.keys]
    channels = ctx.get(("store_limits", "channels"), {})
    if isinstance(channels, dict):
        per_channel = {o.name: o for o in OPTIONS if o.per_channel and o.kind in _WHOLE_NUMBERS}
        for name, limits in channels.items():
            if isinstance(limits, dict):
                paths += [
                    (("store_limits", "channels", name, key), per_channel[key])
                    for key in limits.keys() & per_channel.keys()
                ]
    for path, opt in paths:
        value = ctx.get(path)
        if not isinstance(value, float):
            continue
        expected = "an integer" if opt.kind is Kind.INT else _SIZE
        channel = f'channel "{path[2]}": ' if len(path) == 4 else ""
        shown = "a number" if opt.secret else f"the number {value}"
        ctx.error(path, f"{channel}{opt.name} must be {expected}, got {shown}", "type")
        ctx.reject(path)


def _zero_means_default(ctx: Context) -> None:
    for opt in OPTIONS:
        path = tuple(opt.path.split("."))
        if opt.zero_is_default and type(ctx.get(path)) is int and ctx.get(path) == 0:
            ctx.set(path, opt.default, ctx.sources.get(path, Source("file")))


def _normalise_case(ctx: Context) -> None:
    for path, upper in (
        (("store_type",), True),
        (("encryption_cipher",), True),
        (("sql_options", "driver"), False),
    ):
        value = ctx.get(path)
        if isinstance(value, str):
            source = ctx.sources.get(path, Source("file"))
            ctx.set(path, value.upper() if upper else value.lower(), source)


def _section(ctx: Context, cls: type[Any], section: str, **overrides: object) -> Any:
    values: dict[str, object] = {}
    for f in fields(cls):
        if f.name in overrides:
            values[f.name] = overrides[f.name]
            continue
        path = (section, f.name) if section else (f.name,)
        value = ctx.value(path)
        if isinstance(value, list):
            value = tuple(value)
        if f.type == "Secret":
            value = Secret(str(value or ""))
        values[f.name] = value
    return cls(**values)


def _store_limits(ctx: Context) -> StoreLimits:
    def limit(name: str) -> int:
        value = ctx.value(("store_limits", name))
        assert isinstance(value, int)
        return value

    defaults = Limits(
        limit("max_subs"),
        limit("max_msgs"),
        limit("max_bytes"),
        limit("max_age"),
        limit("max_inactivity"),
    )
    channels = ctx.get(("store_limits", "channels"), {})
    per_channel: dict[str, PartialLimits] = {}
    if isinstance(channels, dict):
        for name, values in channels.items():
            per_channel[name] = PartialLimits(**values)
    return resolve_store_limits(limit("max_channels"), defaults, per_channel)


def _cluster(ctx: Context) -> ClusterOptions:
    node_id = str(ctx.value(("cluster", "node_id")))
    peers = tuple(p for p in ctx.value(("cluster", "peers")) or () if p != node_id)  # type: ignore[attr-defined]
    log_path = str(ctx.value(("cluster", "log_path")))
    if not log_path and node_id:
        log_path = f"{ctx.value(('cluster_id',))}/{node_id}"
    result: ClusterOptions = _section(
        ctx, ClusterOptions, "cluster", peers=peers, log_path=log_path
    )
    return result


def nats_cluster_name(cluster_id: object) -> str:
    """The NATS cluster name of a clustered streaming cluster when the operator gave none."""
    return "stan-" + "".join(c if c.isalnum() or c in "-_" else "_" for c in str(cluster_id))


def build_plan(
    ctx: Context,
    streaming_file: str,
    nats_file: str,
    passthrough: tuple[str, tuple[Position, ...]],
    nats_tls: tuple[str, str],
) -> Plan:
    cert, key = (str(ctx.value(("nats_server", k)) or "") for k in ("tls_cert", "tls_key"))
    if not (cert and key):
        cert, key = nats_tls
    nats: NatsServerOptions = _section(
        ctx,
        NatsServerOptions,
        "nats_server",
        passthrough=passthrough[0],
        passthrough_positions=passthrough[1],
        config_file=nats_file,
        monitor_tls_cert=cert,
        monitor_tls_key=key,
    )
    plan: Plan = _section(
        ctx,
        Plan,
        "",
        store_type=StoreType(str(ctx.value(("store_type",)))),
        encryption_cipher=resolve_cipher_name(str(ctx.value(("encryption_cipher",)))),
        store_limits=_store_limits(ctx),
        file_options=_section(ctx, FileOptions, "file_options"),
        sql_options=_section(ctx, SqlOptions, "sql_options"),
        cluster=_cluster(ctx),
        tls=_section(ctx, TlsOptions, "tls"),
        nats_server=nats,
        config_file=streaming_file,
        provenance=MappingProxyType(
            {dotted(p): s for p, s in ctx.sources.items() if option_for(p) is not None}
        ),
    )
    return plan
