"""The first checks of a subscription request, in the reference's order (protocol.md
§8.1, checks 2-6): shared by the request handler and the reading of requests whose
strings are not UTF-8."""

from __future__ import annotations

from stanpkg.plan.subjects import is_valid_channel_name
from stanpkg.proto import protocol_pb2 as pb
from stanpkg.server import errors

__all__ = ["request_error"]


def request_error(
    has_client_id: bool, ack_wait: int, max_inflight: int, start: int, subject: str
) -> str | None:
    if not has_client_id:
        return errors.CLIENT_ID_MISSING
    if ack_wait <= 0:
        return errors.INVALID_ACK_WAIT
    if max_inflight <= 0:
        return errors.INVALID_MAX_INFLIGHT
    if not pb.NewOnly <= start <= pb.First:
        return errors.INVALID_START
    if not is_valid_channel_name(subject, allow_wildcards=False):
        return errors.INVALID_SUBJECT
    return None
