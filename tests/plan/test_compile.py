"""The compiler beyond the shared cases: precedence, provenance, NATS files, warnings, secrets."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from stanpkg.plan.compile import Compilation, compile_args
from stanpkg.plan.diagnostics import Severity
from stanpkg.plan.dump import plan_to_dict
from stanpkg.plan.encryption import ENCRYPTION_KEY_ENV, default_cipher_name, resolve_cipher_name
from stanpkg.plan.model import Mode, StoreType


def compile_text(
    tmp_path: Path,
    text: str,
    *args: str,
    env: dict[str, str] | None = None,
    name: str = "stan.conf",
) -> Compilation:
    conf = tmp_path / name
    conf.write_text(text, encoding="utf-8")
    return compile_args(["-sc", str(conf), *args], env=env or {})


def messages(result: Compilation, severity: Severity | None = None) -> list[str]:
    return [str(d) for d in result.diagnostics if severity is None or d.severity is severity]


def test_defaults_without_any_file() -> None:
    result = compile_args([], env={})
    plan = result.plan
    assert plan is not None and not result.diagnostics
    assert plan.cluster_id == "test-cluster"
    assert plan.store_type is StoreType.MEMORY and plan.mode is Mode.STANDALONE
    assert plan.hb_interval == 30_000_000_000 and plan.hb_fail_count == 10
    assert plan.nats_server.port == 4222 and plan.nats_server.host == "0.0.0.0"
    assert plan.store_limits.max_channels == 100
    assert plan.provenance == {}


def test_flags_override_file_and_record_provenance(tmp_path: Path) -> None:
    result = compile_text(
        tmp_path,
        "streaming { store_limits { max_msgs: 10, max_subs: 3 } }",
        "-mm",
        "50",
        "--max_age=1h",
    )
    plan = result.plan
    assert plan is not None
    assert plan.store_limits.defaults.max_msgs == 50
    assert plan.store_limits.defaults.max_subs == 3
    assert plan.store_limits.defaults.max_age == 3_600_000_000_000
    assert str(plan.provenance["store_limits.max_msgs"]) == "flag -mm"
    assert str(plan.provenance["store_limits.max_subs"]).startswith("file ")
    assert str(plan.provenance["store_limits.max_subs"]).endswith("stan.conf:1:52")


def test_encryption_key_precedence(tmp_path: Path) -> None:
    text = 'streaming { store: file, dir: "d", encryption_key: "from-file" }'
    env = {"NATS_STREAMING_ENCRYPTION_KEY": "from-env"}
    by_file = compile_text(tmp_path, text).plan
    by_env = compile_text(tmp_path, text, env=env).plan
    by_flag = compile_text(tmp_path, text, "--encryption_key", "from-flag", env=env).plan
    assert by_file and by_env and by_flag
    assert by_file.encrypt and by_file.encryption_key.reveal() == "from-file"
    assert by_env.encryption_key.reveal() == "from-env"
    assert by_flag.encryption_key.reveal() == "from-flag"
    # The environment alone does not turn encryption on.
    plain = compile_args([], env=env).plan
    assert plain is not None and not plain.encrypt
    # An empty variable is as good as unset; the value is taken as is (no trimming).
    by_empty = compile_text(tmp_path, text, env={"NATS_STREAMING_ENCRYPTION_KEY": ""}).plan
    assert by_empty is not None and by_empty.encryption_key.reveal() == "from-file"
    raw = compile_args(["--encrypt"], env={"NATS_STREAMING_ENCRYPTION_KEY": " raw "}).plan
    assert raw is not None and raw.encryption_key.reveal() == " raw "
    # Encryption on without any key: refused, with the reference's text.
    missing = compile_args(["--encrypt"], env={})
    assert missing.plan is None
    assert any("(encryption key required)" in d.message for d in missing.diagnostics)


def test_cipher_resolved_in_the_plan() -> None:
    assert default_cipher_name("x86_64") == "AES" and default_cipher_name("aarch64") == "CHACHA"
    assert resolve_cipher_name("") == default_cipher_name()
    assert resolve_cipher_name("ChaCha", "x86_64") == "CHACHA"
    plan = compile_args(["--encryption_key", "k"], env={}).plan
    assert plan is not None and plan.encryption_cipher == default_cipher_name()
    plan = compile_args(["--encryption_key", "k", "--encryption_cipher", "chacha"], env={}).plan
    assert plan is not None and plan.encryption_cipher == "CHACHA"
    assert ENCRYPTION_KEY_ENV == "NATS_STREAMING_ENCRYPTION_KEY"


def test_cluster_peers_flag_wins_and_own_id_removed(tmp_path: Path) -> None:
    text = 'streaming { store: file, dir: "d", cluster { node_id: "a", peers: ["a", "x"] } }'
    plan = compile_text(tmp_path, text, "--cluster_peers", "a, b ,c").plan
    assert plan is not None
    assert plan.cluster.clustered and plan.cluster.peers == ("b", "c")
    assert plan.cluster.log_path == "test-cluster/a"
    assert plan.store_label == "RAFT_FILE"


def test_clustered_false_flag_beats_cluster_block(tmp_path: Path) -> None:
    text = 'streaming { store: file, dir: "d", cluster { node_id: "a" } }'
    plan = compile_text(tmp_path, text, "--clustered=false").plan
    assert plan is not None and not plan.cluster.clustered


def test_nats_config_file_with_streaming_block(tmp_path: Path) -> None:
    text = """
        port: 4333
        http: "127.0.0.1:8333"
        authorization { user: stan, password: secret }
        cluster { listen: 127.0.0.1:6222 }
        streaming { cluster_id: "via-c", store_limits { max_msgs: 7 } }
    """
    conf = tmp_path / "nats.conf"
    conf.write_text(text)
    result = compile_args(["-c", str(conf)], env={})
    plan = result.plan
    assert plan is not None, messages(result)
    assert plan.cluster_id == "via-c" and not plan.cluster.clustered
    assert plan.nats_server.port == 4333 and plan.nats_server.http_port == 8333
    assert "authorization" in plan.nats_server.passthrough
    assert "cluster" in plan.nats_server.passthrough
    assert "secret" not in json.dumps(plan_to_dict(plan))


def test_top_level_nats_keys_with_streaming_keys(tmp_path: Path) -> None:
    result = compile_text(tmp_path, "port: 4555\nhttp_port: 8555\ncluster_id: top\n")
    plan = result.plan
    assert plan is not None and not result.diagnostics
    assert (plan.cluster_id, plan.nats_server.port, plan.nats_server.http_port) == (
        "top",
        4555,
        8555,
    )


def test_unknown_keys_warn_with_suggestion_and_stay_valid(tmp_path: Path) -> None:
    result = compile_text(tmp_path, "streaming {\n  store_limits { max_msg: 5 }\n}\n")
    assert result.plan is not None
    (warning,) = messages(result, Severity.WARNING)
    assert warning.endswith(
        'stan.conf:2:18: warning: unknown option "max_msg" in store_limits '
        '(did you mean "max_msgs"?); ignored'
    )


def test_alias_set_twice_warns(tmp_path: Path) -> None:
    result = compile_text(tmp_path, "streaming { store_limits { mm: 1\n max_msgs: 2 } }")
    assert result.plan is not None and result.plan.store_limits.defaults.max_msgs == 2
    assert any("already set at" in m for m in messages(result, Severity.WARNING))


def test_variables_are_not_unknown_options(tmp_path: Path) -> None:
    result = compile_text(tmp_path, "LIMIT: 5\nstreaming { store_limits { max_msgs: $LIMIT } }")
    assert result.plan is not None and not result.diagnostics


def test_every_error_is_reported_not_just_the_first(tmp_path: Path) -> None:
    text = 'streaming {\n hbf: "x"\n store_limits { max_msgs: -1, max_age: 10 }\n}'
    errors = messages(compile_text(tmp_path, text), Severity.ERROR)
    assert len(errors) == 3
    assert ':2:7: error: hb_fail_count must be an integer, got the string "x"' in errors[0]
    assert 'max_age must be a duration string such as "10s"' in errors[2]


def test_slices_larger_than_limits_warn(tmp_path: Path) -> None:
    text = (
        "streaming { store: file, dir: d, store_limits { max_msgs: 10 }, "
        "file_options { slice_max_msgs: 100 } }"
    )
    result = compile_text(tmp_path, text)
    assert result.plan is not None
    assert any("slice will never fill up" in m for m in messages(result, Severity.WARNING))


@pytest.mark.parametrize(
    ("text", "args", "warned"),
    [
        ("streaming { store: file, dir: d, ft_group: g }", (), True),
        ("streaming { store: file, dir: d, ft_group: g }", ("-ns", "nats://n:4222"), False),
        ("streaming { store: file, dir: d, ft_group: g }", ("--routes", "nats://b:6222"), False),
        (
            'cluster { listen: "0.0.0.0:6222", routes: ["nats://b:6222"] }\n'
            "streaming { store: file, dir: d, ft_group: g }",
            (),
            False,
        ),
        ("streaming { store: file, dir: d }", (), False),
    ],
    ids=["embedded-alone", "external-nats", "routes-flag", "nats-cluster-block", "no-ft"],
)
def test_ft_group_needs_a_shared_nats_cluster(
    tmp_path: Path, text: str, args: tuple[str, ...], warned: bool
) -> None:
    result = compile_text(tmp_path, text, *args)
    assert result.plan is not None
    found = [m for m in messages(result, Severity.WARNING) if "must share one NATS" in m]
    assert bool(found) is warned, messages(result)


def test_referenced_files_must_exist(tmp_path: Path) -> None:
    script = tmp_path / "archive.sh"
    script.write_text("#!/bin/sh\n")
    text = f'streaming {{ store: file, dir: d, file {{ slice_archive_script: "{script}" }} }}'
    errors = messages(compile_text(tmp_path, text), Severity.ERROR)
    assert errors and "is not executable" in errors[0]
    script.chmod(0o755)
    assert compile_text(tmp_path, text).plan is not None


def test_plan_dump_redacts_secrets(tmp_path: Path) -> None:
    text = (
        'streaming { encryption_key: "topsecret", password: "pw123", '
        'sql { driver: postgres, source: "password=dbpw" } }'
    )
    plan = compile_text(tmp_path, text).plan
    assert plan is not None
    dumped = json.dumps(plan_to_dict(plan))
    for secret in ("topsecret", "pw123", "dbpw"):
        assert secret not in dumped
    assert "topsecret" not in repr(plan)


def test_include_relative_to_file(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "limits.inc").write_text("max_msgs: 77\n")
    result = compile_text(tmp_path, "streaming { store_limits { include 'sub/limits.inc' } }")
    assert result.plan is not None and result.plan.store_limits.defaults.max_msgs == 77


def test_missing_config_file_is_a_positioned_error(tmp_path: Path) -> None:
    result = compile_args(["-sc", str(tmp_path / "nope.conf")], env={})
    assert result.plan is None and "nope.conf" in messages(result)[0]


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    st.text(alphabet=st.sampled_from(list("{}[]:=,;\"'#/\\$ \n\tabcmxs_.>*019-KBhk")), max_size=120)
)
def test_compiler_never_raises(tmp_path: Path, text: str) -> None:
    result = compile_text(tmp_path, text)
    assert result.plan is not None or any(d.severity is Severity.ERROR for d in result.diagnostics)


@pytest.mark.parametrize(
    "example", sorted(Path("config_examples").glob("*.conf")), ids=lambda p: p.name
)
def test_config_examples_are_valid(example: Path) -> None:
    env = {"NATS_STREAMING_ENCRYPTION_KEY": "example-key"}
    result = compile_args(["-sc", os.fspath(example)], env=env)
    assert result.plan is not None, messages(result)
    assert not messages(result, Severity.WARNING)


@pytest.mark.parametrize(
    ("source", "reason"),
    [
        ("not a dsn", "invalid DSN: missing the slash separating the database name"),
        ("u:p@tcp(h)x/db", "invalid DSN: did you forget to escape a param value?"),
        ("u@bogus/db", "default addr for network 'bogus' unknown"),
        ("u@bogus(h:1)/db", "unsupported network 'bogus' (one of tcp, tcp4, tcp6, unix)"),
        ("u@tcp4(10.0.0.1:3306)/db", ""),
        ("u:p@ss:w@rd@tcp(db.example:3307)/nss", ""),  # what the driver connects with
    ],
)
def test_mysql_source_checked_by_the_drivers_parser(source: str, reason: str) -> None:
    compiled = compile_args(["-st", "sql", "--sql_driver", "mysql", "--sql_source", source], {})
    if not reason:
        assert compiled.plan is not None, compiled.diagnostics
        return
    assert compiled.plan is None
    assert [d.message for d in compiled.diagnostics] == [
        "sql_options.source is not a MySQL DSN such as user:password@tcp(host:3306)/dbname "
        f"({reason})"
    ]
