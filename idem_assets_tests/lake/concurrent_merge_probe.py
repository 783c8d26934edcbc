"""Probe (not a test): plain merge_upsert, pairs of days at once from two threads, compared
with the newest-version reference. On main it loses updates (5, 1 and 12 of 60 keys for seeds
100-102). Run: PYTHONPATH=. .venv/bin/python idem_assets_tests/lake/concurrent_merge_probe.py"""

import random
import tempfile
from concurrent.futures import ThreadPoolExecutor

import pyarrow as pa

from idem_assets.lake import read_rows
from idem_assets.lake.merge import merge_upsert
from idem_assets.lake.tables import LakeTable
from idem_assets_tests.lake.test_merge_deletes import DAYS, KEY, OP, VERSION, change_days, reference

bad = 0
for seed in range(3):
    days = [t.drop_columns([OP]) for t in change_days(100 + seed)]
    ref = reference([t.append_column(OP, pa.array(["U"] * t.num_rows)) for t in days])
    target = LakeTable(tempfile.mkdtemp() + "/lake")
    order = list(range(DAYS))
    random.Random(seed).shuffle(order)
    merge_upsert(target, days[order[0]], [KEY], version_column=VERSION)
    load = lambda i: merge_upsert(target, days[i], [KEY], version_column=VERSION)
    with ThreadPoolExecutor(2) as pool:
        for a, b in zip(order[1::2], order[2::2]):
            list(pool.map(load, [a, b]))
    got = {r[KEY]: r for r in read_rows(target.open()).to_pylist()}
    diff = sum(got.get(k) != v for k, v in ref.items())
    print("seed", seed, "differing keys", diff, "of", len(ref))
