"""Erasure, any order: 30 days of CDC with deletes declared as a merge with a change feed
and as a history, a consumer of the feed (run by Dagster, and by two racers at once, some
stopped before they acknowledge), and keys erased at random points of random orders of
loads, reruns and replays.

Every order ends in one fingerprint per table (the reference without the erased keys), the
consumer's log holds every change of the feed once (but the erased keys'), no row holds an
erased key, the erasure status lists exactly the files a Parquet scan finds holding one at
every step, and after ``--vacuum-now`` (and a replay of days after it) that scan finds
none. ``IDEM_ERASURE_ORDERS`` sets how many orders (2 by default: each is ~60 Dagster runs),
``IDEM_ERASURE_FIRST_SEED`` the first order's seed (0).
"""

import datetime as dt
import os
import random
import threading
from collections import Counter
from pathlib import Path

import dagster as dg
import pyarrow.parquet as pq
import pytest

from idem_assets.checkpoint.erasure import ErasureLedger
from idem_assets.cli.erase import erase, vacuum_now
from idem_assets.io_manager.erasure import erasable_tables, scan_storage
from idem_assets.lake import fingerprint, read_rows
from idem_assets.lake.changes import change_rows
from idem_assets.lib import append_changes, changes_metadata, consume_changes
from idem_assets.resources import CheckpointResource, LakeResource
from idem_assets.sources.load import declaration_from_mapping
from idem_assets_tests.harness import check_results, declared_definitions
from idem_assets_tests.lake.test_merge_deletes import DAYS, KEY, change_days, reference
from idem_assets_tests.sources.test_delete_marker import DECLARED, START, _lay_out

CHANGES = change_days(43)
MERGED = {**DECLARED, "change_data_feed": True, "erasable_keys": [KEY]}
HISTORY = {
    **DECLARED,
    "name": "crm_customer_history",
    "layout": "crm_customers/date={date}",
    "strategy": "history",
    "erasable_keys": [KEY],
}
CONSUMER, LOG = "customer_changes", "customer_changes"
ORDERS = int(os.environ.get("IDEM_ERASURE_ORDERS", "2"))
FIRST_SEED = int(os.environ.get("IDEM_ERASURE_FIRST_SEED", "0"))  # to split a long run
# Three customers with changes on many days, erased at random points of every order.
ERASED = [key for key, _ in Counter(r[KEY] for t in CHANGES for r in t.to_pylist()).most_common(3)]


class Stop(dg.Config):
    """Stop after writing, before acknowledging (a crash in the worst place)."""

    before_acknowledging: bool = False


def _take(lake: LakeResource, checkpoint: CheckpointResource, stop: bool = False) -> dict:
    with consume_changes(lake, checkpoint, "crm_customers", CONSUMER) as changes:
        written = append_changes(lake.table(LOG), changes, CONSUMER)
        if stop:
            raise RuntimeError("stopped before acknowledging")
    return changes_metadata(changes, written)


@dg.asset(deps=["crm_customers"], metadata={"idem/erasable_keys": [KEY], "idem/table": LOG})
def customer_changes(
    config: Stop, lake: LakeResource, checkpoint: CheckpointResource
) -> dg.MaterializeResult:
    return dg.MaterializeResult(metadata=_take(lake, checkpoint, config.before_acknowledging))


def _held_on_storage(lake: Path, tables: set[str], erased: set[int]) -> set[str]:
    """Every Parquet file of the tables' folders holding a key of ``erased``, by reading them
    all."""
    found = set()
    for path in lake.rglob("*.parquet"):
        relative = path.relative_to(lake)
        if relative.parts[0] not in tables or "_delta_log" in relative.parts:
            continue
        rows = pq.read_table(path)
        if KEY in rows.column_names and set(rows.column(KEY).to_pylist()) & erased:
            found.add(str(relative))
    return found


def _listed(scan) -> set[str]:
    return {f"{name}/{held.path}" for name, s in scan.tables.items() for held in s.held}


def _race(lake: LakeResource, checkpoint: CheckpointResource, rng: random.Random) -> None:
    """Two takers at once under one consumer name; either may stop before acknowledging."""
    stops = [rng.random() < 0.3, rng.random() < 0.3]
    errors: list[BaseException] = []

    def one(stop: bool) -> None:
        try:
            _take(lake, checkpoint, stop)
        except RuntimeError as error:
            if "stopped before acknowledging" not in str(error):
                errors.append(error)

    threads = [threading.Thread(target=one, args=(stop,)) for stop in stops]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors, errors


