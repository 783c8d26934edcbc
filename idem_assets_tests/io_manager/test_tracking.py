"""Lake writes are checkpoint records: settled after the commit, reconciled after a crash."""

from deltalake import write_deltalake

from idem_assets.checkpoint import Status, open_store
from idem_assets.io_manager.tracking import LEASE_TOKEN_KEY, LakeWriteLog
from idem_assets.lake import LakeTable, read_rows
from idem_assets.lake.tables import commit_properties
from idem_assets.landing.reader import read_days
from idem_assets.sample.sources import ORDERS
from idem_assets_tests.harness import (
    START,
    check_results,
    materialization_metadata,
    on_a_stepped_clock,
)

KEY = START.isoformat()
WINDOW = f"{START}..{START.replace(day=2)}"


def _records(project, asset="orders"):
    with open_store(project.checkpoint.resolved_url) as store:
        return store.list(f"lake/{asset}")


def test_each_write_is_a_settled_record_and_reruns_are_proven_from_metadata(project):
    first, second = project.run_days(KEY), project.run_days(KEY)
    assert first.success and second.success
    records = [r for r in _records(project) if r.record_id.startswith(WINDOW)]
    assert len(records) == 2 and {r.status for r in records} == {Status.SUCCEEDED}
    by_run = {r.record_id.split("/")[1]: r for r in records}
    assert by_run[first.run_id].result["committed"] is True
    assert by_run[second.run_id].result["committed"] is False
    assert by_run[first.run_id].result["fingerprint"] == by_run[second.run_id].result["fingerprint"]
    md = materialization_metadata(second)
    # Landing assets skipped recomputing: same landing bytes and code, same slice files.
    assert md["orders"]["no_op_proof"] == "inputs"
    assert md["customers"]["no_op_proof"] == "inputs"
    assert md["orders"]["fingerprint"] == materialization_metadata(first)["orders"]["fingerprint"]
    # daily_sales recomputed, and its no-op was proven without reading the slice.
    assert md["daily_sales"]["no_op_proof"] == "checkpoint"


def test_changed_slice_is_not_trusted_from_the_checkpoint(project):
    assert project.run_days(KEY).success
    # Someone rewrites the partition behind the pipeline's back.
    rows = read_days(project.landing, ORDERS, START, START.replace(day=2)).rows.slice(0, 5)
    table = project.lake.table("orders").open()
    write_deltalake(
        table, rows, mode="overwrite", predicate=f"order_date = DATE '{KEY}'"
    )  # test-only literal
    again = project.run_days(KEY)
    md = materialization_metadata(again)["orders"]
    assert md["committed"] is True  # repaired: the checkpoint proof no longer held
    assert all(check_results(again).values())


def test_crash_after_commit_is_reconciled_not_reapplied(project):
    """A run that committed but died before settling its record leaves it in_progress."""
    project, clock = on_a_stepped_clock(project)
    assert project.run_days(KEY).success
    target = LakeTable(project.lake.table("orders").uri)
    version_before = target.open().version()
    with project.checkpoint.open() as store:
        log = LakeWriteLog(store, "orders", WINDOW, "crashed-run", lease_seconds=1)
        claim = log.begin({"fingerprint": "unknown"})
        # The crashed run's commit: same content, with its lease token in the metadata.
        rows = read_rows(target.open())
        write_deltalake(
            target.open(),
            rows,
            mode="overwrite",
            predicate=f"order_date = DATE '{KEY}'",  # test-only literal
            commit_properties=commit_properties(log.commit_metadata(claim)),
        )
    crashed_version = version_before + 1
    # On the resource's clock the crashed run's lease is still live: it is left alone.
    early = project.run_days(KEY)
    assert materialization_metadata(early)["orders"]["reconciled_records"] == 0
    clock.advance(1.2)  # the crashed run's lease runs out
    rerun = project.run_days(KEY)
    assert rerun.success
    md = materialization_metadata(rerun)["orders"]
    assert md["reconciled_records"] == 1
    assert md["committed"] is False  # the content was already there: nothing re-applied
    crashed = next(r for r in _records(project) if "/crashed-run/" in r.record_id)
    assert crashed.status == Status.SUCCEEDED
    assert crashed.result["version"] == crashed_version and crashed.result["reconciled"]
    assert LEASE_TOKEN_KEY in project.lake.table("orders").open().history(2)[-1]


def test_crash_before_commit_is_marked_ignored(project):
    project, clock = on_a_stepped_clock(project)
    assert project.run_days(KEY).success
    with project.checkpoint.open() as store:
        LakeWriteLog(store, "orders", WINDOW, "died-early", lease_seconds=1).begin({})
    clock.advance(1.2)
    assert project.run_days(KEY).success
    died = next(r for r in _records(project) if "/died-early/" in r.record_id)
    assert died.status == Status.IGNORED
    assert "before its Delta commit" in (died.ignored_reason or "")


def test_a_write_that_cannot_be_settled_is_reconciled_by_the_next_run(project, monkeypatch):
    """The commit landed but its record could not be settled: the run fails naming the
    version, and the next run records that commit (reconciled) and commits nothing."""
    monkeypatch.setenv("IDEM_FAIL_AT", "lake.after_commit/orders")
    failed = project.run_days(KEY, assets=["orders"])
    assert not failed.success
    errors = [
        str(event.event_specific_data.error.cause or event.event_specific_data.error)  # type: ignore[union-attr]
        for event in failed.all_events
        if event.is_step_failure
    ]
    assert any("committed version 0" in e and "reconciles it" in e for e in errors), errors
    assert project.lake.table("orders").open().version() == 0
    unsettled = [r for r in _records(project) if f"/{failed.run_id}/" in r.record_id]
    assert [r.status for r in unsettled] == [Status.FAILED]

    monkeypatch.delenv("IDEM_FAIL_AT")
    rerun = project.run_days(KEY, assets=["orders"])
    assert rerun.success
    md = materialization_metadata(rerun)["orders"]
    assert (md["reconciled_records"], md["committed"], md["delta_version"]) == (1, False, 0)
    reconciled = next(r for r in _records(project) if f"/{failed.run_id}/" in r.record_id)
    assert reconciled.status == Status.SUCCEEDED
    assert reconciled.result["version"] == 0 and reconciled.result["reconciled"]
    assert all(check_results(rerun).values())
