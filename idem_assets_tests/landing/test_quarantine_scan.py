"""``quarantine_files_holding`` lists exactly the files of the quarantine folder a full
Parquet scan finds holding an erased key, at every step of an erasure: recorded, erased,
the days rerun, and a vacuum with no retention."""

from __future__ import annotations

import time

import dagster as dg

from idem_assets.checkpoint.erasure import ErasureLedger
from idem_assets.lake.erasure import CURRENT, REMOVED, FileScan, key_digest, vacuum_erased
from idem_assets.landing.quarantine import QUARANTINE_TABLE
from idem_assets.landing.quarantine_scan import quarantine_files_holding
from idem_assets.resources import CheckpointResource, LakeResource
from idem_assets_tests.landing.test_quarantine_erasure import (
    CUSTOMER,
    SOURCES,
    erase,
    load,
    parquet_scan,
    world,
)


def _scan(lake: LakeResource, checkpoint: CheckpointResource) -> FileScan:
    with checkpoint.open() as store:
        erased = ErasureLedger(store).erased()
    return quarantine_files_holding(lake.table(QUARANTINE_TABLE), erased, SOURCES)


def test_the_scan_lists_exactly_the_files_holding_the_key_until_vacuum(tmp_path):
    defs, lake, checkpoint = world(tmp_path)
    instance = dg.DagsterInstance.ephemeral()
    load(defs, instance)
    nothing = _scan(lake, checkpoint)  # no key erased yet: nothing read
    assert (nothing.held, nothing.files) == ((), 0)

    with checkpoint.open() as store:
        ErasureLedger(store).record("customer_id", CUSTOMER)
    recorded = _scan(lake, checkpoint)
    assert {f.path for f in recorded.held} == parquet_scan(tmp_path) != set()
    assert {f.kind for f in recorded.held} == {CURRENT}
    assert {f.keys for f in recorded.held} == {(key_digest("customer_id", CUSTOMER),)}
    # The refunds files (no erasable key) are ruled out by their folder, unread.
    assert recorded.by_statistics > 0 and recorded.read == len(recorded.held)

    erase(lake, checkpoint)
    erased = _scan(lake, checkpoint)
    assert (
        {f.path for f in erased.held} == parquet_scan(tmp_path) == {f.path for f in recorded.held}
    )
    assert {f.kind for f in erased.held} == {REMOVED}  # until vacuum deletes them

    load(defs, instance)  # a rerun writes new files, without the key
    rerun = _scan(lake, checkpoint)
    assert {f.path for f in rerun.held} == parquet_scan(tmp_path)
    assert {f.kind for f in rerun.held} == {REMOVED}

    done = vacuum_erased(lake.table(QUARANTINE_TABLE), rerun, time.time())
    assert done.vacuumed and not done.left
    after = _scan(lake, checkpoint)
    assert after.held == () and parquet_scan(tmp_path) == set()
    assert after.files > 0  # the refunds' and the rest of payments' files are still there