def _one_order(root: Path, seed: int) -> dict[str, str]:
    landing = root / "landing"
    _lay_out(landing, CHANGES)
    sources = [declaration_from_mapping(d, "test") for d in (MERGED, HISTORY)]
    defs, lake = declared_definitions(sources, landing, root)
    checkpoint = CheckpointResource(url=f"sqlite:///{root / 'state.db'}")
    load = dg.define_asset_job(
        "load", selection=dg.AssetSelection.assets(*(s.name for s in sources))
    )
    take = dg.define_asset_job("take", selection=dg.AssetSelection.assets(CONSUMER))
    defs = dg.Definitions.merge(defs, dg.Definitions(assets=[customer_changes], jobs=[load, take]))
    declared = erasable_tables(defs)
    assert set(declared) == {"crm_customers", "crm_customer_history", LOG}
    folders = {f"{n}{s}" for n in declared for s in ("", "__tombstones", "__history_deletes")}
    instance = dg.DagsterInstance.ephemeral()
    rng = random.Random(seed)
    order = rng.sample(range(DAYS), DAYS) + rng.sample(range(DAYS), 8)  # then reruns
    cuts = dict(zip(sorted(rng.sample(range(len(order)), len(ERASED))), ERASED, strict=True))

    so_far: set[int] = set()

    def status_equals_scan() -> set[str]:
        with checkpoint.open() as store:
            scan = scan_storage(ErasureLedger(store), lake.table, declared)
        listed = _listed(scan)
        assert listed == _held_on_storage(root / "lake", folders, so_far)
        return listed

    for position, index in enumerate(order):
        if position in cuts:
            stored = _held_on_storage(root / "lake", folders, {cuts[position]})
            with checkpoint.open() as store:
                erase(lake, store, declared, KEY, str(cuts[position]))
            so_far.add(cuts[position])
            listed = status_equals_scan()
            # Files that held it still do (removed, until the retention), unless none did yet.
            assert bool(listed) == bool(stored)
        key = (START + dt.timedelta(days=index)).isoformat()
        loaded = defs.resolve_job_def("load").execute_in_process(
            partition_key=key, instance=instance
        )
        assert all(check_results(loaded).values()), check_results(loaded)
        if rng.random() < 0.3:
            _race(lake, checkpoint, rng)
        else:
            stop = rng.random() < 0.3
            config = {"ops": {CONSUMER: {"config": {"before_acknowledging": stop}}}}
            taken = defs.resolve_job_def("take").execute_in_process(
                run_config=config, instance=instance, raise_on_error=False
            )
            assert taken.success != stop
        if rng.random() < 0.2:
            status_equals_scan()
    while _take(lake, checkpoint)["versions"] != "none new":
        pass
    status_equals_scan()

    erased = set(ERASED)
    stored = read_rows(lake.table("crm_customers").open())
    expected = {k: v for k, v in reference(CHANGES).items() if k not in erased}
    assert {r[KEY]: r for r in stored.to_pylist()} == expected
    history = read_rows(lake.table("crm_customer_history").open())
    log = read_rows(lake.table(LOG).open())
    for rows in (stored, history, log):
        assert not set(rows.column(KEY).to_pylist()) & erased
    # Every change of the feed once in the consumer's log, but those of erased keys.
    feed = change_rows(lake.table("crm_customers"), 0)
    changes = Counter(
        (r[KEY], r["_change_type"], r["_commit_version"])
        for r in feed.to_pylist()
        if r[KEY] not in erased
    )
    taken = Counter((r[KEY], r["_change_type"], r["_commit_version"]) for r in log.to_pylist())
    assert taken == changes

    with checkpoint.open() as store:
        done = vacuum_now(lake, store, declared)
    assert _listed(done.scan) == set() == _held_on_storage(root / "lake", folders, erased)
    assert all(entry.gone_at is not None for entry in done.scan.entries)
    # A replay of days after it brings nothing back.
    for index in rng.sample(range(DAYS), 8):
        key = (START + dt.timedelta(days=index)).isoformat()
        defs.resolve_job_def("load").execute_in_process(partition_key=key, instance=instance)
    while _take(lake, checkpoint)["versions"] != "none new":
        pass
    status_equals_scan()
    assert _held_on_storage(root / "lake", folders, erased) == set()
    return {
        name: str(fingerprint(read_rows(lake.table(name).open())))
        for name in ("crm_customers", "crm_customer_history")
    }


@pytest.mark.timeout(max(1200, ORDERS * 600))
def test_keys_erased_at_random_points_of_random_orders_leave_one_table_and_no_file(tmp_path):
    fingerprints = {
        seed: _one_order(tmp_path / str(seed), seed)
        for seed in range(FIRST_SEED, FIRST_SEED + ORDERS)
    }
    assert len({tuple(sorted(f.items())) for f in fingerprints.values()}) == 1, fingerprints
