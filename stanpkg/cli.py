"""The ``stanpkg`` command (and ``nats-streaming-server``): a thin skin over the plan."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Sequence
from dataclasses import replace

from stanpkg.plan.compile import Compilation, compile_args
from stanpkg.plan.diagnostics import Diagnostic, Severity, warning
from stanpkg.plan.dump import plan_to_dict
from stanpkg.plan.flags import UsageError, parse_flags
from stanpkg.plan.limits import render_store_limits
from stanpkg.plan.model import Plan
from stanpkg.plan.nats_errors import nats_problem
from stanpkg.plan.options import BY_PATH
from stanpkg.plan.usage import usage_text
from stanpkg.server.identity import version_text

EXIT_OK, EXIT_INVALID, EXIT_USAGE = 0, 1, 2
EXIT_BROKEN_PIPE = 141  # 128 + SIGPIPE, what a C program killed by the signal reports

COMMANDS_HELP = """\
Usage: stanpkg COMMAND [options]

Commands:
    run [server flags]             Run the streaming server (same flags as nats-streaming-server)
    validate [flags] [FILE]        Check a configuration; FILE is shorthand for -sc FILE
             --strict              Treat warnings as errors
             --format text|json    Output format (default: text)
             --explain             Also print every configured value and where it was set
    plan [flags] [FILE]            Print the resolved plan as JSON (secrets redacted)
    limits [flags] [FILE]          Print the store limits block the server would print
    bench [bench flags]            Load generator (like stan-bench)
    export --dir D --out P [...]   Export stored messages with Spark (Parquet, JSON, CSV)
    archive-slice CH DAT IDX       Archive a slice the FILE store discards (slice_archive_script)
    migrate --config C --nats URL  Copy a standalone store into a cluster's JetStream
    version                        Print the version

Run 'stanpkg run --help' for the server flags, 'stanpkg COMMAND --help' for a command.
"""

_COMPILE_HELP = {
    "validate": (
        "[--strict] [--format text|json] [--explain] [server flags] [FILE]",
        "Check a configuration as 'stanpkg run' would compile it (same files, flags and\n"
        "environment), without starting anything. FILE is shorthand for -sc FILE.\n"
        "Exit status: 0 valid, 1 invalid, 2 usage error.\n\n"
        "Options:\n"
        "    --strict              Treat warnings as errors\n"
        "    --format text|json    Output format (default: text)\n"
        "    --explain             Also print every configured value and where it was set\n",
    ),
    "plan": (
        "[server flags] [FILE]",
        "Print the resolved plan as JSON (secrets redacted), with where each value was set.\n"
        "FILE is shorthand for -sc FILE.\n",
    ),
    "limits": (
        "[server flags] [FILE]",
        "Print the store limits block the server would print at startup.\n"
        "FILE is shorthand for -sc FILE.\n",
    ),
}


def _asks_for_help(argv: list[str]) -> bool:
    try:
        return parse_flags(list(argv), interspersed=True).help
    except UsageError:
        return False  # the command reports the usage error


def _print_command_help(command: str) -> int:
    """A compiling command's own options, then the server flags it also takes."""
    synopsis, text = _COMPILE_HELP[command]
    server_flags = usage_text("stanpkg run").split("\n", 2)[2]
    print(f"Usage: stanpkg {command} {synopsis}\n\n{text}")
    print(f"Server flags (as for 'stanpkg run'):\n\n{server_flags}", end="")
    return EXIT_OK


def _take_option(argv: list[str], name: str, takes_value: bool) -> tuple[str | None, list[str]]:
    """Remove ``--name``/``--name=v``/``--name v`` (a command's own option) from argv."""
    rest: list[str] = []
    found: str | None = None
    i = 0
    while i < len(argv):
        arg = argv[i]
        if arg in (f"--{name}", f"-{name}"):
            if takes_value and i + 1 < len(argv):
                found = argv[i + 1]
                i += 2
                continue
            found = "true"
        elif arg.startswith((f"--{name}=", f"-{name}=")):
            found = arg.split("=", 1)[1]
        else:
            rest.append(arg)
        i += 1
    return found, rest


def _print_diagnostics(diags: Sequence[Diagnostic], strict: bool) -> None:
    for diag in diags:
        if strict and diag.severity is Severity.WARNING:
            diag = Diagnostic(Severity.ERROR, diag.message, diag.pos, diag.where, diag.code)
        print(diag, file=sys.stderr)


