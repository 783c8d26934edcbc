"""The store's SQL, written once for both backends.

Statements use `:name` parameters and two markers that `dialect.render` fills in:
`{skip_locked}` (row locks that skip rows another worker holds, PostgreSQL only) and
`{json_array:name}` (a table of the strings in the JSON array parameter `name`).
Values always travel as parameters; the only text spliced in comes from code constants.
"""

from __future__ import annotations

SCHEMA_VERSION = 2

CREATE_VERSION_TABLE = """
CREATE TABLE IF NOT EXISTS checkpoint_schema_version (
    version INTEGER NOT NULL,
    applied_at DOUBLE PRECISION NOT NULL
)"""

SELECT_VERSION = "SELECT MAX(version) FROM checkpoint_schema_version"

INSERT_VERSION = """
INSERT INTO checkpoint_schema_version (version, applied_at) VALUES (:version, :now)"""

# The CHECKs restate the state machine so that no code path can store an impossible tracker.
CREATE_SCHEMA = (
    """
CREATE TABLE IF NOT EXISTS checkpoint_trackers (
    scope TEXT NOT NULL,
    record_id TEXT NOT NULL,
    status TEXT NOT NULL CHECK (status IN
        ('pending', 'in_progress', 'failed', 'exhausted', 'succeeded', 'ignored')),
    attempts INTEGER NOT NULL CHECK (attempts >= 0),
    max_attempts INTEGER NOT NULL CHECK (max_attempts >= 1),
    redrive_count INTEGER NOT NULL DEFAULT 0,
    lease_owner TEXT,
    lease_token TEXT,
    lease_expires_at DOUBLE PRECISION,
    next_attempt_at DOUBLE PRECISION,
    created_at DOUBLE PRECISION NOT NULL,
    updated_at DOUBLE PRECISION NOT NULL,
    last_error TEXT,
    last_traceback TEXT,
    ignored_reason TEXT,
    payload TEXT,
    result TEXT,
    PRIMARY KEY (scope, record_id),
    CHECK (attempts <= max_attempts),
    CHECK ((status IN ('succeeded', 'exhausted', 'ignored')) = (next_attempt_at IS NULL)),
    CHECK ((status = 'in_progress') = (lease_expires_at IS NOT NULL)),
    CHECK (status <> 'in_progress' OR lease_token IS NOT NULL)
)""",
    # Claims walk this index in due order and stop after `limit` rows, whatever the scope size.
    """
CREATE INDEX IF NOT EXISTS checkpoint_trackers_due
    ON checkpoint_trackers (scope, next_attempt_at, record_id)""",
    """
CREATE INDEX IF NOT EXISTS checkpoint_trackers_status
    ON checkpoint_trackers (status, next_attempt_at)""",
)

# Memos (version 2): a value kept while its stamp holds, such as a landing file's hash while
# its size and modification time hold. One row per (scope, key), replaced in place, so what
# a write proves about 10,000 files is 10,000 small rows, never one record's blob.
CREATE_MEMOS = (
    """
CREATE TABLE IF NOT EXISTS checkpoint_memos (
    scope TEXT NOT NULL,
    memo_key TEXT NOT NULL,
    stamp TEXT NOT NULL,
    memo TEXT,
    updated_at DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (scope, memo_key)
)""",
)

# What each schema version adds to the one before it (a store is upgraded in place).
MIGRATIONS = {2: CREATE_MEMOS}
CREATE_SCHEMA = CREATE_SCHEMA + CREATE_MEMOS

_SELECT_TRACKERS = """
SELECT scope, record_id, status, attempts, max_attempts, redrive_count,
    lease_owner, lease_token, lease_expires_at, next_attempt_at, created_at, updated_at,
    last_error, last_traceback, ignored_reason, payload, result
FROM checkpoint_trackers"""

