"""dagster-delta's modes on IdempotentDeltaIOManager: the same tables, no commit on a rerun.

Each merge type runs the same outputs through dagster-delta's own IO manager and ours: the
tables must hold the same rows, and where dagster-delta commits a new version on an
unchanged rerun (it always does), ours commits nothing.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import dagster as dg
import dagster_delta as dd
import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

from idem_assets import (
    IdempotentDeltaIOManager,
    MergeConfig,
    MergeOperationsConfig,
    MergeType,
    WhenMatchedUpdate,
    WhenNotMatchedBySourceDelete,
    WhenNotMatchedInsertAll,
    WriteMode,
)
from idem_assets.io_manager.writes.append import AppendConflictError
from idem_assets.lake.clauses import MergeConfigError, key_equalities
from idem_assets_tests.io_manager import modes_child

DAYS = modes_child.DAYS
FIRST = [{"id": 1, "b": 10}, {"id": 2, "b": 20}, {"id": 3, "b": 30}, {"id": 4, "b": 40}]
# 2 unchanged, 3 changed, 4 withdrawn, 5 new.
SECOND = [{"id": 2, "b": 20}, {"id": 3, "b": 31}, {"id": 5, "b": 50}]


def _frame(rows: list[dict]) -> pa.Table:
    return pa.Table.from_pylist(rows, schema=pa.schema([("id", pa.int64()), ("b", pa.int64())]))


def _asset(rows: list[dict], **metadata: object) -> dg.AssetsDefinition:
    @dg.asset(name="items", key_prefix=["shop"], metadata=metadata or None)
    def items() -> pa.Table:
        return _frame(rows)

    return items


def _run(
    asset: dg.AssetsDefinition, manager: object, **kwargs: object
) -> dg.ExecuteInProcessResult:
    return dg.materialize([asset], resources={"io_manager": manager}, **kwargs)


def _metadata(result: dg.ExecuteInProcessResult) -> dict:
    [event] = result.get_asset_materialization_events()
    materialization = event.event_specific_data.materialization  # type: ignore[union-attr]
    return {k: getattr(v, "value", v) for k, v in materialization.metadata.items()}


def _stored(root: Path, path: str = "shop/items") -> list[dict]:
    table = DeltaTable(str(root / path))
    return sorted(table.to_pyarrow_table().to_pylist(), key=lambda r: tuple(map(str, r.values())))


def _version(root: Path, path: str = "shop/items") -> int:
    return DeltaTable(str(root / path)).version()


def _ours(root: Path, **config: object) -> IdempotentDeltaIOManager:
    return IdempotentDeltaIOManager(root_uri=str(root), **config)


def _theirs(root: Path, **config: object) -> dd.DeltaLakePyarrowIOManager:
    return dd.DeltaLakePyarrowIOManager(
        root_uri=str(root), storage_options=dd.LocalConfig(), **config
    )


def _custom_ours() -> MergeOperationsConfig:
    return MergeOperationsConfig(
        when_matched_update=[WhenMatchedUpdate(predicate="s.b > t.b", updates={"b": "s.b"})],
        when_not_matched_insert_all=[WhenNotMatchedInsertAll()],
        when_not_matched_by_source_delete=[WhenNotMatchedBySourceDelete(predicate="t.b > 35")],
    )


def _custom_theirs() -> dd.MergeOperationsConfig:
    return dd.MergeOperationsConfig(
        when_matched_update=[dd.WhenMatchedUpdate(predicate="s.b > t.b", updates={"b": "s.b"})],
        when_not_matched_insert_all=[dd.WhenNotMatchedInsertAll()],
        when_not_matched_by_source_delete=[dd.WhenNotMatchedBySourceDelete(predicate="t.b > 35")],
    )


MERGE_TYPES = [
    "deduplicate_insert",
    "update_only",
    "upsert",
    "replace_and_delete_unmatched",
    "custom",
]


def _configs(merge_type: str) -> tuple[MergeConfig, dd.MergeConfig]:
    common = {"predicate": "s.id = t.id", "source_alias": "s", "target_alias": "t"}
    if merge_type == "custom":
        return (
            MergeConfig(
                merge_type=MergeType.custom, merge_operations_config=_custom_ours(), **common
            ),
            dd.MergeConfig(
                merge_type=dd.MergeType.custom, merge_operations_config=_custom_theirs(), **common
            ),
        )
    return (
        MergeConfig(merge_type=MergeType(merge_type), **common),
        dd.MergeConfig(merge_type=dd.MergeType(merge_type), **common),
    )


@pytest.mark.parametrize("merge_type", MERGE_TYPES)
def test_each_merge_type_stores_what_dagster_delta_stores_and_reruns_commit_nothing(
    tmp_path: Path, merge_type: str
) -> None:
    ours_config, theirs_config = _configs(merge_type)
    ours = _ours(tmp_path / "ours", mode=WriteMode.merge, merge_config=ours_config)
    theirs = _theirs(tmp_path / "theirs", mode=dd.WriteMode.merge, merge_config=theirs_config)
    # dagster-delta's first merge creates an empty table; start both from the same rows.
    for side in ("ours", "theirs"):
        write_deltalake(str(tmp_path / side / "shop/items"), _frame(FIRST))
    for rows in (FIRST, SECOND):
        assert _run(_asset(rows), theirs).success
        assert _run(_asset(rows), ours).success
        assert _stored(tmp_path / "ours") == _stored(tmp_path / "theirs"), merge_type
        # The unchanged rerun: dagster-delta commits a version whenever an unconditional
        # update matches a row (a merge whose clauses change nothing commits nothing there),
        # ours never.
        theirs_before, ours_before = _version(tmp_path / "theirs"), _version(tmp_path / "ours")
        assert _run(_asset(rows), theirs).success
        rerun = _run(_asset(rows), ours)
        if merge_type in ("update_only", "upsert", "replace_and_delete_unmatched"):
            assert _version(tmp_path / "theirs") == theirs_before + 1
        assert _version(tmp_path / "ours") == ours_before
        assert _metadata(rerun)["committed"] is False
        assert _metadata(rerun)["no_op_proof"] == "checkpoint"
        assert _stored(tmp_path / "ours") == _stored(tmp_path / "theirs"), merge_type


def test_ported_dagster_delta_merge_of_ops_twice(tmp_path: Path) -> None:
    """dagster-delta's own test: two ops merged twice, a_df [1, 2, 3] and add_one [2, 3, 4]."""

    @dg.op(out=dg.Out(metadata={"schema": "a_df"}))
    def a_df() -> pa.Table:
        return pa.Table.from_pydict({"a": [1, 2, 3], "b": [4, 5, 6]})

    @dg.op(out=dg.Out(metadata={"schema": "add_one"}))
    def add_one(df: pa.Table) -> pa.Table:
        return df.set_column(0, "a", pa.array([2, 3, 4]))

    @dg.graph
    def add_one_to_dataframe() -> None:
        add_one(a_df())

    for merge_type in (MergeType.deduplicate_insert, MergeType.upsert):
        root = tmp_path / merge_type.value
        manager = _ours(
            root,
            mode=WriteMode.merge,
            merge_config=MergeConfig(
                merge_type=merge_type, predicate="s.a = t.a", source_alias="s", target_alias="t"
            ),
        )
        job = add_one_to_dataframe.to_job(resource_defs={"io_manager": manager})
        versions = []
        for _ in range(2):
            assert job.execute_in_process().success
            assert sorted(
                DeltaTable(str(root / "a_df/result")).to_pyarrow_table()["a"].to_pylist()
            ) == [1, 2, 3]
            assert sorted(
                DeltaTable(str(root / "add_one/result")).to_pyarrow_table()["a"].to_pylist()
            ) == [2, 3, 4]
            versions.append((_version(root, "a_df/result"), _version(root, "add_one/result")))
        assert versions[0] == versions[1] == (0, 0)


