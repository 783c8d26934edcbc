"""An erased key stays out of what Spark writes: Spark DataFrames through the IO manager
(every strategy Spark writes, the tables kept beside them too), a declared source read on
Spark, and a Structured Streaming sink."""

from __future__ import annotations

import functools
import json

import pytest

from idem_assets.cli.erase import erase
from idem_assets.io_manager.erasure import erasable_tables
from idem_assets.lake import read_rows
from idem_assets_tests.harness import check_results, day_keys, new_project
from idem_assets_tests.io_manager.test_erasure_writes import CASES, assert_erased_key_stays_out
from idem_assets_tests.spark.rows import to_spark

pytestmark = pytest.mark.spark

# The strategies Spark writes (``on_spark``); the others refuse a Spark DataFrame.
ON_SPARK = ("overwrite", "overwrite_deduplicated", "merge_with_tombstones", "history_with_deletes")


@pytest.mark.parametrize("name", ON_SPARK)
def test_an_erased_key_never_comes_back_on_a_spark_write(tmp_path, spark, name):
    assert_erased_key_stays_out(tmp_path, CASES[name], lambda rows: to_spark(spark, rows))


SPARK = {"ops": {name: {"config": {"engine": "spark"}} for name in ("orders", "customers")}}
DECLARED = ("orders", "customers")


def test_a_declared_source_read_on_spark_leaves_an_erased_key_out(tmp_path, spark):
    """The shipped orders and customers (declared in YAML, erasable customer_id) loaded on
    Spark, a customer erased, the days loaded again on Spark: the tables equal the local
    engine's with the same erase, and every check (erased_keys_absent, rerun_equality
    recomputed locally) passes."""
    keys = day_keys(3)
    tables = {}
    for engine, config in (("local", None), ("spark", SPARK)):
        project = new_project(tmp_path / engine, days=3)
        first = project.run_days(keys[0], keys[-1], assets=list(DECLARED), run_config=config)
        assert first.success
        held = {
            name: set(read_rows(project.lake.table(name).open()).column("customer_id").to_pylist())
            for name in DECLARED
        }
        customer = min(held["orders"] & held["customers"])
        declared = erasable_tables(project.definitions())
        assert set(DECLARED) <= set(declared)
        with project.checkpoint.open() as store:
            done = erase(project.lake, store, declared, "customer_id", str(customer)).done
        assert all(done[name].rows_deleted for name in DECLARED)
        again = [
            project.run_days(keys[0], keys[-1], assets=list(DECLARED), run_config=config),
            project.run_days(keys[1], assets=list(DECLARED), run_config=config),
        ]
        for result in again:
            assert result.success
            checks = check_results(result)
            assert checks and all(checks.values()), checks
            assert {(name, "erased_keys_absent") for name in DECLARED} <= set(checks)
        for name in DECLARED:
            stored = read_rows(project.lake.table(name).open())
            assert customer not in stored.column("customer_id").to_pylist(), (engine, name)
        tables[engine] = {name: project.table_fingerprint(name) for name in DECLARED}
    assert tables["spark"] == tables["local"]


def _events_file(spark, name: str, events: list[tuple[str, int]]):
    """A micro-batch of one JSON Lines file of (event_id, customer_id) events (as Spark's
    binaryFile source gives); a blank event id is refused (quarantined)."""
    lines = [
        json.dumps(
            {
                "event_id": event_id,
                "customer_id": customer,
                "event_type": "page_view",
                "event_time": "2024-03-01T10:00:00Z",
                "ingested_at": "2024-03-01T11:00:00Z",
                "payload": "{}",
            }
        )
        for event_id, customer in events
    ]
    content = ("\n".join(lines) + "\n").encode()
    schema = "path string, content binary"
    return spark.createDataFrame([(f"/stream/{name}.jsonl", content)], schema)


def _numbered(name: str, customers: list[int]) -> list[tuple[str, int]]:
    return [(f"{name}-{n}", customer) for n, customer in enumerate(customers)]


def _sink(tmp_path, **extra):
    from idem_assets.lake import LakeTable
    from idem_assets.sample import EVENTS, EVENTS_SOURCE
    from idem_assets.spark.streaming import StreamSink, with_dates_of_spark

    return StreamSink(
        LakeTable(str(tmp_path / "events_stream")),
        "events-stream",
        contract=EVENTS,
        schema=EVENTS_SOURCE.table_schema(),
        prepare=functools.partial(with_dates_of_spark, pairs=[("event_date", "event_time")]),
        partition_column="event_date",
        erasable_keys=("customer_id",),
        erasures_url=f"sqlite:///{tmp_path / 'state.db'}",
        **extra,
    )


def _erase_42(tmp_path) -> None:
    from idem_assets.checkpoint import open_store
    from idem_assets.checkpoint.erasure import ErasureLedger

    with open_store(f"sqlite:///{tmp_path / 'state.db'}") as store:
        ErasureLedger(store).record("customer_id", "42")


def test_a_structured_stream_leaves_keys_erased_while_it_runs_out_of_later_batches(tmp_path, spark):
    from idem_assets.sample import EVENTS, EVENTS_SOURCE
    from idem_assets.spark.streaming import StreamSink

    sink = _sink(tmp_path)
    sink.commit(_events_file(spark, "a", _numbered("a", [42, 7])), 0)
    _erase_42(tmp_path)
    sink.commit(_events_file(spark, "a", _numbered("a", [42, 7])), 0)  # a replay: skipped
    sink.commit(_events_file(spark, "b", _numbered("b", [42, 8, 42])), 1)
    stored = read_rows(sink.target.open())
    assert sorted(stored.column("event_id").to_pylist()) == ["a-0", "a-1", "b-1"]
    # Erasing the rows committed before the erase is `idem-assets erase`'s part.
    assert stored.column("customer_id").to_pylist().count(42) == 1
    with pytest.raises(ValueError, match="erasures_url"):
        StreamSink(
            sink.target, "x", EVENTS, EVENTS_SOURCE.table_schema(), erasable_keys=("customer_id",)
        )


def test_a_structured_stream_quarantines_no_row_of_an_erased_key(tmp_path, spark):
    from idem_assets.lake import LakeTable

    sink = _sink(tmp_path, quarantine=LakeTable(str(tmp_path / "quarantine")))
    _erase_42(tmp_path)
    sink.commit(_events_file(spark, "a", [("a-0", 42), (" ", 42), (" ", 7), ("a-3", 8)]), 0)
    stored = read_rows(sink.target.open())
    assert sorted(stored.column("event_id").to_pylist()) == ["a-3"]
    assert sink.quarantine is not None
    records = read_rows(sink.quarantine.open()).column("raw_record").to_pylist()
    assert [str(json.loads(r)["customer_id"]) for r in records] == ["7"]
