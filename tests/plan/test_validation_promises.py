"""What docs/validate.md promises: repeated keys warned, every problem in one run, the
Go server's Raft timing rules, honest errors for missing files."""

from __future__ import annotations

from pathlib import Path

import pytest

from stanpkg.cli import main
from stanpkg.plan.compile import Compilation, compile_args
from stanpkg.plan.diagnostics import Severity

CLUSTERED = 'streaming {{\n  store: file\n  dir: "ds"\n  cluster {{\n{raft}  }}\n}}\n'


def compile_file(tmp_path: Path, text: str, *flags: str) -> tuple[Path, Compilation]:
    path = tmp_path / "stan.conf"
    path.write_text(text)
    return path, compile_args([*flags, "-sc", str(path)], env={})


def lines(result: Compilation, severity: Severity) -> list[str]:
    return [str(d) for d in result.diagnostics if d.severity is severity]


# -- repeated keys and channel blocks ------------------------------------------------------


def test_repeated_key_warns_at_both_positions(tmp_path: Path) -> None:
    text = "streaming {\n  store_limits {\n    max_msgs: 5\n    max_msgs: 7\n  }\n}\n"
    path, result = compile_file(tmp_path, text)
    assert result.plan is not None and result.plan.store_limits.defaults.max_msgs == 7
    assert lines(result, Severity.WARNING) == [
        f'{path}:4:5: warning: option "max_msgs" is set again (first at {path}:3:5); '
        "the last one wins"
    ]
    assert result.diagnostics[0].code == "duplicate"


def test_key_set_three_times_warns_twice(tmp_path: Path) -> None:
    path, result = compile_file(tmp_path, "hbi: 1s\nhbi: 2s\nhbi: 3s\n")
    assert lines(result, Severity.WARNING) == [
        f'{path}:2:1: warning: option "hbi" is set again (first at {path}:1:1); the last one wins',
        f'{path}:3:1: warning: option "hbi" is set again (first at {path}:2:1); the last one wins',
    ]


def test_repeated_channel_block_warns(tmp_path: Path) -> None:
    text = (
        'store_limits {\n  channels {\n    "a": { max_msgs: 1 }\n    "a": { max_msgs: 2 }\n  }\n}\n'
    )
    path, result = compile_file(tmp_path, text)
    assert lines(result, Severity.WARNING) == [
        f'{path}:4:5: warning: channel "a" is set again (first at {path}:3:5); the last one wins'
    ]


def test_repeated_streaming_block_and_repeat_in_an_include(tmp_path: Path) -> None:
    (tmp_path / "inc.conf").write_text("cluster_id: x\n")
    text = "streaming { hbi: 1s }\nstreaming {\n  include inc.conf\n  cluster_id: y\n}\n"
    path, result = compile_file(tmp_path, text)
    assert lines(result, Severity.WARNING) == [
        f'{path}:2:1: warning: option "streaming" is set again (first at {path}:1:1); '
        "the last one wins",
        f'{path}:4:3: warning: option "cluster_id" is set again (first at '
        f"{tmp_path / 'inc.conf'}:1:1); the last one wins",
    ]


def test_a_redefined_variable_is_no_repeat(tmp_path: Path) -> None:
    _, result = compile_file(
        tmp_path, "v: 5\nmax_msgs_x: $v\nv: 6\nstore_limits { max_msgs: $v }\n"
    )
    assert not [d for d in result.diagnostics if d.code == "duplicate"]


def test_strict_makes_a_repeat_an_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    conf = tmp_path / "stan.conf"
    conf.write_text("hbi: 1s\nhbi: 2s\n")
    assert main(["validate", str(conf)]) == 0
    assert main(["validate", "--strict", str(conf)]) == 1
    assert f'{conf}:2:1: error: option "hbi" is set again' in capsys.readouterr().err


# -- all problems in one run -----------------------------------------------------------------


def test_bad_cipher_and_missing_key_both_reported(tmp_path: Path) -> None:
    path, result = compile_file(tmp_path, "encrypt: true\nencryption_cipher: rot13\n")
    errors = lines(result, Severity.ERROR)
    assert len(errors) == 2, errors
    assert errors[0].startswith(f"{path}:1:10: error: encryption is on but no key")
    assert errors[1].startswith(f'{path}:2:20: error: encryption_cipher: "ROT13" is not supported')


