"""``--against``'s findings from a given server state (no server needed): counts, the
estimate for bytes, unknown ages, where a finding stands when a flag or the default sets
the limit, and the NATS URL chosen for the age count."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest

from stanpkg.plan.compile import compile_args
from stanpkg.plan.model import Plan
from stanpkg.review.against import check_against, nats_url_for
from stanpkg.review.ages import AgeAnswers, AgeQuestion
from stanpkg.review.live import LiveChannel, LiveServer


def plan_of(tmp_path: Path, text: str, *flags: str) -> Plan:
    conf = tmp_path / "new.conf"
    conf.write_text(text)
    result = compile_args([str(conf), *flags], env={}, positional_config=True)
    assert result.plan is not None, result.diagnostics
    return result.plan


def server(*channels: LiveChannel, store: str = "", port: int = 4222) -> LiveServer:
    return LiveServer("http://h:8222", "test-cluster", "S", "STANDALONE", store, 0, channels, port)


def no_probe(plan: Plan, url: str, cluster: str, questions: Sequence[AgeQuestion]) -> AgeAnswers:
    raise AssertionError("not asked")


def test_counts_and_positions(tmp_path: Path) -> None:
    plan = plan_of(tmp_path, 'store_limits { channels { "c": { max_bytes: 1000 } } }\n', "-mm", "5")
    live = server(LiveChannel("c", 10, 3000, 1, 10, 0))
    found = check_against(plan, live, probe=no_probe).diagnostics
    msgs, size = found
    assert (
        msgs.message
        == 'channel "c": 5 of its 10 messages would be removed at the next start (max_msgs 5)'
    )
    assert msgs.pos is None and msgs.where == "flag -mm"
    assert size.message.startswith('channel "c": about 7 of its 10 messages (3000 bytes, 2000 over')
    assert size.pos is not None and (size.pos.line, size.pos.col) == (1, 45)


def test_defaults_have_no_position(tmp_path: Path) -> None:
    plan = plan_of(tmp_path, "")
    (found,) = check_against(
        plan, server(LiveChannel("c", 1, 1, 1, 1, 1001)), probe=no_probe
    ).diagnostics
    assert found.pos is None and found.where == ""
    assert found.message.endswith("(max_subs 1000, the default)")


def test_ages_unknown_and_counted(tmp_path: Path) -> None:
    plan = plan_of(tmp_path, 'store_limits { max_age: "1h" }\n')
    live = server(LiveChannel("c", 10, 100, 5, 14, 0), LiveChannel("empty", 0, 0, 0, 0, 0), port=0)
    (found,) = check_against(plan, live, probe=no_probe).diagnostics  # no NATS URL known
    assert "how many of its 10 messages is not known: the NATS URL" in found.message

    asked: list[AgeQuestion] = []

    def probe(plan: Plan, url: str, cluster: str, questions: Sequence[AgeQuestion]) -> AgeAnswers:
        asked.extend(questions)
        assert (url, cluster) == ("nats://n:1", "test-cluster")
        return AgeAnswers({"c": 3}, {})

    result = check_against(plan, live, "nats://n:1", probe)
    assert asked == [AgeQuestion("c", 5, 10, 3_600_000_000_000)]  # not the empty channel
    assert [d.message for d in result.diagnostics] == [
        'channel "c": 3 of its 10 messages are older than 1h0m0s and would be removed at the '
        "next start (max_age 1h0m0s)"
    ]
    zero = check_against(plan, live, "nats://n:1", lambda *a: AgeAnswers({"c": 0}, {}))
    assert zero.diagnostics == () and zero.ages_counted


@pytest.mark.parametrize(
    ("given", "external", "host", "port", "expected"),
    [
        ("nats://x:1", "", "h", 4222, "nats://x:1"),
        ("", "nats://ext:4222", "h", 4222, "nats://ext:4222"),
        ("", "", "stan-1", 4333, "nats://stan-1:4333"),
        ("", "", "::1", 4333, "nats://[::1]:4333"),
        ("", "", "h", 0, ""),
    ],
)
def test_the_nats_url(
    tmp_path: Path, given: str, external: str, host: str, port: int, expected: str
) -> None:
    plan = plan_of(tmp_path, f'nats_server_url: "{external}"\n' if external else "")
    url = f"http://[{host}]:8222" if ":" in host else f"http://{host}:8222"
    live = LiveServer(url, "c", "S", "STANDALONE", "FILE", 0, (), port)
    assert nats_url_for(plan, live, given) == expected
