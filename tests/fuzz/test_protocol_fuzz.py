"""A bounded, seeded run of tests/fuzz/protocol_fuzz.py: hostile payloads on every
client-facing subject of a real server on a real nats-server; every malformed request
answered with the reference's text, nothing leaked, the next real client served."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from stanpkg.server import errors
from tests.fuzz import protocol_fuzz as fuzz
from tests.server.conftest import start_nats_process


@pytest.mark.slow
def test_protocol_fuzz_fixed_seed(tmp_path: Path) -> None:
    proc, url = start_nats_process(tmp_path)
    try:
        report = asyncio.run(fuzz.fuzz(url, rounds=800, seed=15, cluster_id="fuzz-ci"))
    finally:
        proc.kill()
        proc.wait(10)
    print("\n".join(report.lines()))
    assert report.failures == []
    assert report.tracebacks == 0
    assert report.after is not None and report.before is not None
    # The run reached every subject and every decode-failure answer of the reference.
    assert all(report.sent[kind] == 800 for kind in fuzz.KINDS)
    seen = {key.split(": ", 1)[1] for key in report.answers}
    for text in (
        errors.INVALID_CONN_REQ,
        errors.INVALID_CLIENT_ID,
        errors.INVALID_PUB_REQ,
        errors.INVALID_SUB_REQ,
        errors.INVALID_UNSUB_REQ,
        errors.INVALID_CLOSE_REQ,
        errors.CLIENT_GONE,
        fuzz.NO_REPLY,
    ):
        assert text in seen, text
    # Memory: a bound far above the noise (a few MiB), far below a real leak of
    # 6,400 requests' worth of state.
    assert report.after.rss - report.before.rss < 48 * 2**20


def test_expected_answers_follow_the_reference() -> None:
    """The harness's oracle itself, on hand-made payloads (spec §3.1, §4, §7.1, §9.3)."""
    pb = fuzz.pb
    assert fuzz.expected("discover", b"\xff") == {errors.INVALID_CONN_REQ}
    no_inbox = pb.ConnectRequest(clientID="a").SerializeToString()
    assert fuzz.expected("discover", no_inbox) == {errors.INVALID_CONN_REQ}
    bad_id = pb.ConnectRequest(clientID="a b", heartbeatInbox="x").SerializeToString()
    assert fuzz.expected("discover", bad_id) == {errors.INVALID_CLIENT_ID}
    assert fuzz.expected("ping", b"") == {fuzz.NO_REPLY}
    assert fuzz.expected("ack", b"\x00\x01") == {fuzz.NO_REPLY}
    no_guid = pb.PubMsg(clientID="a", subject="foo").SerializeToString()
    assert fuzz.expected("publish", no_guid) == {errors.INVALID_PUB_REQ}
    wildcard = pb.SubscriptionRequest(
        clientID="a", subject="foo.*", ackWaitInSecs=1, maxInFlight=1
    ).SerializeToString()
    assert fuzz.expected("subscribe", wildcard) == {errors.INVALID_SUBJECT}
    # Strings that are not UTF-8 decode in the reference (gogo protobuf): its next
    # check answers.
    not_utf8_id = b"\x0a\x02\xc3\x28\x12\x01x"  # ConnectRequest{clientID: c3 28, inbox: x}
    assert fuzz.expected("discover", not_utf8_id) == {errors.INVALID_CLIENT_ID}
    assert fuzz.expected("close", b"\x0a\x01\xff") == {errors.UNKNOWN_CLIENT}
