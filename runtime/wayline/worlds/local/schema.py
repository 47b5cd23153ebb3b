"""The embedded world's tables. Message ids come from AUTOINCREMENT so an id is never reused
after its message is acked: ownership compares message ids (seed 000), and a recycled id would
make a stranger look like the owner."""

SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (
    run_id TEXT PRIMARY KEY,
    workflow TEXT NOT NULL,
    status TEXT NOT NULL,
    input TEXT,
    output TEXT,
    error TEXT,
    attributes TEXT,
    created_at REAL NOT NULL,
    started_at REAL,
    ended_at REAL,
    updated_at REAL NOT NULL,
    last_seq INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS runs_by_status ON runs (status, created_at);
-- the runs list's order and its cursor (runs_page): newest first, then by run id
CREATE INDEX IF NOT EXISTS runs_by_created ON runs (created_at, run_id);
CREATE TABLE IF NOT EXISTS events (
    run_id TEXT NOT NULL,
    seq INTEGER NOT NULL,
    type TEXT NOT NULL,
    cid TEXT,
    data TEXT NOT NULL,
    created_at REAL NOT NULL,
    PRIMARY KEY (run_id, seq)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS entities (
    run_id TEXT NOT NULL,
    cid TEXT NOT NULL,
    status TEXT NOT NULL,
    PRIMARY KEY (run_id, cid)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS hooks (
    token TEXT NOT NULL,
    run_id TEXT NOT NULL,
    cid TEXT NOT NULL,
    active INTEGER NOT NULL,
    created_at REAL NOT NULL,
    PRIMARY KEY (run_id, cid)
) WITHOUT ROWID;
CREATE UNIQUE INDEX IF NOT EXISTS hooks_active_token ON hooks (token) WHERE active = 1;
CREATE INDEX IF NOT EXISTS hooks_by_token ON hooks (token, created_at);
CREATE TABLE IF NOT EXISTS messages (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    topic TEXT NOT NULL,
    payload BLOB NOT NULL,
    idem_key TEXT UNIQUE,
    available_at REAL NOT NULL,
    attempts INTEGER NOT NULL DEFAULT 0,
    handbacks INTEGER NOT NULL DEFAULT 0,
    held_handbacks INTEGER NOT NULL DEFAULT 0,
    holder TEXT,
    created_at REAL NOT NULL,
    level INTEGER NOT NULL DEFAULT 5,
    ready_at REAL NOT NULL DEFAULT 0,
    fair_tag REAL NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS messages_due ON messages (topic, available_at);
CREATE INDEX IF NOT EXISTS runs_by_end ON runs (ended_at) WHERE ended_at IS NOT NULL;
CREATE TABLE IF NOT EXISTS runs_archive AS SELECT * FROM runs WHERE 0;
CREATE TABLE IF NOT EXISTS events_archive AS SELECT * FROM events WHERE 0;
-- An archived run's log is paged (the console's /events) as a live run's is: a page is a
-- range of this index, not a scan of every archived row (issue #37). Created on open, so an
-- archive written before the index existed gets it too.
CREATE INDEX IF NOT EXISTS events_archive_by_run ON events_archive (run_id, seq);
CREATE INDEX IF NOT EXISTS runs_archive_by_run ON runs_archive (run_id, created_at);
CREATE TABLE IF NOT EXISTS served (
    key TEXT PRIMARY KEY,
    data TEXT NOT NULL
) WITHOUT ROWID;
-- The change feed: one row per run, renumbered (REPLACE) by an append that changes the run's
-- status, and by every append while a row of feed_followers says someone follows them all.
-- AUTOINCREMENT keeps numbers rising across deletes, so "every row above my high-water mark"
-- is every run that moved since (writers are serialized by BEGIN IMMEDIATE: numbers are in
-- commit order).
CREATE TABLE IF NOT EXISTS run_feed (
    gseq INTEGER PRIMARY KEY AUTOINCREMENT,
    run_id TEXT NOT NULL UNIQUE
);
-- Payloads sent before the wait (world/hook_buffer.py): the entry's JSON per key; expires_at
-- repeats the entry's expiry so that a sweep is one DELETE.
CREATE TABLE IF NOT EXISTS hook_buffer (
    namespace TEXT NOT NULL,
    token TEXT NOT NULL,
    data TEXT NOT NULL,
    expires_at REAL NOT NULL,
    PRIMARY KEY (namespace, token)
) WITHOUT ROWID;
-- The watches of every append (World.watch_runs), one row each, named by the process that
-- holds it so a dead process's row can be dropped (holders.py).
CREATE TABLE IF NOT EXISTS feed_followers (
    follower TEXT PRIMARY KEY,
    holder TEXT NOT NULL
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS stream_records (
    run_id TEXT NOT NULL,
    stream TEXT NOT NULL,
    idx INTEGER NOT NULL,
    record TEXT NOT NULL,
    PRIMARY KEY (run_id, stream, idx)
) WITHOUT ROWID;
-- Concurrency slots: a row per holder of a key. A leased (step) holder's token names the take
-- that holds it now, so an older take of the same holder cannot renew or give it back.
CREATE TABLE IF NOT EXISTS slots (
    key TEXT NOT NULL,
    run_id TEXT NOT NULL,
    acquired_at REAL NOT NULL,
    expires_at REAL,
    token TEXT,
    PRIMARY KEY (key, run_id)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS slots_by_run ON slots (run_id);
-- Rate limits (wayline.RateLimit): a token bucket per key, its tokens as of ``at`` and the
-- tokens reserved for waiters (a JSON object, holder: when due).
CREATE TABLE IF NOT EXISTS rate_buckets (
    key TEXT PRIMARY KEY,
    tokens REAL NOT NULL,
    at REAL NOT NULL,
    reserved TEXT NOT NULL DEFAULT '{}'
) WITHOUT ROWID;
-- Out-of-line payloads (wayline.world.blobs): a value's compact JSON, named by its run and
-- its sha256, so a retried write stores nothing new (it renews created_at, which orphan
-- cleanup reads) and a run's cleanup removes its blobs.
CREATE TABLE IF NOT EXISTS blobs (
    run_id TEXT NOT NULL,
    digest TEXT NOT NULL,
    data BLOB NOT NULL,
    created_at REAL NOT NULL,
    PRIMARY KEY (run_id, digest)
);
CREATE TABLE IF NOT EXISTS blobs_archive (
    run_id TEXT NOT NULL,
    digest TEXT NOT NULL,
    data BLOB NOT NULL,
    created_at REAL NOT NULL,
    PRIMARY KEY (run_id, digest)
);
-- The fair queuing of ready work (_core/ordering.py, rule 2): per topic, the clock (the tag
-- of the work served last) and each key's last finish.
CREATE TABLE IF NOT EXISTS fair_clock (
    topic TEXT PRIMARY KEY,
    vtime REAL NOT NULL
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS fair_flows (
    topic TEXT NOT NULL,
    key TEXT NOT NULL,
    finish REAL NOT NULL,
    PRIMARY KEY (topic, key)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS dead_letters (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    message_id TEXT NOT NULL,
    topic TEXT NOT NULL,
    payload BLOB NOT NULL,
    attempts INTEGER NOT NULL,
    reason TEXT NOT NULL,
    created_at REAL NOT NULL
);
"""

ORDERING_COLUMNS = """
ALTER TABLE messages ADD COLUMN level INTEGER NOT NULL DEFAULT 5;
ALTER TABLE messages ADD COLUMN ready_at REAL NOT NULL DEFAULT 0;
ALTER TABLE messages ADD COLUMN fair_tag REAL NOT NULL DEFAULT 0;
UPDATE messages SET ready_at = available_at;
"""
"""What a database from before ready work was ordered gains: its messages keep the default
priority and the order they were sent in, and wait from when they became due."""

ORDERING_INDEXES = """
CREATE INDEX IF NOT EXISTS messages_order ON messages (topic, level, fair_tag, id);
CREATE INDEX IF NOT EXISTS messages_aging ON messages (topic, level, ready_at);
"""
"""Receive finds each level's longest-waiting work and reads a level's work in its order
(fair tag, id), from an index each, so a deep queue costs a claim no scan. Created after the
columns, which an older database gains only then."""
