"""A drop-in for dagster-deltalake: same construction, same table paths, same inputs.

The cases dagster-deltalake's own suite covers (ops, key prefixes, schema override, column
selection, unsupported types), each materialized again to show that the rerun commits no
new Delta version, plus pandas and polars in and out.
"""

from pathlib import Path

import dagster as dg
import pandas as pd
import polars as pl
import pyarrow as pa
import pytest
from dagster_deltalake import DeltaLakePyarrowIOManager, LocalConfig
from deltalake import DeltaTable

from idem_assets.io_manager import IdempotentDeltaIOManager
from idem_assets.lake import read_rows
from idem_assets.resources import CheckpointResource
from idem_assets_tests.io_manager.dropin import committed, manager, rows, version


@dg.op(out=dg.Out(metadata={"schema": "a_df"}))
def a_df() -> pa.Table:
    return pa.Table.from_pydict({"a": [1, 2, 3], "b": [4, 5, 6]})


@dg.op(out=dg.Out(metadata={"schema": "add_one"}))
def add_one(df: pa.Table) -> pa.Table:
    return df.set_column(0, "a", pa.array([2, 3, 4]))


@dg.graph
def add_one_to_dataframe() -> None:
    add_one(a_df())


def test_ops_write_where_dagster_deltalake_writes_and_reruns_commit_nothing(tmp_path):
    job = add_one_to_dataframe.to_job(resource_defs={"io_manager": manager(tmp_path)})
    for _ in range(2):
        assert job.execute_in_process().success
        assert rows(tmp_path, "a_df/result", "a") == [1, 2, 3]
        assert rows(tmp_path, "add_one/result", "a") == [2, 3, 4]
    assert version(tmp_path, "a_df/result") == version(tmp_path, "add_one/result") == 0


@dg.asset(key_prefix=["my_schema"])
def b_df() -> pa.Table:
    return pa.Table.from_pydict({"a": [1, 2, 3], "b": [4, 5, 6]})


@dg.asset(key_prefix=["my_schema"])
def b_plus_one(b_df: pa.Table) -> pa.Table:
    return b_df.set_column(0, "a", pa.array([2, 3, 4]))


def test_assets_use_their_key_prefix_as_schema(tmp_path):
    resources = {"io_manager": manager(tmp_path)}
    for run in range(2):
        result = dg.materialize([b_df, b_plus_one], resources=resources)
        assert result.success
        assert committed(result) == [run == 0, run == 0]
        assert rows(tmp_path, "my_schema/b_df", "a") == [1, 2, 3]
        assert rows(tmp_path, "my_schema/b_plus_one", "a") == [2, 3, 4]
    assert version(tmp_path, "my_schema/b_df") == 0


def test_the_schema_setting_overrides_the_key_prefix(tmp_path):
    @dg.asset
    def my_df() -> pa.Table:
        return pa.Table.from_pydict({"a": [1, 2, 3]})

    resources = {"io_manager": manager(tmp_path, schema="custom_schema")}
    for _ in range(2):
        assert dg.materialize([my_df], resources=resources).success
    assert rows(tmp_path, "custom_schema/my_df", "a") == [1, 2, 3]
    assert version(tmp_path, "custom_schema/my_df") == 0
    assert not (tmp_path / "public").exists()


def test_an_asset_without_a_prefix_lands_in_public(tmp_path):
    @dg.asset
    def plain() -> pa.Table:
        return pa.table({"a": [1]})

    assert dg.materialize([plain], resources={"io_manager": manager(tmp_path)}).success
    assert rows(tmp_path, "public/plain", "a") == [1]


@dg.asset(key_prefix=["my_schema"], ins={"b_df": dg.AssetIn("b_df", metadata={"columns": ["a"]})})
def b_plus_one_columns(b_df: pa.Table) -> pa.Table:
    assert b_df.column_names == ["a"]
    return b_df.set_column(0, "a", pa.array([2, 3, 4]))


def test_input_metadata_columns_select_columns(tmp_path):
    resources = {"io_manager": manager(tmp_path)}
    for _ in range(2):
        assert dg.materialize([b_df, b_plus_one_columns], resources=resources).success
    stored = read_rows(DeltaTable(str(tmp_path / "my_schema/b_plus_one_columns")))
    assert stored.column_names == ["a"]


