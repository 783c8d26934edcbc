"""``idem-assets pools``: the instance's limit on each lake table's writers, from the code.

Every lake asset writes its table in a pool of its own (``lake/<table>``); the instance
admits that many steps of the pool at once (``dagster.yaml``: one by default). A
declaration's ``backfill: {writers: N}`` lets N runs write disjoint days of one table at
once, for example the chunks of a backfill split by ``max_days_per_run``. Pool limits live
in the Dagster instance, not in code, so this command sets them from the definitions, as
``dagster instance concurrency set <pool> <N>`` would one by one.
"""

from __future__ import annotations

import dagster as dg

from idem_assets.lib.asset_def import WRITERS_KEY


def declared_writers(definitions: dg.Definitions) -> dict[str, int]:
    """Pool -> how many writers its lake asset declares, for every lake asset."""
    limits: dict[str, int] = {}
    for assets in definitions.resolve_asset_graph().assets_defs:
        for spec in assets.specs:
            writers = spec.metadata.get(WRITERS_KEY)
            pool = assets.node_def.pools
            if writers is None or not pool:
                continue
            for name in pool:
                limits[name] = max(limits.get(name, 1), int(getattr(writers, "value", writers)))
    return dict(sorted(limits.items()))


def apply_writers(instance: dg.DagsterInstance, limits: dict[str, int]) -> dict[str, int]:
    """Set each pool's limit in the instance; returns the limits it held before (0: none)."""
    storage = instance.event_log_storage
    before = {}
    for pool, limit in limits.items():
        info = storage.get_concurrency_info(pool)
        before[pool] = info.slot_count
        storage.set_concurrency_slots(pool, limit)
    return before
