"""The store records as the ``proto`` columns hold them (``spb`` messages, as the
reference writes them), and the SQL statements, written once with ``?`` placeholders and
``{row}`` for that column, then turned into each driver's form."""

from __future__ import annotations

from stanpkg.proto import spb_pb2 as spb
from stanpkg.stores.base import ClientRecord, ServerInfo, SubRecord
from stanpkg.stores.records import (
    client_from_proto,
    client_to_proto,
    server_info_from_proto,
    server_info_to_proto,
    sub_to_proto,
)
from stanpkg.stores.records import sub_from_proto as sub_state_from_proto
from stanpkg.stores.sql.drivers import Driver

__all__ = [
    "Statements",
    "client_from_row",
    "client_proto",
    "info_from_proto",
    "info_proto",
    "sub_from_proto",
    "sub_proto",
]


def info_proto(info: ServerInfo) -> bytes:
    return server_info_to_proto(info).SerializeToString()


def info_from_proto(data: bytes) -> ServerInfo:
    return server_info_from_proto(spb.ServerInfo.FromString(data))


def client_proto(record: ClientRecord) -> bytes:
    return client_to_proto(record).SerializeToString()


def client_from_row(client_id: str, hb_inbox: str, data: bytes | None) -> ClientRecord:
    """Rows written before the ``proto`` column existed only have ID and inbox."""
    if not data:
        return ClientRecord(id=client_id, hb_inbox=hb_inbox)
    return client_from_proto(spb.ClientInfo.FromString(bytes(data)))


def sub_proto(record: SubRecord) -> bytes:
    return sub_to_proto(record).SerializeToString()


def sub_from_proto(data: bytes) -> SubRecord:
    return sub_state_from_proto(spb.SubState.FromString(bytes(data)))


class Statements:
    """Every statement of the store, in the driver's dialect (see :meth:`Driver.sql`)."""

    HAS_SERVER_INFO = "SELECT COUNT(uniquerow) FROM ServerInfo"
    ADD_SERVER_INFO = "INSERT INTO ServerInfo (id, proto, version) VALUES (?, ?, ?)"
    UPDATE_SERVER_INFO = "UPDATE ServerInfo SET id=?, proto=?, version=? WHERE uniquerow=1"
    ADD_CLIENT = "INSERT INTO Clients (id, hbinbox, proto) VALUES (?, ?, ?)"
    DELETE_CLIENT = "DELETE FROM Clients WHERE id=?"
    ADD_CHANNEL = (
        "INSERT INTO Channels (id, name, maxmsgs, maxbytes, maxage) VALUES (?, ?, ?, ?, ?)"
    )
    MARK_CHANNEL_DELETED = "UPDATE Channels SET deleted=TRUE WHERE id=?"
    UPDATE_CHANNEL_LIMITS = "UPDATE Channels SET maxmsgs=?, maxbytes=?, maxage=? WHERE id=?"
    UPDATE_CHANNEL_MAXSEQ = "UPDATE Channels SET maxseq=? WHERE id=?"
    DELETE_CHANNEL_PENDING = (
        "DELETE FROM SubsPending WHERE subid IN (SELECT subid FROM Subscriptions WHERE id=?)"
    )
    DELETE_CHANNEL_SUBS = "DELETE FROM Subscriptions WHERE id=?"
    DELETE_CHANNEL_MSGS = "DELETE FROM Messages WHERE id=?"
    DELETE_CHANNEL = "DELETE FROM Channels WHERE id=?"
    STORE_MSG = "INSERT INTO Messages (id, seq, timestamp, size, data) VALUES (?, ?, ?, ?, ?)"
    STORE_MSGS_PREFIX = "INSERT INTO Messages (id, seq, timestamp, size, data) VALUES "
    DELETE_MSGS_UPTO = "DELETE FROM Messages WHERE id=? AND seq<=?"
    LOOKUP_MSG = "SELECT data FROM Messages WHERE id=? AND seq=?"
    READ_MSGS = "SELECT seq, data FROM Messages WHERE id=? AND seq>=? AND seq<=? ORDER BY seq"
    CREATE_SUB = "INSERT INTO Subscriptions (id, subid, proto) VALUES (?, ?, ?)"
    UPDATE_SUB = "UPDATE Subscriptions SET proto=? WHERE id=? AND subid=?"
    MARK_SUB_DELETED = "UPDATE Subscriptions SET deleted=TRUE WHERE id=? AND subid=?"
    DELETE_SUB = "DELETE FROM Subscriptions WHERE id=? AND subid=?"
    DELETE_SUBS_MARKED = "DELETE FROM Subscriptions WHERE id=? AND deleted=TRUE"
    UPDATE_SUB_LASTSENT = "UPDATE Subscriptions SET lastsent=? WHERE id=? AND subid=?"
    DELETE_SUB_PENDING = "DELETE FROM SubsPending WHERE subid=?"
    ADD_PENDING_SEQ = "INSERT INTO SubsPending (subid, {row}, seq) VALUES (?, ?, ?)"
    ADD_PENDING_ROW = (
        "INSERT INTO SubsPending (subid, {row}, lastsent, pending, acks) VALUES (?, ?, ?, ?, ?)"
    )
    DELETE_PENDING_SEQ = "DELETE FROM SubsPending WHERE subid=? AND seq=?"
    DELETE_PENDING_ROW = "DELETE FROM SubsPending WHERE subid=? AND {row}=?"
    DELETE_ORPHAN_PENDING = (
        "DELETE FROM SubsPending WHERE subid NOT IN (SELECT subid FROM Subscriptions)"
    )
    RECOVER_SERVER_INFO = "SELECT id, proto, version FROM ServerInfo WHERE uniquerow=1"
    RECOVER_CLIENTS = "SELECT id, hbinbox, proto FROM Clients"
    MAX_CHANNEL_ID = "SELECT COALESCE(MAX(id), 0) FROM Channels"
    MAX_SUB_ID = "SELECT COALESCE(MAX(subid), 0) FROM Subscriptions"
    RECOVER_CHANNELS = (
        "SELECT id, name, maxseq, maxmsgs, maxbytes, maxage FROM Channels "
        "WHERE deleted=FALSE ORDER BY id"
    )
    DELETED_CHANNELS = "SELECT id FROM Channels WHERE deleted=TRUE"
    RECOVER_MSG_INDEX = "SELECT seq, timestamp, size FROM Messages WHERE id=? ORDER BY seq"
    RECOVER_SUBS = "SELECT subid, lastsent, proto, deleted FROM Subscriptions WHERE id=?"
    RECOVER_PENDING = (
        "SELECT p.subid, p.{row}, p.seq, p.lastsent, p.pending, p.acks FROM SubsPending p "
        "INNER JOIN Subscriptions s ON s.subid=p.subid WHERE s.id=? ORDER BY p.subid, p.{row}"
    )
    LOCK_SELECT = "SELECT id, tick FROM StoreLock"
    LOCK_INSERT = "INSERT INTO StoreLock (id, tick) VALUES (?, ?)"
    LOCK_UPDATE = "UPDATE StoreLock SET id=?, tick=?"

    def __init__(self, driver: Driver) -> None:
        for name, text in vars(Statements).items():
            if name.isupper() and isinstance(text, str):
                setattr(self, name, driver.sql(text))
        self.LOCK_SELECT = driver.sql(Statements.LOCK_SELECT + driver.for_update)
