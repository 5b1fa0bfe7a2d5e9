"""Error strings sent to clients, verbatim from the reference (protocol.md §12)."""

from __future__ import annotations

# ConnectResponse
INVALID_CONN_REQ = "stan: invalid connection request"
INVALID_CLIENT_ID = "stan: invalid clientID: only alphanumeric and `-` or `_` characters allowed"
CLIENT_ALREADY_REGISTERED = "stan: clientID already registered"

# PubAck
INVALID_PUB_REQ = "stan: invalid publish request"

# PubAck / SubscriptionResponse
CHANNEL_BEING_DELETED = "stan: channel is being deleted"

# SubscriptionResponse
INVALID_SUB_REQ = "stan: invalid subscription request"
CLIENT_ID_MISSING = "stan: clientID missing"
INVALID_ACK_WAIT = "stan: invalid ack wait time, should be >= 1s"
INVALID_MAX_INFLIGHT = "stan: invalid MaxInflight, should be >= 1"
INVALID_START = "stan: invalid start position"
INVALID_SUBJECT = "stan: invalid subject"
UNKNOWN_CLIENT = "stan: unknown clientID"
INVALID_DURABLE_NAME = (
    "stan: durable name of a durable queue subscriber can't contain the character ':'"
)
DUPLICATE_DURABLE = "stan: duplicate durable registration"

# Unsubscribe / subscription close
INVALID_UNSUB_REQ = "stan: invalid unsubscribe request"
UNKNOWN_CHANNEL = "stan: unknown channel"
INVALID_SUB = "stan: invalid subscription"

# CloseResponse
INVALID_CLOSE_REQ = "stan: invalid close request"

# PingResponse
CLIENT_GONE = "client has been replaced or is no longer registered"

# Startup
NO_CONFIGURED_CHANNEL = "stan: no configured channel"


def case_conflict(new: str, existing: str) -> str:
    """v0.25+: channel names differing only by case are refused (sic "alreay")."""
    return (
        f'rejecting channel "{new}" because channel "{existing}" alreay exists '
        "(different cases not allowed)"
    )


class StartupError(Exception):
    """Reported as ``Failed to start: <text>``, exit status 1."""