@dg.op
def an_int() -> int:
    return 1


def test_an_unsupported_output_type_is_named_with_the_supported_ones(tmp_path):
    job = dg.GraphDefinition(name="not_supported", node_defs=[an_int]).to_job(
        resource_defs={"io_manager": manager(tmp_path)}
    )
    result = job.execute_in_process(raise_on_error=False)
    assert not result.success
    message = result.failure_data_for_node("an_int").error.cause.message
    assert (
        "cannot write a int: supported types are pyarrow.Table, pyarrow.RecordBatchReader, "
        "polars.DataFrame, polars.LazyFrame, pandas.DataFrame" in message
    )


def test_an_unsupported_input_annotation_is_named(tmp_path):
    @dg.asset
    def source() -> pa.Table:
        return pa.table({"a": [1]})

    @dg.asset
    def wants_a_dict(source: dict) -> pa.Table:
        return pa.table({"a": [1]})

    result = dg.materialize(
        [source, wants_a_dict], resources={"io_manager": manager(tmp_path)}, raise_on_error=False
    )
    assert not result.success
    failure = result.failure_data_for_node("wants_a_dict").error
    text = str(failure.cause.message if failure.cause else failure.message)
    assert "cannot load a dict: supported types are" in text


def test_pandas_and_polars_in_and_out(tmp_path):
    @dg.asset
    def from_pandas() -> pd.DataFrame:
        return pd.DataFrame({"a": [1, 2, 3], "b": ["x", "y", "z"]})

    @dg.asset
    def from_polars(from_pandas: pl.DataFrame) -> pl.DataFrame:
        assert isinstance(from_pandas, pl.DataFrame)
        return from_pandas.with_columns(pl.col("a") * 10)

    @dg.asset
    def lazy(from_polars: pl.LazyFrame) -> pl.LazyFrame:
        assert isinstance(from_polars, pl.LazyFrame)
        return from_polars.filter(pl.col("a") > 10)

    @dg.asset
    def back_to_pandas(lazy: pd.DataFrame) -> pa.RecordBatchReader:
        assert isinstance(lazy, pd.DataFrame) and sorted(lazy["a"]) == [20, 30]
        return pa.Table.from_pandas(lazy, preserve_index=False).to_reader()

    @dg.asset
    def as_reader(back_to_pandas: pa.RecordBatchReader) -> pa.Table:
        return back_to_pandas.read_all()

    assets = [from_pandas, from_polars, lazy, back_to_pandas, as_reader]
    resources = {"io_manager": manager(tmp_path)}
    first = dg.materialize(assets, resources=resources)
    again = dg.materialize(assets, resources=resources)
    assert first.success and again.success
    assert committed(first) == [True] * 5 and committed(again) == [False] * 5
    assert rows(tmp_path, "public/as_reader", "a") == [20, 30]


def test_tables_written_by_dagster_deltalake_are_adopted_without_a_rewrite(tmp_path):
    partitions = dg.DailyPartitionsDefinition(start_date="2022-01-01")

    @dg.asset(
        key_prefix=["my_schema"], partitions_def=partitions, metadata={"partition_expr": "day"}
    )
    def daily(context: dg.AssetExecutionContext) -> pa.Table:
        day = partitions.time_window_for_partition_key(context.partition_key).start.date()
        return pa.table({"day": [day] * 3, "n": [1, 2, 3]})

    official = DeltaLakePyarrowIOManager(root_uri=str(tmp_path), storage_options=LocalConfig())
    for key in ("2022-01-01", "2022-01-02"):
        assert dg.materialize(
            [daily], partition_key=key, resources={"io_manager": official}
        ).success
    before = version(tmp_path, "my_schema/daily")
    ours = {"io_manager": manager(tmp_path)}
    for key in ("2022-01-01", "2022-01-02"):
        result = dg.materialize([daily], partition_key=key, resources=ours)
        assert committed(result) == [False]
    assert version(tmp_path, "my_schema/daily") == before
    assert rows(tmp_path, "my_schema/daily", "n") == [1, 1, 2, 2, 3, 3]