def test_rules_do_not_read_a_rejected_value_as_its_default(tmp_path: Path) -> None:
    # A bad store type must not become MEMORY (clustering would "need a FILE store"), a
    # bad dir is not a missing dir, a bad key is not a missing key.
    text = (
        "streaming {\nstore: nosuch\ndir: 5\ncluster { node_id: a }\n"
        "encrypt: true\nencryption_key: 5\n}\n"
    )
    path, result = compile_file(tmp_path, text)
    errors = lines(result, Severity.ERROR)
    assert [e.split(": error: ")[0] for e in errors] == [
        f"{path}:2:8",
        f"{path}:3:6",
        f"{path}:6:17",
    ]
    assert not lines(result, Severity.WARNING)


def test_bad_file_store_dir_type_and_a_cross_rule(tmp_path: Path) -> None:
    text = "store: file\ndir: ds\nhbf: -1\npartitioning: true\n"
    path, result = compile_file(tmp_path, text)
    errors = lines(result, Severity.ERROR)
    assert errors[0].startswith(f"{path}:3:6: error: heartbeat fail count")
    assert errors[1].startswith(f"{path}:4:15: error: partitioning needs the channels")


def test_a_section_that_is_not_a_map_is_not_missing(tmp_path: Path) -> None:
    text = "partitioning: true\nstore_limits { channels: 5 }\n"
    path, result = compile_file(tmp_path, text)
    assert [e.split(": error: ")[0] for e in lines(result, Severity.ERROR)] == [f"{path}:2:26"]


# -- Raft timing, as hashicorp/raft's ValidateConfig --------------------------------------


def raft(tmp_path: Path, **timeouts: str) -> tuple[Path, Compilation]:
    body = "".join(f'    raft_{k}_timeout: "{v}"\n' for k, v in timeouts.items())
    return compile_file(tmp_path, CLUSTERED.format(raft=body))


@pytest.mark.parametrize(
    ("timeouts", "col", "message"),
    [
        (
            {"heartbeat": "3s"},
            29,
            "raft_election_timeout (2s) must be equal to or greater than raft_heartbeat_timeout "
            "(3s) (ElectionTimeout must be equal or greater than Heartbeat Timeout)",
        ),
        (
            {"lease": "3s"},
            25,
            "raft_lease_timeout (3s) cannot be larger than raft_heartbeat_timeout (2s) "
            "(LeaderLeaseTimeout cannot be larger than heartbeat timeout)",
        ),
    ],
)
def test_relations_are_errors_at_the_value_set(
    tmp_path: Path, timeouts: dict[str, str], col: int, message: str
) -> None:
    path, result = raft(tmp_path, **timeouts)
    assert lines(result, Severity.ERROR) == [f"{path}:5:{col}: error: {message}"]


def test_relation_error_prefers_the_named_option_when_set(tmp_path: Path) -> None:
    path, result = raft(tmp_path, heartbeat="2s", election="1s")
    assert lines(result, Severity.ERROR)[0].startswith(f"{path}:6:28: error: raft_election_timeout")


@pytest.mark.parametrize(
    ("name", "value", "go_text"),
    [
        ("heartbeat", "4ms", "HeartbeatTimeout is too low"),
        ("election", "4ms", "ElectionTimeout is too low"),
        ("lease", "4ms", "LeaderLeaseTimeout is too low"),
        ("commit", "999µs", "CommitTimeout is too low"),
        ("heartbeat", "-1s", "HeartbeatTimeout is too low"),
    ],
)
def test_minimums(tmp_path: Path, name: str, value: str, go_text: str) -> None:
    path, result = raft(tmp_path, **{name: value})
    errors = lines(result, Severity.ERROR)
    assert len(errors) == 1 and errors[0].startswith(f"{path}:5:"), errors
    assert f"raft_{name}_timeout is too low ({value})" in errors[0] and go_text in errors[0]


def test_zero_means_the_default_as_in_go(tmp_path: Path) -> None:
    _, result = raft(tmp_path, heartbeat="0s", election="0", lease="0s", commit="0s")
    assert result.plan is not None, lines(result, Severity.ERROR)
    cluster = result.plan.cluster
    assert (cluster.raft_heartbeat_timeout, cluster.raft_election_timeout) == (2e9, 2e9)
    assert (cluster.raft_lease_timeout, cluster.raft_commit_timeout) == (1e9, 1e8)


def test_smallest_consistent_timings_are_valid(tmp_path: Path) -> None:
    _, result = raft(tmp_path, heartbeat="5ms", election="5ms", lease="5ms", commit="1ms")
    assert result.plan is not None, lines(result, Severity.ERROR)


def test_timing_relations_only_checked_when_clustered(tmp_path: Path) -> None:
    _, result = raft(tmp_path, heartbeat="3s")
    assert result.plan is None
    _, result = compile_file(
        tmp_path, CLUSTERED.format(raft='    raft_heartbeat_timeout: "3s"\n'), "--clustered=false"
    )
    assert result.plan is not None, lines(result, Severity.ERROR)