def test_a_changed_rerun_rewrites_only_the_files_of_changed_rows(tmp_path: Path) -> None:
    rows = [{"id": i, "b": i * 10} for i in range(100)]
    for side in ("ours", "theirs"):
        for start in range(0, 100, 25):  # four files of 25 ids each
            write_deltalake(
                str(tmp_path / side / "shop/items"), _frame(rows[start : start + 25]), mode="append"
            )
    changed = [dict(r, b=-1) if r["id"] == 60 else r for r in rows]
    ours_config, theirs_config = _configs("upsert")
    ours = _run(_asset(changed), _ours(tmp_path / "ours", mode="merge", merge_config=ours_config))
    assert _run(
        _asset(changed), _theirs(tmp_path / "theirs", mode="merge", merge_config=theirs_config)
    ).success
    assert _stored(tmp_path / "ours") == _stored(tmp_path / "theirs")
    stats = _metadata(ours)["merge_stats"]
    assert stats["num_target_files_removed"] == 1 and stats["num_target_rows_updated"] == 1
    theirs_stats = DeltaTable(str(tmp_path / "theirs/shop/items")).history(1)[0]["operationMetrics"]
    assert theirs_stats["num_target_files_removed"] == 4  # dagster-delta rewrites every file


def _daily(rows_by_day: dict[str, list[dict]], **metadata: object) -> dg.AssetsDefinition:
    @dg.asset(
        name="items",
        key_prefix=["shop"],
        partitions_def=DAYS,
        metadata={"partition_expr": "day", **metadata},
    )
    def items(context) -> pa.Table:  # noqa: ANN001 (dagster reads the annotation)
        day = context.partition_key
        table = _frame(rows_by_day[day])
        return table.append_column("day", pa.array([dt.date.fromisoformat(day)] * table.num_rows))

    return items


