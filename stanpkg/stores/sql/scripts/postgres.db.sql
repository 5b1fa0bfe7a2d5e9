-- Tables of the stanpkg / NATS Streaming SQL store, PostgreSQL (9.5 or later).
-- Table and column names are those of nats-streaming-server's scripts/postgres.db.sql,
-- so a database created for the reference server keeps working, and back.
--
--   psql -h HOST -U OWNER -d DBNAME -f postgres.db.sql
--
-- The server needs SELECT, INSERT, UPDATE and DELETE on these tables, nothing more.

CREATE TABLE IF NOT EXISTS ServerInfo (
    uniquerow INTEGER DEFAULT 1,
    id VARCHAR(1024),
    proto BYTEA,
    version INTEGER,
    PRIMARY KEY (uniquerow)
);

CREATE TABLE IF NOT EXISTS Clients (
    id VARCHAR(1024),
    hbinbox TEXT,
    proto BYTEA,
    PRIMARY KEY (id)
);

CREATE TABLE IF NOT EXISTS Channels (
    id INTEGER,
    name VARCHAR(1024) NOT NULL,
    maxseq BIGINT DEFAULT 0,
    maxmsgs INTEGER DEFAULT 0,
    maxbytes BIGINT DEFAULT 0,
    maxage BIGINT DEFAULT 0,
    deleted BOOL DEFAULT FALSE,
    PRIMARY KEY (id)
);
CREATE INDEX IF NOT EXISTS Idx_ChannelsName ON Channels (name);

CREATE TABLE IF NOT EXISTS Messages (
    id INTEGER,
    seq BIGINT,
    timestamp BIGINT,
    size INTEGER,
    data BYTEA,
    CONSTRAINT PK_MsgKey PRIMARY KEY (id, seq)
);
CREATE INDEX IF NOT EXISTS Idx_MsgsTimestamp ON Messages (timestamp);

CREATE TABLE IF NOT EXISTS Subscriptions (
    id INTEGER,
    subid BIGINT,
    lastsent BIGINT DEFAULT 0,
    proto BYTEA,
    deleted BOOL DEFAULT FALSE,
    CONSTRAINT PK_SubKey PRIMARY KEY (id, subid)
);

CREATE TABLE IF NOT EXISTS SubsPending (
    subid BIGINT,
    row BIGINT,
    seq BIGINT DEFAULT 0,
    lastsent BIGINT DEFAULT 0,
    pending BYTEA,
    acks BYTEA,
    CONSTRAINT PK_MsgPendingKey PRIMARY KEY (subid, row)
);
CREATE INDEX IF NOT EXISTS Idx_SubsPendingSeq ON SubsPending (seq);

CREATE TABLE IF NOT EXISTS StoreLock (
    id VARCHAR(30),
    tick BIGINT DEFAULT 0
);

-- Databases created before reference release 0.10.0 lack Clients.proto:
--   ALTER TABLE Clients ADD COLUMN IF NOT EXISTS proto BYTEA;
