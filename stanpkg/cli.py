"""The ``stanpkg`` command (and ``nats-streaming-server``): a thin skin over the plan."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from stanpkg.plan.compile import Compilation, compile_args, compile_each
from stanpkg.plan.diagnostics import Diagnostic, Severity, warning
from stanpkg.plan.flags import UsageError, parse_flags
from stanpkg.plan.limits import render_store_limits
from stanpkg.plan.model import Plan
from stanpkg.plan.nats_errors import nats_problem
from stanpkg.plan.options import BY_PATH
from stanpkg.plan.redact import redact_urls
from stanpkg.plan.usage import usage_text
from stanpkg.review.findings import findings, strict_view
from stanpkg.server.identity import version_text

# What only some commands use is imported by them: `run` starts in milliseconds.
if TYPE_CHECKING:
    from stanpkg.review.against import AgainstResult

EXIT_OK, EXIT_INVALID, EXIT_USAGE = 0, 1, 2
EXIT_BROKEN_PIPE = 141  # 128 + SIGPIPE, what a C program killed by the signal reports

COMMANDS_HELP = """\
Usage: stanpkg COMMAND [options]

Commands:
    run [server flags]             Run the streaming server (same flags as nats-streaming-server)
    validate [flags] [FILE...]     Check configurations; each FILE is shorthand for -sc FILE
             --strict              Treat warnings as errors
             --format FORMAT       text, json, sarif, github or gitlab (default: text)
             --explain             Also print every configured value and where it was set
             --against URL         Also check what FILE would remove from a running server
    diff [flags] OLD NEW           Compare two configurations' resolved plans
    plan [flags] [FILE]            Print the resolved plan as JSON (secrets redacted)
    limits [flags] [FILE]          Print the store limits block the server would print
    bench [bench flags]            Load generator (like stan-bench)
    export --dir D --out P [...]   Export stored messages with Spark (Parquet, JSON, CSV)
    archive-slice CH DAT IDX       Archive a slice the FILE store discards (slice_archive_script)
    migrate --config C --nats URL  Copy a standalone store into a cluster's JetStream
    version                        Print the version

