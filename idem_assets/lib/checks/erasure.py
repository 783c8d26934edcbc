"""Erased keys in the checks: the clean rerun leaves them out as a write does, conservation
counts them, and ``erased_keys_absent`` turns red when a table holds one.

The ledger is read once per checks step (see ``ledger``).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import dagster as dg

from idem_assets.io_manager import Window, target_table
from idem_assets.lake import read_rows
from idem_assets.lake.erasure import Erased, key_digest
from idem_assets.lib.asset_def import LakeAssetDef
from idem_assets.lib.checks.per_partition import CheckName, LakeCheck
from idem_assets.lib.checks.proofs import Reads
from idem_assets.resources import LakeResource

ERASED_KEYS_ABSENT = "erased_keys_absent"


def _erased_keys_absent(
    definition: LakeAssetDef,
    lake: LakeResource,
    windows: Sequence[Window],
    _: frozenset[str],
    *,
    erased: Erased,
) -> Iterator[tuple[int, dg.AssetCheckResult]]:
    """Whether the table holds any erased key: the whole table is read once (by the erasable
    columns only) and every partition reports it, since an erased key is erased everywhere."""
    table = target_table(lake, definition.spec, definition.key).open()
    found: dict[str, int] = {}
    if erased and table is not None:
        names = set(table.schema().to_arrow().names)
        columns = [c for c in definition.spec.erasable_keys if c in names]
        if columns:
            rows = read_rows(table, columns=columns)
            for column, values in erased.of(columns).values.items():
                held = Erased({column: values}).held(rows).to_pylist()
                for value in rows.column(column).filter(held).cast("string").to_pylist():
                    digest = key_digest(column, value)
                    found[digest] = found.get(digest, 0) + 1
    for index, window in enumerate(windows):
        yield (
            index,
            dg.AssetCheckResult(
                check_name=ERASED_KEYS_ABSENT,
                passed=not found,
                description=(
                    f"{sum(found.values())} row(s) hold {len(found)} erased key(s): run "
                    "`idem-assets erase` again for them"
                    if found
                    else "no erased key is held by the table"
                ),
                metadata={
                    "partition_range": window.label(),
                    "erased_keys_known": sum(len(v) for v in erased.values.values()),
                    "rows_holding_erased_keys": sum(found.values()),
                    # Digests only: an erased value is never shown.
                    "erased_keys_held": dg.MetadataValue.json(sorted(found)[:10]),
                },
            ),
        )


def erased_keys_check(definition: LakeAssetDef) -> LakeCheck:
    """No row of the table holds a key the ledger says was erased."""
    return LakeCheck(
        names=(
            CheckName(
                ERASED_KEYS_ABSENT,
                f"No row holds an erased {' or '.join(definition.spec.erasable_keys)} "
                "(`idem-assets erase`); keys are reported by digest, never by value.",
            ),
        ),
        evaluate_windows=_erased_keys_absent,
        reads=frozenset({Reads.TABLE, Reads.ERASURES}),
    )