def test_append_mode_is_exactly_once_and_an_unknown_mode_is_refused(tmp_path):
    with pytest.raises(Exception, match="unknown mode 'upsert'"):
        IdempotentDeltaIOManager(
            root_uri=str(tmp_path), storage_options=LocalConfig(), mode="upsert"
        )

    @dg.op(out=dg.Out(metadata={"schema": "a_df", "mode": "append"}))
    def appends() -> pa.Table:
        return pa.table({"a": [1]})

    job = dg.GraphDefinition(name="appending", node_defs=[appends]).to_job(
        resource_defs={"io_manager": manager(tmp_path)}
    )
    # dagster-deltalake appends the row again on every run; here the second run is a no-op.
    assert job.execute_in_process().success and job.execute_in_process().success
    assert rows(tmp_path, "a_df/result", "a") == [1]
    assert version(tmp_path, "a_df/result") == 0


def test_output_custom_metadata_and_writer_properties(tmp_path):
    @dg.op(out=dg.Out(metadata={"schema": "a_df", "custom_metadata": {"userName": "Jo"}}))
    def tagged() -> pa.Table:
        return pa.table({"a": [1, 2, 3]})

    job = dg.GraphDefinition(name="tagging", node_defs=[tagged]).to_job(
        resource_defs={
            "io_manager": manager(
                tmp_path,
                custom_metadata={"team": "finance"},
                writer_properties={"compression": "ZSTD"},
            )
        }
    )
    assert job.execute_in_process().success
    stored = DeltaTable(str(tmp_path / "a_df/result"))
    last = stored.history(1)[0]
    assert last["userName"] == "Jo" and last["team"] == "finance"
    [path] = stored.get_add_actions().column("path").to_pylist()
    assert path.endswith(".zstd.parquet")


def test_dagster_deltalake_settings_are_accepted(tmp_path):
    configured = manager(tmp_path, writer_engine="pyarrow", schema="s", client_options=None)
    assert dg.materialize([b_df], resources={"io_manager": configured}).success
    assert rows(tmp_path, "s/b_df", "a") == [1, 2, 3]


def test_write_records_default_to_sqlite_beside_a_local_root(tmp_path, monkeypatch):
    monkeypatch.delenv("IDEM_STATE_URL", raising=False)
    assert dg.materialize([b_df], resources={"io_manager": manager(tmp_path)}).success
    assert (tmp_path / "_idem_state" / "checkpoint.db").is_file()
    remote = CheckpointResource.beside("s3://bucket/lake").resolved_url
    assert remote.startswith(f"sqlite:///{Path.home() / '.cache' / 'idem_assets'}/")
    monkeypatch.setenv("IDEM_STATE_URL", f"sqlite:///{tmp_path / 'chosen.db'}")
    assert CheckpointResource.beside(str(tmp_path)).resolved_url.endswith("chosen.db")


def test_commit_metadata_table_config_and_a_changed_schema(tmp_path):
    @dg.asset
    def wide() -> pa.Table:
        return pa.table({"a": [1], "b": [2]})

    config = {"custom_metadata": {"team": "finance"}, "table_config": {"delta.appendOnly": "false"}}
    assert dg.materialize([wide], resources={"io_manager": manager(tmp_path, **config)}).success
    stored = DeltaTable(str(tmp_path / "public/wide"))
    assert stored.history(1)[0]["team"] == "finance"
    assert stored.metadata().configuration["delta.appendOnly"] == "false"

    @dg.asset(name="wide")
    def wider() -> pa.Table:
        return pa.table({"a": [1], "b": [2], "c": [3]})

    refused = dg.materialize(
        [wider], resources={"io_manager": manager(tmp_path)}, raise_on_error=False
    )
    assert not refused.success
    assert (
        "the output has column(s) c that the table does not have"
        in refused.failure_data_for_node("wide").error.cause.message
    )
    assert dg.materialize(
        [wider], resources={"io_manager": manager(tmp_path, overwrite_schema=True)}
    ).success
    assert read_rows(DeltaTable(str(tmp_path / "public/wide"))).column_names == ["a", "b", "c"]