Run 'stanpkg run --help' for the server flags, 'stanpkg COMMAND --help' for a command.
"""

_VALIDATE_OPTIONS = (
    "    --strict              Treat warnings as errors\n"
    "    --format FORMAT       text (default), json, sarif (SARIF 2.1.0), github (GitHub\n"
    "                          Actions annotations) or gitlab (GitLab Code Quality report)\n"
    "    --explain             Also print every configured value and where it was set\n"
    "    --against URL         Read a running server's monitoring endpoints (URL: its\n"
    "                          monitoring base, http://host:8222) and warn, per channel,\n"
    "                          what FILE would remove at its next start\n"
    "    --against-ca FILE     CA certificates for an https URL (default: --tlscacert,\n"
    "                          else the system's)\n"
    "    --against-nats URL    Where the server's clients connect, to count messages\n"
    "                          older than max_age (default: FILE's nats_server_url, else\n"
    "                          the embedded NATS server's port from /varz)\n"
)

_COMPILE_HELP = {
    "validate": (
        "[--strict] [--format FORMAT] [--explain] [--against URL] [server flags] [FILE...]",
        "Check a configuration as 'stanpkg run' would compile it (same files, flags and\n"
        "environment), without starting anything. FILE is shorthand for -sc FILE; several\n"
        "FILEs are checked one by one with the same flags (a pre-commit hook's call).\n"
        "Exit status: 0 valid, 1 invalid, 2 usage error or --against URL unreadable.\n\n"
        "Options:\n" + _VALIDATE_OPTIONS,
    ),
    "diff": (
        "[--strict] [--format text|json] [server flags] OLD NEW",
        "Compare the resolved plans of two configurations (each compiled as 'stanpkg\n"
        "validate' would, with the same flags): every option whose value changes, with\n"
        "where the new value is set, and every channel whose effective limits change.\n"
        "Exit status: 0 equal, 1 different, 3 different and a change can drop stored data\n"
        "or subscriptions (each says why), 2 invalid configuration or usage error.\n\n"
        "Options:\n"
        "    --strict              Treat warnings as errors (a warning makes a file invalid)\n"
        "    --format text|json    Output format (default: text)\n",
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
    for diag in strict_view(diags, strict):
        print(diag, file=sys.stderr)


def _summary(plan: Plan) -> str:
    channels = len(plan.store_limits.channels)
    where = plan.config_file or "command line"
    return (
        f"{where}: valid: {plan.store_label} store, {plan.mode.value}, "
        f"{channels} channel{'s' if channels != 1 else ''} configured"
    )


def explain(plan: Plan) -> list[str]:
    from stanpkg.plan.dump import plan_to_dict

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
    from stanpkg.plan.dump import plan_to_dict

    node: object = plan_to_dict(plan)
    for part in path.split("."):
        if not isinstance(node, dict) or part not in node:
            return "?"
        node = node[part]
    return json.dumps(node)


def _usage_error(message: str) -> int:
    print(f"stanpkg: {message}", file=sys.stderr)
    return EXIT_USAGE


def _flag_on(value: str | None) -> bool:
    return value not in (None, "false", "0")


def _checked(result: Compilation) -> Compilation:
    """A compilation with the NATS-server-only options checked by nats-server itself."""
    if result.plan is None:
        return result
    extra = check_embedded_nats(result.plan)
    if not extra:
        return result
    failed = any(d.severity is Severity.ERROR for d in extra)
    diags = (*result.diagnostics, *extra)
    return replace(result, diagnostics=diags, plan=None if failed else result.plan)


def _is_valid(result: Compilation, strict: bool) -> bool:
    warned = any(d.severity is Severity.WARNING for d in result.diagnostics)
    return result.plan is not None and not (strict and warned)


def _validate_json(result: Compilation, strict: bool) -> dict[str, object]:
    doc: dict[str, object] = {
        "valid": _is_valid(result, strict),
        "diagnostics": [d.as_json() for d in result.diagnostics],
    }
    if result.plan is not None:
        doc["summary"] = {
            "store": result.plan.store_label,
            "mode": result.plan.mode.value,
            "channels": len(result.plan.store_limits.channels),
        }
        doc["limits"] = render_store_limits(result.plan.store_limits)
    return doc


def _validate_text(
    file: str, result: Compilation, strict: bool, explained: bool, one: bool
) -> None:
    _print_diagnostics(result.diagnostics, strict)
    if not _is_valid(result, strict):
        count = sum(1 for d in result.diagnostics if d.severity is Severity.ERROR or strict)
        prefix = f"{file}: " if file and not one else ""
        print(f"{prefix}invalid: {count} error{'s' if count != 1 else ''}", file=sys.stderr)
        return
    assert result.plan is not None
    if one:  # the limits block; with several files (a pre-commit hook's call), summaries only
        for line in render_store_limits(result.plan.store_limits):
            print(line)
        if explained:
            for line in explain(result.plan):
                print(line)
    warnings = sum(1 for d in result.diagnostics if d.severity is Severity.WARNING)
    suffix = f" ({warnings} warning{'s' if warnings != 1 else ''})" if warnings else ""
    print(_summary(result.plan) + suffix)


def _against(argv: list[str]) -> tuple[dict[str, str], list[str]]:
    options: dict[str, str] = {}
    for name in ("against", "against-ca", "against-nats"):
        value, argv = _take_option(argv, name, takes_value=True)
        if value is not None:
            options[name] = value
    return options, argv


def _check_live(result: Compilation, options: dict[str, str]) -> AgainstResult | str:
    """``--against``: NEW's findings about the running server's data, or why it could not
    be read."""
    from stanpkg.review.against import check_against  # HTTP and STAN clients: only when asked
    from stanpkg.review.live import LiveError, read_server

    assert result.plan is not None
    ca = options.get("against-ca") or result.plan.nats_server.tls_ca_cert
    try:
        live = read_server(options["against"], ca)
    except LiveError as exc:
        return str(exc)
    return check_against(result.plan, live, options.get("against-nats", ""))


def cmd_validate(argv: list[str]) -> int:
    from stanpkg.review.formats import REVIEW_FORMATS, render

    formats = ("text", "json", *REVIEW_FORMATS)
    fmt, argv = _take_option(argv, "format", takes_value=True)
    strict_flag, argv = _take_option(argv, "strict", takes_value=False)
    strict = _flag_on(strict_flag)
    explain_flag, argv = _take_option(argv, "explain", takes_value=False)
    live_options, argv = _against(argv)
    fmt = fmt or "text"
    if fmt not in formats:
        return _usage_error(f'--format must be one of {", ".join(formats)}, got "{fmt}"')
    if _asks_for_help(argv):
        return _print_command_help("validate")
    compiled = compile_each(argv)
    if not compiled.usage_error and "against" in live_options and len(compiled.files) != 1:
        compiled = replace(compiled, usage_error="--against checks one configuration at a time")
    if compiled.usage_error:
        if fmt == "json":
            print(json.dumps({"valid": False, "usage_error": compiled.usage_error}))
        return _usage_error(compiled.usage_error)
    files = compiled.files
    results = [_checked(result) for result in compiled.results]
    against: AgainstResult | None = None
    if "against" in live_options and results[0].plan is not None:
        checked = _check_live(results[0], live_options)
        if isinstance(checked, str):
            if fmt == "json":
                doc = {"valid": _is_valid(results[0], strict), "against_error": checked}
                print(json.dumps(doc))
            return _usage_error(checked)
        against = checked
        results[0] = replace(
            results[0], diagnostics=(*results[0].diagnostics, *against.diagnostics)
        )
    valid = all(_is_valid(result, strict) for result in results)
    status = EXIT_OK if valid else EXIT_INVALID
    if fmt in REVIEW_FORMATS:
        found = [
            finding
            for file, result in zip(files, results, strict=True)
            for finding in findings(
                strict_view(result.diagnostics, strict), _shown_file(file, result)
            )
        ]
        sys.stdout.write(render(fmt, found))
        return status
    if fmt == "json":
        docs = [_validate_json(result, strict) for result in results]
        if against is not None:
            docs[0]["against"] = _against_json(against)
        if len(docs) == 1:
            print(json.dumps(docs[0], indent=2, ensure_ascii=False))
        else:
            files_doc = [{"file": file, **doc} for file, doc in zip(files, docs, strict=True)]
            print(json.dumps({"valid": valid, "files": files_doc}, indent=2, ensure_ascii=False))
        return status
    for file, result in zip(files, results, strict=True):
        _validate_text(file, result, strict, _flag_on(explain_flag), len(files) == 1)
    if against is not None:
        print(against.summary)
        if not against.ages_counted:
            print(f"message ages not counted: {against.age_problem}", file=sys.stderr)
    return status


def _shown_file(file: str, result: Compilation) -> str:
    """The configuration file a diagnostic without a position is shown on."""
    if result.plan is not None:
        return result.plan.config_file or result.plan.nats_server.config_file
    flags = result.flags
    return file or (flags.stan_config or flags.config if flags is not None else "")


def _against_json(result: AgainstResult) -> dict[str, object]:
    live = result.live
    doc: dict[str, object] = {
        "url": redact_urls(live.url),
        "cluster_id": live.cluster_id,
        "store": live.store_type,
        "channels": len(live.channels),
        "messages": sum(c.msgs for c in live.channels),
        "findings": len(result.diagnostics),
        "ages_counted": result.ages_counted,
    }
    if result.age_problem:
        doc["age_problem"] = result.age_problem
    return doc


def cmd_diff(argv: list[str]) -> int:
    from stanpkg.review.diff import diff_plans
    from stanpkg.review.diff_output import diff_json, diff_text, exit_status

    fmt, argv = _take_option(argv, "format", takes_value=True)
    strict_flag, argv = _take_option(argv, "strict", takes_value=False)
    strict = _flag_on(strict_flag)
    fmt = fmt or "text"
    if fmt not in ("text", "json"):
        return _usage_error(f'--format must be "text" or "json", got "{fmt}"')
    if _asks_for_help(argv):
        return _print_command_help("diff")
    compiled = compile_each(argv)
    if not compiled.usage_error and (len(compiled.files) != 2 or "" in compiled.files):
        compiled = replace(
            compiled, usage_error="diff needs two configurations: stanpkg diff OLD NEW"
        )
    if compiled.usage_error:
        return _usage_error(compiled.usage_error)
    (old_file, new_file), results = compiled.files, [_checked(r) for r in compiled.results]
    invalid = [
        (file, result)
        for file, result in zip(compiled.files, results, strict=True)
        if not _is_valid(result, strict)
    ]
    for result in results:
        _print_diagnostics(result.diagnostics, strict)
    if invalid:
        for file, result in invalid:
            count = sum(1 for d in result.diagnostics if d.severity is Severity.ERROR or strict)
            print(f"{file}: invalid: {count} error{'s' if count != 1 else ''}", file=sys.stderr)
        if fmt == "json":
            bad = [
                {"file": file, "diagnostics": [d.as_json() for d in result.diagnostics]}
                for file, result in invalid
            ]
            print(json.dumps({"valid": False, "invalid": bad}, indent=2, ensure_ascii=False))
        return EXIT_USAGE
    old_plan, new_plan = results[0].plan, results[1].plan
    assert old_plan is not None and new_plan is not None
    diff = diff_plans(old_plan, new_plan)
    if fmt == "json":
        print(json.dumps({"valid": True, **diff_json(diff)}, indent=2, ensure_ascii=False))
    else:
        print("\n".join(diff_text(diff, old_file, new_file)))
    return exit_status(diff)


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
    from stanpkg.plan.dump import plan_to_dict

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
        from stanpkg.send_signal import send_signal

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
        case "diff":
            return cmd_diff(rest)
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
