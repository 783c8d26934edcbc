"""A stream's quarantine rows holding an erased key are left out of its batches, counted as
erased, as its valid rows are."""

from __future__ import annotations

import json

from idem_assets.checkpoint.erasure import ErasureLedger
from idem_assets.lake import read_rows
from idem_assets.sample import EVENTS_STREAM
from idem_assets_tests.stream.world import StreamWorld


def _quarantined_customers(world: StreamWorld) -> list[str]:
    rows = read_rows(world.quarantine.open())
    return [
        str(json.loads(record)["customer_id"])
        for source, record in zip(
            rows.column("source").to_pylist(), rows.column("raw_record").to_pylist(), strict=True
        )
        if source == EVENTS_STREAM.name
    ]


def test_a_quarantined_row_of_an_erased_customer_is_never_written(sqlite_world: StreamWorld):
    world = sqlite_world
    files = world.append(8)  # files 3 and 7 each carry one row the contract refuses
    refused = [f.rows[0]["customer_id"] for f in files if f.invalid]
    assert len(refused) == 2 and refused[0] != refused[1]
    with world.store() as store:
        ErasureLedger(store).record("customer_id", str(refused[0]))
        report = world.ingester(store).run()
    assert _quarantined_customers(world) == [str(refused[1])]
    assert refused[0] not in read_rows(world.table.open()).column("customer_id").to_pylist()
    for outcome in report.outcomes:
        assert outcome.raw_rows == outcome.rows + outcome.quarantined + outcome.erased
    assert sum(o.quarantined for o in report.outcomes) == 1
