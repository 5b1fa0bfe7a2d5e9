"""The hand-over: once a migration's channels and records are on a quorum, the cluster's
serving node is told which channels it now has (``layout.migrated_subject``); it loads them
as its promotion would and serves them at once. Without a serving node (none running, or
an external JetStream alone), the next node to serve loads them at its promotion."""

from __future__ import annotations

import json

from stanpkg.stores.jetstream.layout import migrated_subject
from stanpkg.transport.connection import NatsConnection
from stanpkg.transport.errors import NatsError, NoRespondersError

__all__ = ["HANDOVER_TIMEOUT", "hand_over"]

HANDOVER_TIMEOUT = 120.0  # the serving node reads the channels' messages before answering

NO_NODE = "no node serves: the next node to serve loads them when it takes over"


async def hand_over(
    conn: NatsConnection, cluster_id: str, names: list[str], timeout: float = HANDOVER_TIMEOUT
) -> tuple[bool, str]:
    """(served, what happened): the serving node's answer, or why there was none."""
    subject = migrated_subject(cluster_id)
    try:
        answer = await conn.request(subject, json.dumps(names).encode(), timeout)
    except NoRespondersError:
        return True, NO_NODE
    except TimeoutError:
        return False, f"the serving node did not answer within {timeout:.0f} s"
    except NatsError as exc:
        return False, f"unable to ask the serving node: {exc}"
    text = answer.decode(errors="replace")
    if text.startswith("+OK"):
        loaded = text[3:].strip() or "0"
        return True, f"the serving node serves them now ({loaded} channel(s) loaded)"
    return False, f"the serving node could not load them: {text.removeprefix('-ERR ').strip()}"