def test_partitioned_replace_and_delete_unmatched_touches_only_its_partition(
    tmp_path: Path,
) -> None:
    by_day = {"2024-01-01": FIRST, "2024-01-02": FIRST}
    config = MergeConfig(
        merge_type=MergeType.replace_delete_unmatched,
        predicate="s.id = t.id AND s.day = t.day",
        source_alias="s",
        target_alias="t",
    )
    manager = _ours(tmp_path, mode="merge", merge_config=config)
    # Lay the table out by day first (an overwrite, as a backfill would).
    for day in by_day:
        assert _run(_daily(by_day, mode="overwrite"), manager, partition_key=day).success
    assert len(_stored(tmp_path)) == 8
    corrected = {**by_day, "2024-01-02": SECOND}
    result = _run(_daily(corrected), manager, partition_key="2024-01-02")
    stored = _stored(tmp_path)
    first_day, second_day = dt.date(2024, 1, 1), dt.date(2024, 1, 2)
    assert {(r["id"], r["b"]) for r in stored if r["day"] == first_day} == {
        (r["id"], r["b"]) for r in FIRST
    }
    assert {(r["id"], r["b"]) for r in stored if r["day"] == second_day} == {(2, 20), (3, 31)}
    assert _metadata(result)["rows_deleted"] == 2  # ids 1 and 4 of that day only
    again = _run(_daily(corrected), manager, partition_key="2024-01-02")
    assert _metadata(again)["committed"] is False


def test_schema_mode_merge_adds_new_columns_in_merge_mode(tmp_path: Path) -> None:
    wider = [dict(r, note=f"n{r['id']}") for r in SECOND]
    ours_config, theirs_config = _configs("upsert")
    for side in ("ours", "theirs"):
        write_deltalake(str(tmp_path / side / "shop/items"), _frame(FIRST))

    @dg.asset(name="items", key_prefix=["shop"])
    def items() -> pa.Table:
        return pa.Table.from_pylist(wider)

    ours = _ours(tmp_path / "ours", mode="merge", merge_config=ours_config, schema_mode="merge")
    theirs = _theirs(
        tmp_path / "theirs", mode="merge", merge_config=theirs_config, schema_mode="merge"
    )
    assert _run(items, ours).success and _run(items, theirs).success
    stored = {r["id"]: r for r in _stored(tmp_path / "ours")}
    assert stored[3]["note"] == "n3" and stored[1]["note"] is None and stored[3]["b"] == 31
    assert stored[2]["note"] == "n2"  # its other values unchanged: the new column alone
    # dagster-delta's table never gets the column.
    assert "note" not in DeltaTable(str(tmp_path / "theirs/shop/items")).schema().to_arrow().names
    version = _version(tmp_path / "ours")
    assert _metadata(_run(items, ours))["committed"] is False
    assert _version(tmp_path / "ours") == version