def _summary(plan: Plan) -> str:
    channels = len(plan.store_limits.channels)
    where = plan.config_file or "command line"
    return (
        f"{where}: valid: {plan.store_label} store, {plan.mode.value}, "
        f"{channels} channel{'s' if channels != 1 else ''} configured"
    )


def explain(plan: Plan) -> list[str]:
    """Every value that does not come from the defaults, with where it was set."""
    lines = ["---------- Configured values ----------"]
    readable = plan_to_dict(plan)["readable"]
    for path, source in sorted(plan.provenance.items()):
        opt = BY_PATH.get(path)
        shown = "<redacted>" if opt is not None and opt.secret else _lookup(plan, path)
        if path.startswith("store_limits.channels["):
            name, _, limit = path.removeprefix('store_limits.channels["').partition('"].')
            resolved = {c.name: c.limits for c in plan.store_limits.channels}[name]
            shown = json.dumps(getattr(resolved, limit))
        if path in readable:
            shown = f"{shown} ({readable[path]})"
        lines.append(f"{path} = {shown}  ({source})")
    return lines


def _lookup(plan: Plan, path: str) -> object:
    node: object = plan_to_dict(plan)
    for part in path.split("."):
        if not isinstance(node, dict) or part not in node:
            return "?"
        node = node[part]
    return json.dumps(node)


def _usage_error(message: str) -> int:
    print(f"stanpkg: {message}", file=sys.stderr)
    return EXIT_USAGE


def cmd_validate(argv: list[str]) -> int:
    fmt, argv = _take_option(argv, "format", takes_value=True)
    strict_flag, argv = _take_option(argv, "strict", takes_value=False)
    strict = strict_flag not in (None, "false", "0")
    explain_flag, argv = _take_option(argv, "explain", takes_value=False)
    if fmt not in (None, "text", "json"):
        return _usage_error(f'--format must be "text" or "json", got "{fmt}"')
    if _asks_for_help(argv):
        return _print_command_help("validate")
    result = compile_args(argv, positional_config=True)
    if result.plan is not None:
        extra = check_embedded_nats(result.plan)
        if extra:
            diags = (*result.diagnostics, *extra)
            failed = any(d.severity is Severity.ERROR for d in extra)
            result = replace(result, diagnostics=diags, plan=None if failed else result.plan)
    if result.usage_error:
        if fmt == "json":
            print(json.dumps({"valid": False, "usage_error": result.usage_error}))
        return _usage_error(result.usage_error)
    warnings = [d for d in result.diagnostics if d.severity is Severity.WARNING]
    valid = result.plan is not None and not (strict and warnings)
    if fmt == "json":
        doc: dict[str, object] = {
            "valid": valid,
            "diagnostics": [d.as_json() for d in result.diagnostics],
        }
        if result.plan is not None:
            doc["summary"] = {
                "store": result.plan.store_label,
                "mode": result.plan.mode.value,
                "channels": len(result.plan.store_limits.channels),
            }
            doc["limits"] = render_store_limits(result.plan.store_limits)
        print(json.dumps(doc, indent=2, ensure_ascii=False))
        return EXIT_OK if valid else EXIT_INVALID
    _print_diagnostics(result.diagnostics, strict)
    if result.plan is None or not valid:
        count = sum(1 for d in result.diagnostics if d.severity is Severity.ERROR or strict)
        print(f"invalid: {count} error{'s' if count != 1 else ''}", file=sys.stderr)
        return EXIT_INVALID
    for line in render_store_limits(result.plan.store_limits):
        print(line)
    if explain_flag not in (None, "false", "0"):
        for line in explain(result.plan):
            print(line)
    suffix = f" ({len(warnings)} warning{'s' if len(warnings) != 1 else ''})" if warnings else ""
    print(_summary(result.plan) + suffix)
    return EXIT_OK


def check_embedded_nats(plan: Plan) -> list[Diagnostic]:
    """NATS-server-only options passed through from the config file are checked by the
    real nats-server (``nats-server -t``), so a typo there fails review, not the start."""
    if not plan.embedded_nats or not plan.nats_server.passthrough:
        return []
    from stanpkg.node import embedded_config
    from stanpkg.transport.embedded import NatsServerNotFoundError, check_config
    from stanpkg.transport.natsconf import render_config

    where = plan.nats_server.config_file
    generated, name = render_config(embedded_config(plan)), "embedded-nats.conf"
    try:
        problems = check_config(generated, name)
    except NatsServerNotFoundError as exc:
        return [warning(f"NATS server options not checked: {exc}", where=where, code="nats")]
    found = [nats_problem(p, generated, name, plan.nats_server) for p in problems]
    # nats-server walks its configuration map in no fixed order: report in file order.
    return sorted(found, key=_file_order)


