"""Idempotent write strategies over delta-rs. No Dagster imports live here."""

from idem_assets.lake.append import append_exactly_once, txn_version
from idem_assets.lake.changes import (
    ChangeFeed,
    ChangeFeedDisabledError,
    PendingChanges,
    change_rows,
)
from idem_assets.lake.commits import Commit
from idem_assets.lake.dedupe import DedupeResult, dedupe_newest
from idem_assets.lake.erasure import Erased, erase_key, files_holding, key_digest
from idem_assets.lake.fingerprint import (
    Fingerprint,
    FingerprintAccumulator,
    PendingFingerprint,
    count_row_differences,
    fingerprint,
    fingerprint_batches,
)
from idem_assets.lake.history import (
    IS_CURRENT,
    VALID_FROM,
    VALID_TO,
    history_problems,
    merge_history,
)
from idem_assets.lake.history_deletes import history_deletes
from idem_assets.lake.merge import MergePlan, merge_upsert, merge_with_deletes, plan_merge
from idem_assets.lake.overwrite import (
    PartitionMismatchError,
    overwrite_partitions,
    overwrite_slice,
    overwrite_stream,
)
from idem_assets.lake.predicates import In, OneOf, Range, UnsafePredicateError, date_range
from idem_assets.lake.replace import replace_table
from idem_assets.lake.result import Proof, WriteResult
from idem_assets.lake.tables import (
    LakeTable,
    SchemaMismatchError,
    WriteOptions,
    read_rows,
    slice_signature,
)

__all__ = [
    "ChangeFeed",
    "Commit",
    "ChangeFeedDisabledError",
    "PendingChanges",
    "IS_CURRENT",
    "VALID_FROM",
    "VALID_TO",
    "DedupeResult",
    "Fingerprint",
    "Erased",
    "FingerprintAccumulator",
    "PendingFingerprint",
    "LakeTable",
    "SchemaMismatchError",
    "WriteOptions",
    "MergePlan",
    "In",
    "OneOf",
    "PartitionMismatchError",
    "Proof",
    "Range",
    "UnsafePredicateError",
    "WriteResult",
    "append_exactly_once",
    "change_rows",
    "txn_version",
    "count_row_differences",
    "date_range",
    "dedupe_newest",
    "fingerprint",
    "fingerprint_batches",
    "slice_signature",
    "history_deletes",
    "history_problems",
    "erase_key",
    "files_holding",
    "key_digest",
    "merge_history",
    "merge_upsert",
    "merge_with_deletes",
    "overwrite_partitions",
    "overwrite_stream",
    "overwrite_slice",
    "plan_merge",
    "read_rows",
    "replace_table",
]