def test_append_is_exactly_once_per_partition(tmp_path: Path) -> None:
    by_day = {"2024-01-01": FIRST, "2024-01-02": SECOND}
    ours = _ours(tmp_path / "ours", mode="append")
    theirs = _theirs(tmp_path / "theirs", mode=dd.WriteMode.append)
    for _ in range(2):
        for day in by_day:
            assert _run(_daily(by_day), ours, partition_key=day).success
            assert _run(_daily(by_day), theirs, partition_key=day).success
    assert len(_stored(tmp_path / "ours")) == len(FIRST) + len(SECOND)
    assert len(_stored(tmp_path / "theirs")) == 2 * (len(FIRST) + len(SECOND))  # duplicated
    assert _version(tmp_path / "ours") == 1
    # A changed output for an appended partition is refused, with the way out.
    changed = {**by_day, "2024-01-02": FIRST}
    with pytest.raises(AppendConflictError, match="appended before with other rows.*overwrite"):
        _run(_daily(changed), ours, partition_key="2024-01-02")
    assert len(_stored(tmp_path / "ours")) == len(FIRST) + len(SECOND)


def test_unpartitioned_append_appends_each_content_once(tmp_path: Path) -> None:
    ours = _ours(tmp_path, mode="append")
    for rows in (FIRST, FIRST, SECOND, SECOND, FIRST):
        assert _run(_asset(rows), ours).success
    assert len(_stored(tmp_path)) == len(FIRST) + len(SECOND)
    assert _version(tmp_path) == 1


def test_error_and_ignore_modes(tmp_path: Path) -> None:
    ignore = _ours(tmp_path / "ignore", mode="ignore")
    assert _run(_asset(FIRST), ignore).success and _run(_asset(SECOND), ignore).success
    assert len(_stored(tmp_path / "ignore")) == len(FIRST) and _version(tmp_path / "ignore") == 0
    error = _ours(tmp_path / "error", mode="error")
    assert _run(_asset(FIRST), error).success and _run(_asset(FIRST), error).success
    assert _version(tmp_path / "error") == 0
    with pytest.raises(FileExistsError, match="mode='error'.*holds other rows"):
        _run(_asset(SECOND), error)


def test_metadata_overrides_mode_predicate_writer_and_commit_properties(tmp_path: Path) -> None:
    manager = _ours(
        tmp_path,
        mode="overwrite",
        merge_config=MergeConfig(
            merge_type="upsert", predicate="s.nope = t.nope", source_alias="s", target_alias="t"
        ),
    )
    asset = _asset(
        FIRST,
        mode="merge",
        merge_predicate="s.id = t.id",
        writer_properties={"compression": "ZSTD"},
        commit_properties={"custom_metadata": {"userName": "John Doe"}},
        table_configuration={"delta.appendOnly": "false"},
    )
    assert _run(asset, manager).success
    table = DeltaTable(str(tmp_path / "shop/items"))
    assert table.history(1)[0]["userName"] == "John Doe"
    assert ".zstd." in table.get_add_actions().column("path")[0].as_py()
    assert _run(_asset(SECOND, mode="merge", merge_predicate="s.id = t.id"), manager).success
    assert {r["id"]: r["b"] for r in _stored(tmp_path)}[3] == 31


