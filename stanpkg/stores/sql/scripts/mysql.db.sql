-- Tables of the stanpkg / NATS Streaming SQL store, MySQL 5.7+ / MariaDB 10.2+ (InnoDB).
-- Table and column names are those of nats-streaming-server's scripts/mysql.db.sql,
-- so a database created for the reference server keeps working, and back.
--
--   mysql -h HOST -u OWNER -p DBNAME < mysql.db.sql
--
-- The server needs SELECT, INSERT, UPDATE and DELETE on these tables, nothing more.
-- Messages.data is a MEDIUMBLOB (16 MiB) so that payloads above 64 KiB fit; the
-- reference's BLOB column works too, for payloads up to 64 KiB.

CREATE TABLE IF NOT EXISTS ServerInfo (
    uniquerow INT DEFAULT 1,
    id VARCHAR(1024),
    proto BLOB,
    version INTEGER,
    PRIMARY KEY (uniquerow)
);

CREATE TABLE IF NOT EXISTS Clients (
    id VARCHAR(1024),
    hbinbox TEXT,
    proto BLOB,
    PRIMARY KEY (id(256))
);

CREATE TABLE IF NOT EXISTS Channels (
    id INTEGER,
    name VARCHAR(1024) NOT NULL,
    maxseq BIGINT UNSIGNED DEFAULT 0,
    maxmsgs INTEGER DEFAULT 0,
    maxbytes BIGINT DEFAULT 0,
    maxage BIGINT DEFAULT 0,
    deleted BOOL DEFAULT FALSE,
    PRIMARY KEY (id),
    INDEX Idx_ChannelsName (name(256))
);

CREATE TABLE IF NOT EXISTS Messages (
    id INTEGER,
    seq BIGINT UNSIGNED,
    timestamp BIGINT,
    size INTEGER,
    data MEDIUMBLOB,
    CONSTRAINT PK_MsgKey PRIMARY KEY (id, seq),
    INDEX Idx_MsgsTimestamp (timestamp)
);

CREATE TABLE IF NOT EXISTS Subscriptions (
    id INTEGER,
    subid BIGINT UNSIGNED,
    lastsent BIGINT UNSIGNED DEFAULT 0,
    proto BLOB,
    deleted BOOL DEFAULT FALSE,
    CONSTRAINT PK_SubKey PRIMARY KEY (id, subid)
);

CREATE TABLE IF NOT EXISTS SubsPending (
    subid BIGINT UNSIGNED,
    `row` BIGINT UNSIGNED,
    seq BIGINT UNSIGNED DEFAULT 0,
    lastsent BIGINT UNSIGNED DEFAULT 0,
    pending BLOB,
    acks BLOB,
    CONSTRAINT PK_MsgPendingKey PRIMARY KEY (subid, `row`),
    INDEX Idx_SubsPendingSeq (seq)
);

CREATE TABLE IF NOT EXISTS StoreLock (
    id VARCHAR(30),
    tick BIGINT UNSIGNED DEFAULT 0
);

-- Databases created before reference release 0.10.0 lack Clients.proto:
--   ALTER TABLE Clients ADD proto BLOB;
