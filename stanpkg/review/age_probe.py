"""How many of a channel's stored messages are older than a new ``max_age``: asked of the
running server as a STAN client, because the monitoring endpoints give no message times.

For each channel one subscription starts at "now minus max_age" (``TimeDeltaStart``, the
server's own clock, as its expiry uses), with one message in flight and none
acknowledged: the first message it delivers is the oldest one the new limit keeps, so
the messages before it are the ones it would remove. When nothing comes within
``WAIT`` seconds, every stored message is older. The subscription is closed at once; it
is not durable, so it leaves nothing behind.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Sequence

from stanpkg.client import StanBenchClient, StanError
from stanpkg.plan.model import Plan
from stanpkg.plan.redact import redact_urls
from stanpkg.proto import protocol_pb2 as pb
from stanpkg.review.ages import AgeAnswers, AgeQuestion
from stanpkg.transport import NatsConnection, NatsError, next_nuid

WAIT = 2.0  # seconds for the first message, when there is one
CONNECT_TIMEOUT = 5.0
PARALLEL = 16  # channels probed at once


async def _count(client: StanBenchClient, question: AgeQuestion) -> int:
    first: asyncio.Future[int] = asyncio.get_running_loop().create_future()

    def on_message(msg: pb.MsgProto) -> None:
        if not first.done():
            first.set_result(msg.sequence)

    sub = await client.subscribe(
        question.channel,
        lambda _sequence: None,
        start_position=pb.TimeDeltaStart,
        start_time_delta=question.max_age,
        on_message=on_message,
        max_inflight=1,
        last_wanted=1,  # acknowledge nothing: the server sends one message only
    )
    try:
        sequence = await asyncio.wait_for(first, WAIT)
    except TimeoutError:
        return question.msgs
    finally:
        with contextlib.suppress(StanError, NatsError, TimeoutError):
            await client.close_subscription(sub)
    return max(0, min(question.msgs, sequence - question.first_seq))


async def _ask(
    client: StanBenchClient, questions: Sequence[AgeQuestion], answers: AgeAnswers
) -> None:
    gate = asyncio.Semaphore(PARALLEL)

    async def one(question: AgeQuestion) -> None:
        async with gate:
            try:
                answers.older[question.channel] = await _count(client, question)
            except (StanError, NatsError, TimeoutError) as exc:
                answers.problems[question.channel] = redact_urls(str(exc)) or "timed out"

    await asyncio.gather(*(one(q) for q in questions))


async def count_older(
    plan: Plan, nats_url: str, cluster_id: str, questions: Sequence[AgeQuestion]
) -> AgeAnswers:
    """Connect to ``nats_url`` as the server NEW describes would (its credentials and
    TLS), to the streaming cluster ``cluster_id``, and answer every question."""
    from stanpkg.node import nats_endpoint  # the server's own way to build its identity

    endpoint = nats_endpoint(plan, nats_url)
    try:
        nc = await asyncio.wait_for(
            NatsConnection.connect(
                nats_url,
                name="stanpkg validate --against",
                connect_timeout=CONNECT_TIMEOUT,
                max_reconnect=0,
                **endpoint.connect_keywords(),
            ),
            CONNECT_TIMEOUT * 2,
        )
    except (NatsError, OSError, TimeoutError) as exc:
        reason = f"cannot connect to NATS at {nats_url}: {exc or 'timed out'}"
        return AgeAnswers({}, {}, redact_urls(reason))
    answers = AgeAnswers({}, {})
    try:
        client_id = f"stanpkg-review-{next_nuid()}"
        try:
            client = await StanBenchClient.connect(
                nc,
                cluster_id,
                client_id,
                discover_prefix=plan.discover_prefix,
                timeout=CONNECT_TIMEOUT,
            )
        except StanError as exc:
            reason = f"the streaming server at {nats_url} refused a client: {exc}"
            return AgeAnswers({}, {}, redact_urls(reason))
        try:
            await _ask(client, questions, answers)
        finally:
            with contextlib.suppress(StanError, NatsError, TimeoutError):
                await client.close(timeout=CONNECT_TIMEOUT)
    finally:
        await nc.close()
    return answers


def probe_ages(
    plan: Plan, nats_url: str, cluster_id: str, questions: Sequence[AgeQuestion]
) -> AgeAnswers:
    if not questions:
        return AgeAnswers({}, {})
    return asyncio.run(count_older(plan, nats_url, cluster_id, questions))