def _file_order(diagnostic: Diagnostic) -> tuple[str, int, int]:
    pos = diagnostic.pos
    return (pos.file, pos.line, pos.col) if pos is not None else ("", 0, 0)


def _compile_or_report(argv: list[str], positional: bool) -> Compilation | int:
    result = compile_args(argv, positional_config=positional)
    if result.usage_error:
        return _usage_error(result.usage_error)
    _print_diagnostics(result.diagnostics, strict=False)
    if result.plan is None:
        return EXIT_INVALID
    return result


def cmd_plan(argv: list[str]) -> int:
    if _asks_for_help(argv):
        return _print_command_help("plan")
    result = _compile_or_report(argv, positional=True)
    if isinstance(result, int):
        return result
    assert result.plan is not None
    print(json.dumps(plan_to_dict(result.plan), indent=2, ensure_ascii=False))
    return EXIT_OK


def cmd_limits(argv: list[str]) -> int:
    if _asks_for_help(argv):
        return _print_command_help("limits")
    result = _compile_or_report(argv, positional=True)
    if isinstance(result, int):
        return result
    assert result.plan is not None
    print("\n".join(render_store_limits(result.plan.store_limits)))
    return EXIT_OK


def cmd_run(argv: list[str], program: str = "stanpkg run") -> int:
    result = compile_args(argv)
    flags = result.flags
    if flags is not None and flags.help:
        print(usage_text(program))
        return EXIT_OK
    if flags is not None and flags.version:
        print(version_text())
        return EXIT_OK
    if flags is not None and flags.signal:
        from stanpkg.control import send_signal

        return int(send_signal(flags.signal))
    if result.usage_error:
        return _usage_error(result.usage_error)
    _print_diagnostics(result.diagnostics, strict=False)
    if result.plan is None:
        return EXIT_INVALID
    # nats-server would name the generated file; checked first, its errors name the user's.
    nats_errors = [d for d in check_embedded_nats(result.plan) if d.severity is Severity.ERROR]
    if nats_errors:
        _print_diagnostics(nats_errors, strict=False)
        return EXIT_INVALID
    from stanpkg.node import run

    return int(run(result.plan))


def cmd_bench(argv: list[str]) -> int:
    from stanpkg.loadgen.cli import main as bench_main

    return int(bench_main(argv))


def cmd_export(argv: list[str]) -> int:
    from stanpkg.pipeline.cli import export_main  # loads pyspark only when asked

    return int(export_main(argv))


def cmd_archive_slice(argv: list[str]) -> int:
    from stanpkg.pipeline.cli import archive_slice_main

    return int(archive_slice_main(argv))


def cmd_migrate(argv: list[str]) -> int:
    from stanpkg.migrate.cli import migrate_main

    return int(migrate_main(argv))


def main(argv: Sequence[str] | None = None) -> int:
    try:
        return _dispatch(list(sys.argv[1:] if argv is None else argv))
    except BrokenPipeError:
        # `stanpkg limits | head`: the reader left, which is not an error of ours. Point stdout
        # at /dev/null so that the interpreter's final flush does not raise again.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_BROKEN_PIPE


def _dispatch(args: list[str]) -> int:
    if not args or args[0] in ("-h", "--help", "help"):
        print(COMMANDS_HELP, end="")
        return EXIT_OK if args else EXIT_USAGE
    command, rest = args[0], args[1:]
    match command:
        case "validate":
            return cmd_validate(rest)
        case "plan":
            return cmd_plan(rest)
        case "limits":
            return cmd_limits(rest)
        case "run":
            return cmd_run(rest)
        case "bench":
            return cmd_bench(rest)
        case "export":
            return cmd_export(rest)
        case "archive-slice":
            return cmd_archive_slice(rest)
        case "migrate":
            return cmd_migrate(rest)
        case "version" | "--version" | "-v":
            print(version_text())
            return EXIT_OK
    return _usage_error(f'unknown command "{command}" (see stanpkg --help)')


def server_main(argv: Sequence[str] | None = None) -> int:
    """``nats-streaming-server``: the reference's command line, unchanged."""
    return cmd_run(list(sys.argv[1:] if argv is None else argv), "nats-streaming-server")


if __name__ == "__main__":
    sys.exit(main())