# -- directories the server creates and writes ----------------------------------------------


def test_file_store_dir_under_a_file_cannot_be_created(tmp_path: Path) -> None:
    (tmp_path / "a-file").write_text("")
    bad = tmp_path / "a-file" / "store"
    path, result = compile_file(tmp_path, f'streaming {{\n  store: file\n  dir: "{bad}"\n}}\n')
    assert lines(result, Severity.ERROR) == [
        f'{path}:3:8: error: dir: directory "{bad}" cannot be created: '
        f'"{tmp_path / "a-file"}" is not a directory'
    ]
    assert result.diagnostics[0].code == "directory"


def test_file_store_dir_that_is_a_file(tmp_path: Path) -> None:
    (tmp_path / "a-file").write_text("")
    result = compile_args(["-st", "file", "--dir", str(tmp_path / "a-file")], env={})
    assert [d.message for d in result.diagnostics] == [
        f'dir: directory "{tmp_path / "a-file"}" is not a directory'
    ]


def test_missing_dirs_that_can_be_created_are_valid_and_not_created(tmp_path: Path) -> None:
    store, log = tmp_path / "new" / "store", tmp_path / "new" / "raft"
    text = CLUSTERED.format(raft=f'    log_path: "{log}"\n    node_id: "a"\n')
    _, result = compile_file(tmp_path, text.replace('"ds"', f'"{store}"'))
    assert result.plan is not None, [str(d) for d in result.diagnostics]
    assert not (tmp_path / "new").exists()  # validate has no side effects


def test_cluster_log_path_checked_only_when_clustered(tmp_path: Path) -> None:
    (tmp_path / "a-file").write_text("")
    log = tmp_path / "a-file" / "raft"
    flags = ["-st", "file", "--dir", str(tmp_path / "ds"), "--cluster_log_path", str(log)]
    assert compile_args(flags, env={}).plan is not None
    clustered = compile_args([*flags, "-clustered", "-cluster_node_id", "a"], env={})
    assert [d.message for d in clustered.diagnostics] == [
        f'log_path: directory "{log}" cannot be created: "{tmp_path / "a-file"}" is not a directory'
    ]


def test_dir_of_another_store_type_is_not_checked(tmp_path: Path) -> None:
    (tmp_path / "a-file").write_text("")
    result = compile_args(["-st", "memory", "--dir", str(tmp_path / "a-file" / "x")], env={})
    assert result.plan is not None
    assert all(d.code != "directory" for d in result.diagnostics)


# -- sizes and durations as the configuration language writes them --------------------------

READABLE = (
    'streaming {\n  hb_interval: "90s"\n  store_limits {\n    max_bytes: 1MB\n'
    '    channels { "foo.*": { max_bytes: 5M, max_age: "1h30m" } }\n  }\n'
    "  file_options { buffer_size: 3000 }\n}\n"
)


def test_plan_gives_sizes_and_durations_readable(tmp_path: Path) -> None:
    from stanpkg.plan.dump import plan_to_dict

    _, result = compile_file(tmp_path, READABLE)
    assert result.plan is not None
    dumped = plan_to_dict(result.plan)
    assert dumped["store_limits"]["max_bytes"] == 1_048_576  # the number stays for programs
    readable = dumped["readable"]
    assert readable["hb_interval"] == "1m30s"
    assert readable["store_limits.max_bytes"] == "1MB"
    assert readable['store_limits.channels["foo.*"].max_bytes'] == "5M"
    assert readable['store_limits.channels["foo.*"].max_age'] == "1h30m0s"
    assert readable["file_options.buffer_size"] == "3K"
    assert "store_limits.max_age" not in readable  # 0: unlimited, no text to give


def test_explain_prints_them_next_to_the_number(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "stan.conf"
    path.write_text(READABLE)
    assert main(["validate", "--explain", str(path)]) == 0
    out = capsys.readouterr().out
    assert f"hb_interval = 90000000000 (1m30s)  (file {path}:2:16)" in out
    assert f"store_limits.max_bytes = 1048576 (1MB)  (file {path}:4:16)" in out


@pytest.mark.parametrize(
    ("value", "text"),
    [(1, "1"), (1000, "1K"), (1024, "1KB"), (1536, "1536"), (3 * 1024**3, "3GB"), (10**6, "1M")],
)
def test_size_as_written_reads_back_to_the_same_number(value: int, text: str) -> None:
    from stanpkg.conf.scalars import number
    from stanpkg.plan.units import size_as_written

    assert size_as_written(value) == text
    assert number(text)[1] == value
