"""A child process for the crash tests of the dagster-delta modes: one materialization.

``python -m idem_assets_tests.io_manager.modes_child ROOT MODE ROWS_JSON`` materializes the
asset ``items`` (partition 2024-01-01, ``partition_expr`` day) with ``MODE`` (merge: an
upsert on ``id``; append) through ``IdempotentDeltaIOManager`` at ``ROOT``. Faults come from
the environment (``IDEM_CRASH_AT``).
"""

from __future__ import annotations

import json
import sys

import dagster as dg
import pyarrow as pa

from idem_assets import IdempotentDeltaIOManager, MergeConfig, MergeType

DAYS = dg.DailyPartitionsDefinition(start_date="2024-01-01")


def manager(root: str, mode: str, lease: float = 60.0) -> IdempotentDeltaIOManager:
    """The manager as a dagster-delta user would configure it."""
    return IdempotentDeltaIOManager(
        root_uri=root,
        mode=mode,
        merge_config=MergeConfig(
            merge_type=MergeType.upsert, predicate="s.id = t.id", source_alias="s", target_alias="t"
        )
        if mode == "merge"
        else None,
        write_lease_seconds=lease,
    )


def items_asset(rows: list[dict]) -> dg.AssetsDefinition:
    """A daily asset whose output is ``rows`` (ids, values and the day column)."""

    @dg.asset(name="items", partitions_def=DAYS, metadata={"partition_expr": "day"})
    def items(context) -> pa.Table:  # noqa: ANN001 (dagster reads the annotation)
        day = context.partition_time_window.start.date()
        return pa.table(
            {
                "id": [r["id"] for r in rows],
                "value": [r["value"] for r in rows],
                "day": pa.array([day] * len(rows), pa.date32()),
            }
        )

    return items


def main(argv: list[str]) -> int:
    root, mode, rows = argv[0], argv[1], json.loads(argv[2])
    result = dg.materialize(
        [items_asset(rows)],
        resources={"io_manager": manager(root, mode)},
        partition_key="2024-01-01",
    )
    return 0 if result.success else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