REGISTER = """
INSERT INTO checkpoint_trackers (scope, record_id, status, attempts, max_attempts,
    redrive_count, next_attempt_at, created_at, updated_at, payload)
VALUES (:scope, :record_id, 'pending', 0, :max_attempts, 0, :now, :now, :now, :payload)
ON CONFLICT (scope, record_id) DO NOTHING"""

# A due record is pending, failed past its backoff, or in_progress past its lease (its
# holder crashed or hung): all three have next_attempt_at <= now. One that already used
# its last attempt is moved to exhausted instead of being handed out again.
# The pick is a MATERIALIZED CTE so that it runs exactly once: as a plain `IN (subquery)`
# PostgreSQL may re-run it per row, re-check the rows this very UPDATE changed, and so
# hand out more than `limit` records.
_PICK_DUE = """
WITH picked AS MATERIALIZED (
    SELECT record_id FROM checkpoint_trackers
    WHERE scope = :scope AND next_attempt_at <= :now"""

_ONLY_LISTED = """
        AND record_id IN (SELECT value FROM {json_array:record_ids})"""

_CLAIM_PICKED = """
    ORDER BY next_attempt_at, record_id
    LIMIT :limit {skip_locked})
UPDATE checkpoint_trackers SET
    status = CASE WHEN attempts >= max_attempts THEN 'exhausted' ELSE 'in_progress' END,
    attempts = CASE WHEN attempts >= max_attempts THEN attempts ELSE attempts + 1 END,
    last_error = CASE WHEN status = 'in_progress'
        THEN 'lease held by ' || lease_owner || ' expired without a result'
        ELSE last_error END,
    last_traceback = CASE WHEN status = 'in_progress' THEN NULL ELSE last_traceback END,
    lease_owner = CASE WHEN attempts >= max_attempts THEN lease_owner ELSE :owner END,
    lease_token = CASE WHEN attempts >= max_attempts THEN lease_token ELSE :token END,
    lease_expires_at = CASE WHEN attempts >= max_attempts THEN NULL ELSE :expires END,
    next_attempt_at = CASE WHEN attempts >= max_attempts THEN NULL ELSE :expires END,
    updated_at = :now
WHERE scope = :scope AND record_id IN (SELECT record_id FROM picked)
RETURNING record_id, status, attempts, max_attempts, lease_expires_at, payload"""

CLAIM_DUE = _PICK_DUE + _CLAIM_PICKED
CLAIM_LISTED = _PICK_DUE + _ONLY_LISTED + _CLAIM_PICKED

_HELD = """
WHERE scope = :scope AND record_id = :record_id
    AND lease_token = :token AND status = 'in_progress'"""

EXTEND = (
    """
UPDATE checkpoint_trackers SET
    lease_expires_at = :expires, next_attempt_at = :expires, updated_at = :now"""
    + _HELD
)

SUCCEED = (
    """
UPDATE checkpoint_trackers SET
    status = 'succeeded', result = :result, lease_expires_at = NULL,
    next_attempt_at = NULL, updated_at = :now"""
    + _HELD
)

# A final error (retrying cannot help) exhausts the record at once.
FAIL = (
    """
UPDATE checkpoint_trackers SET
    status = CASE WHEN attempts >= max_attempts OR :final THEN 'exhausted' ELSE 'failed' END,
    next_attempt_at = CASE WHEN attempts >= max_attempts OR :final THEN NULL ELSE :retry_at END,
    last_error = :error, last_traceback = :traceback,
    lease_expires_at = NULL, updated_at = :now"""
    + _HELD
    + """
RETURNING status"""
)

# Giving a record back undoes the attempt its claim counted.
RELEASE = (
    """
UPDATE checkpoint_trackers SET
    status = 'pending', attempts = attempts - 1, lease_expires_at = NULL,
    next_attempt_at = :now, updated_at = :now"""
    + _HELD
)

# A live lease means a worker may be mid side effect: it is not ours to overrule.
IGNORE = """
UPDATE checkpoint_trackers SET
    status = 'ignored', ignored_reason = :reason, lease_expires_at = NULL,
    next_attempt_at = NULL, updated_at = :now
WHERE scope = :scope AND record_id = :record_id
    AND (status IN ('pending', 'failed', 'exhausted', 'ignored')
        OR (status = 'in_progress' AND lease_expires_at <= :now))"""