def test_bad_merge_configuration_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(Exception, match="needs merge_config"):
        _ours(tmp_path, mode="merge")
    with pytest.raises(Exception, match="Input should be 'deduplicate_insert'"):
        MergeConfig(merge_type="sideways")
    no_predicate = _ours(tmp_path, mode="merge", merge_config=MergeConfig(merge_type="upsert"))
    with pytest.raises(MergeConfigError, match="merge predicate was not provided"):
        _run(_asset(FIRST), no_predicate)
    custom = _ours(
        tmp_path,
        mode="merge",
        merge_config=MergeConfig(
            merge_type="custom", predicate="s.id = t.id", source_alias="s", target_alias="t"
        ),
    )
    with pytest.raises(MergeConfigError, match="'custom' needs merge_operations_config"):
        _run(_asset(FIRST), custom)
    write_deltalake(str(tmp_path / "shop/items"), _frame(FIRST))
    missing = _ours(
        tmp_path,
        mode="merge",
        merge_config=MergeConfig(
            merge_type="upsert", predicate="s.id = t.ident", source_alias="s", target_alias="t"
        ),
    )
    with pytest.raises(MergeConfigError, match=r"names t.ident, which the table does not have"):
        _run(_asset(FIRST), missing)
    nulls = _ours(tmp_path, mode="merge", merge_config=_configs("upsert")[0])
    with pytest.raises(MergeConfigError, match="1 output row.*null in merge key"):
        _run(_asset([*FIRST, {"id": None, "b": 1}]), nulls)
    assert _version(tmp_path) == 0  # nothing was written by any of them


def test_predicates_of_key_equalities_are_recognised() -> None:
    assert key_equalities("s.id = t.id AND t.`day` = s.day", "s", "t") == [
        ("id", "id"),
        ("day", "day"),
    ]
    assert key_equalities('source."a" = target.b', "source", "target") == [("a", "b")]
    assert key_equalities("s.id = t.id AND s.b > t.b", "s", "t") is None
    assert key_equalities("s.id = t.id OR s.x = t.x", "s", "t") is None
    assert key_equalities("s.id = t.id", None, "t") is None


@pytest.mark.parametrize("mode", ["merge", "append"])
def test_sigkill_after_commit_converges_without_a_second_commit(tmp_path: Path, mode: str) -> None:
    rows = [{"id": i, "value": i * 2} for i in range(10)]
    root = str(tmp_path / "lake")
    env = {**os.environ, "IDEM_CRASH_AT": "lake.after_commit/public/items"}
    child = subprocess.run(
        [
            sys.executable,
            "-m",
            "idem_assets_tests.io_manager.modes_child",
            root,
            mode,
            json.dumps(rows),
        ],
        env=env,
        capture_output=True,
        timeout=300,
    )
    assert child.returncode == -signal.SIGKILL, child.stderr.decode()[-2000:]
    table = DeltaTable(f"{root}/public/items")
    assert table.version() == 0  # the commit landed, the record did not settle
    rerun = dg.materialize(
        [modes_child.items_asset(rows)],
        resources={"io_manager": modes_child.manager(root, mode, lease=1.0)},
        partition_key="2024-01-01",
    )
    assert rerun.success
    assert DeltaTable(f"{root}/public/items").version() == 0  # no second commit
    stored = sorted(
        DeltaTable(f"{root}/public/items").to_pyarrow_table().select(["id", "value"]).to_pylist(),
        key=lambda r: r["id"],
    )
    assert stored == rows


def test_a_first_partitioned_merge_creates_the_table_laid_out_by_its_partitions(
    tmp_path: Path,
) -> None:
    config = MergeConfig(
        merge_type=MergeType.upsert, predicate="s.id = t.id", source_alias="s", target_alias="t"
    )
    manager = _ours(tmp_path, mode="merge", merge_config=config)
    by_day = {"2024-01-01": FIRST, "2024-01-02": SECOND}
    first = _run(
        _daily(by_day, table_configuration={"delta.appendOnly": "false"}),
        manager,
        partition_key="2024-01-01",
    )
    table = DeltaTable(str(tmp_path / "shop/items"))
    assert table.version() == 0 and table.metadata().partition_columns == ["day"]
    assert table.metadata().configuration == {"delta.appendOnly": "false"}
    assert _metadata(first)["rows_inserted"] == len(FIRST)
    # The second day merges within its own partition: day 1's rows are not touched.
    second = _run(_daily(by_day), manager, partition_key="2024-01-02")
    assert _metadata(second)["merge_stats"]["num_target_files_removed"] == 0
    assert len(_stored(tmp_path)) == len(FIRST) + len(SECOND)
