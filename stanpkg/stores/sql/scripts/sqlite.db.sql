-- Tables of the stanpkg SQL store, SQLite (driver "sqlite", source = a file path).
-- Same tables and columns as postgres.db.sql and mysql.db.sql. The server creates them
-- itself in a new (empty) database file; this script is for creating one by hand:
--
--   sqlite3 /var/lib/stanpkg/store.db < sqlite.db.sql

CREATE TABLE IF NOT EXISTS ServerInfo (
    uniquerow INTEGER DEFAULT 1,
    id TEXT,
    proto BLOB,
    version INTEGER,
    PRIMARY KEY (uniquerow)
);

CREATE TABLE IF NOT EXISTS Clients (
    id TEXT,
    hbinbox TEXT,
    proto BLOB,
    PRIMARY KEY (id)
);

CREATE TABLE IF NOT EXISTS Channels (
    id INTEGER,
    name TEXT NOT NULL,
    maxseq INTEGER DEFAULT 0,
    maxmsgs INTEGER DEFAULT 0,
    maxbytes INTEGER DEFAULT 0,
    maxage INTEGER DEFAULT 0,
    deleted BOOLEAN DEFAULT FALSE,
    PRIMARY KEY (id)
);
CREATE INDEX IF NOT EXISTS Idx_ChannelsName ON Channels (name);

CREATE TABLE IF NOT EXISTS Messages (
    id INTEGER,
    seq INTEGER,
    timestamp INTEGER,
    size INTEGER,
    data BLOB,
    CONSTRAINT PK_MsgKey PRIMARY KEY (id, seq)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS Idx_MsgsTimestamp ON Messages (timestamp);

CREATE TABLE IF NOT EXISTS Subscriptions (
    id INTEGER,
    subid INTEGER,
    lastsent INTEGER DEFAULT 0,
    proto BLOB,
    deleted BOOLEAN DEFAULT FALSE,
    CONSTRAINT PK_SubKey PRIMARY KEY (id, subid)
);

CREATE TABLE IF NOT EXISTS SubsPending (
    subid INTEGER,
    "row" INTEGER,
    seq INTEGER DEFAULT 0,
    lastsent INTEGER DEFAULT 0,
    pending BLOB,
    acks BLOB,
    CONSTRAINT PK_MsgPendingKey PRIMARY KEY (subid, "row")
);
CREATE INDEX IF NOT EXISTS Idx_SubsPendingSeq ON SubsPending (seq);

CREATE TABLE IF NOT EXISTS StoreLock (
    id TEXT,
    tick INTEGER DEFAULT 0
);
