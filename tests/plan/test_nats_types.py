"""A NATS-server-only key given a value of a type nats-server does not take is an error at
the value's file:line:col, with nats-server's own words; the types it takes pass.

The table (stanpkg/plan/nats_keys.py) is checked against the real nats-server: every
value we reject, it rejects with the text we quote, and it never makes that complaint
about a value we accept.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from stanpkg.conf import Kind, parse_string
from stanpkg.plan.compile import compile_args
from stanpkg.plan.nats_keys import GO_TYPES, NATS_KEYS, NatsKey
from stanpkg.transport.embedded import find_nats_server_binary

# One value of each kind. Arrays hold strings: nats-server's lexer refuses a number as
# the last item of an array before a line end.
SAMPLES: dict[Kind, str] = {
    Kind.STRING: '"wrong"',
    Kind.INT: "7",
    Kind.FLOAT: "1.5",
    Kind.BOOL: "true",
    Kind.DATETIME: "2016-05-04T18:53:41Z",
    Kind.MAP: "{ wrong: 1 }",
    Kind.ARRAY: '["wrong"]',
}

CASES = [
    pytest.param(spec, name, kind, id=f"{name}-{kind.value}")
    for spec in NATS_KEYS
    for name in spec.names
    for kind in SAMPLES
]


def _validate(tmp_path: Path, text: str) -> list[str]:
    (tmp_path / "stan.conf").write_text("", encoding="utf-8")
    (tmp_path / "nats.conf").write_text(text, encoding="utf-8")
    result = compile_args(["-sc", str(tmp_path / "stan.conf"), "-c", str(tmp_path / "nats.conf")])
    return [str(d) for d in result.diagnostics if d.code == "type"]


@pytest.mark.parametrize(("spec", "name", "kind"), CASES)
def test_wrong_type_is_rejected_at_the_value(
    tmp_path: Path, spec: NatsKey, name: str, kind: Kind
) -> None:
    # Indented, after another line: the position is the value's, not the start of the file.
    errors = _validate(tmp_path, f"port: 4222\n  {name}: {SAMPLES[kind]}\n")
    if kind in spec.takes or not spec.takes:
        assert errors == []
        return
    col = 3 + len(name) + 2
    value = parse_string(f"v: {SAMPLES[kind]}").entries[0].node
    assert errors == [
        f"{tmp_path / 'nats.conf'}:2:{col}: error: "
        f'"{name}" must be {spec.expected()}, got {_described(kind)} '
        f"(nats-server: {spec.reference_text(name, value)})"
    ]


def _described(kind: Kind) -> str:
    return {
        Kind.STRING: 'the string "wrong"',
        Kind.INT: "the number 7",
        Kind.FLOAT: "the number 1.5",
        Kind.BOOL: "the boolean true",
        Kind.DATETIME: "the date 2016-05-04T18:53:41+00:00",
        Kind.MAP: "a map",
        Kind.ARRAY: "an array",
    }[kind]


def test_a_wrong_type_in_a_streaming_files_nats_part(tmp_path: Path) -> None:
    """One file holding both parts (a streaming block): the same check."""
    conf = tmp_path / "nats.conf"
    conf.write_text('streaming { store: memory }\ntrace_verbose: "yes"\n', encoding="utf-8")
    result = compile_args(["-c", str(conf)])
    assert result.plan is None
    assert [str(d) for d in result.diagnostics] == [
        f'{conf}:2:16: error: "trace_verbose" must be a boolean, got the string "yes" '
        "(nats-server: interface conversion: interface {} is string, not bool)"
    ]


def test_checked_with_an_external_nats_server_too(tmp_path: Path) -> None:
    """No embedded nats-server runs -t then: the type check is ours alone."""
    errors = _validate(tmp_path, "max_payload: { a: 1 }\n")
    assert len(errors) == 1 and errors[0].endswith("not int64)")
    (tmp_path / "nats.conf").write_text("max_payload: { a: 1 }\n", encoding="utf-8")
    result = compile_args(
        [
            "-ns",
            "nats://127.0.0.1:4222",
            "-sc",
            str(tmp_path / "stan.conf"),
            "-c",
            str(tmp_path / "nats.conf"),
        ]
    )
    assert result.plan is None


def test_pidfile_is_the_pid_file_option(tmp_path: Path) -> None:
    (tmp_path / "stan.conf").write_text("", encoding="utf-8")
    (tmp_path / "nats.conf").write_text('pidfile: "/run/x.pid"\n', encoding="utf-8")
    result = compile_args(["-sc", str(tmp_path / "stan.conf"), "-c", str(tmp_path / "nats.conf")])
    assert result.plan is not None
    assert result.plan.nats_server.pid_file == "/run/x.pid"
    assert _validate(tmp_path, "pidfile: 5\n") == [
        f"{tmp_path / 'nats.conf'}:1:10: error: pid_file must be a string, got the number 5"
    ]


@pytest.mark.slow
def test_the_table_agrees_with_nats_server(tmp_path: Path) -> None:
    binary = find_nats_server_binary()
    conf = tmp_path / "n.conf"
    disagreements = []
    for spec in NATS_KEYS:
        if not spec.takes:
            continue  # any value (nats-server ignores what it cannot use)
        for name in spec.names:
            for kind, sample in SAMPLES.items():
                conf.write_text(f"{name}: {sample}\n", encoding="utf-8")
                run = subprocess.run(
                    [binary, "-t", "-c", str(conf)], capture_output=True, text=True, check=False
                )
                said = run.stderr + run.stdout
                value = parse_string(f"v: {sample}").entries[0].node
                quoted = spec.reference_text(name, value)
                rejected = not spec.accepts(value)
                if rejected and (run.returncode == 0 or quoted not in said):
                    disagreements.append(
                        f"{name} {kind.value}: we quote {quoted!r}, it says {said!r}"
                    )
                type_panic = f"interface {{}} is {GO_TYPES[kind]}, not"
                if not rejected and (quoted in said or type_panic in said):
                    disagreements.append(f"{name} {kind.value}: it rejects the type: {said!r}")
    assert disagreements == []