_ANY_SCOPE = "(CAST(:scope AS TEXT) IS NULL OR scope = :scope)"
_ANY_RECORD = """(CAST(:record_ids AS TEXT) IS NULL
        OR record_id IN (SELECT value FROM {json_array:record_ids}))"""

REDRIVE = (
    """
UPDATE checkpoint_trackers SET
    status = 'pending', attempts = 0, redrive_count = redrive_count + 1,
    next_attempt_at = :now, updated_at = :now
WHERE status = 'exhausted' AND """
    + _ANY_SCOPE
    + " AND "
    + _ANY_RECORD
)

_ONE_RECORD = """
WHERE scope = :scope AND record_id = :record_id"""
_ANY_STATUS = """(CAST(:statuses AS TEXT) IS NULL
        OR status IN (SELECT value FROM {json_array:statuses}))"""

GET = _SELECT_TRACKERS + _ONE_RECORD
_ANY_PREFIX = """(CAST(:prefix AS TEXT) IS NULL
        OR substr(record_id, 1, length(CAST(:prefix AS TEXT))) = :prefix)"""
LIST = (
    _SELECT_TRACKERS
    + "\nWHERE "
    + _ANY_SCOPE
    + " AND "
    + _ANY_STATUS
    + " AND "
    + _ANY_PREFIX
    + "\nORDER BY scope, record_id"
)

COUNTS = """
SELECT status, COUNT(*) FROM checkpoint_trackers WHERE scope = :scope GROUP BY status"""

# Crashed holders count too: their records need a run as much as failed ones do.
RETRYABLE = """
SELECT scope, MIN(next_attempt_at) FROM checkpoint_trackers
WHERE status IN ('failed', 'in_progress') AND next_attempt_at <= :now
GROUP BY scope
ORDER BY MIN(next_attempt_at), scope"""

GET_MEMOS = """
SELECT memo_key, stamp, memo FROM checkpoint_memos
WHERE scope = :scope AND memo_key IN (SELECT value FROM {json_array:keys})"""

SCOPE_MEMOS = """
SELECT memo_key, stamp, memo FROM checkpoint_memos WHERE scope = :scope ORDER BY memo_key"""

PUT_MEMO = """
INSERT INTO checkpoint_memos (scope, memo_key, stamp, memo, updated_at)
VALUES (:scope, :memo_key, :stamp, :memo, :now)
ON CONFLICT (scope, memo_key) DO UPDATE SET
    stamp = excluded.stamp, memo = excluded.memo, updated_at = excluded.updated_at"""

# Compare-and-set on one memo (``remember_if``): the insert takes a key nobody holds, the
# update replaces a memo only while its stamp and JSON text are still the expected ones
# (encode_json writes one text per value). Under PostgreSQL's READ COMMITTED an UPDATE that
# waited for a concurrent one re-checks its WHERE on the row that one left, so exactly one
# of two racing callers changes the memo.
INSERT_MEMO_IF_ABSENT = """
INSERT INTO checkpoint_memos (scope, memo_key, stamp, memo, updated_at)
VALUES (:scope, :memo_key, :stamp, :memo, :now)
ON CONFLICT (scope, memo_key) DO NOTHING"""

REPLACE_MEMO_IF_UNCHANGED = """
UPDATE checkpoint_memos SET stamp = :stamp, memo = :memo, updated_at = :now
WHERE scope = :scope AND memo_key = :memo_key AND stamp = :expected_stamp
    AND (memo = :expected_memo
        OR (memo IS NULL AND CAST(:expected_memo AS TEXT) IS NULL))"""

FORGET_MEMOS = """
DELETE FROM checkpoint_memos
WHERE scope = :scope AND memo_key IN (SELECT value FROM {json_array:keys})"""
