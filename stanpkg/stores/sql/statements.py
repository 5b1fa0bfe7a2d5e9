"""The store's SQL statements, written once with ``?`` placeholders and ``{row}`` for the
``SubsPending.row`` column (a keyword quoted differently by each driver), then turned
into each driver's form."""

from __future__ import annotations

from stanpkg.stores.sql.drivers import Driver

__all__ = ["Statements"]


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
