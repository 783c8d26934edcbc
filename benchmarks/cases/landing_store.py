"""Landing zone in object storage: sensor ticks over a bucket, and a day read from it.

Everything runs against moto's S3 server on 127.0.0.1, started here in its own process,
with the project's fault proxy (``idem_assets_tests/deploy/s3_proxy.py``, ``log_requests``)
in front of it for the passes that count requests.

- L1. A landing-sensor tick of ``orders`` (``source_sensor(ORDERS_SOURCE)`` ticked through
  ``dg.build_sensor_context`` with a ``LakeResource`` on ``s3://…``) over N small CSV files
  (day folders from the source's first day × 100 files): the first tick (every day new), a
  quiet tick (nothing changed) and a tick after one file was replaced by other bytes of the
  same size (only the ETag tells). Beside it, the naive content-hashing tick: the same one
  listing, then every object downloaded and hashed (``signature_of`` with a fresh
  ``HashCache`` per day, what the sensor does where a listing does not name the bytes). It
  does the same work on every tick, so it is measured on the quiet tick. A diagnostic row
  times the server's listing alone (``obstore.list`` of the prefix, no project code).
- L2. One orders day of the sample generator (seed 7; about 1M rows: a Parquet, a CSV and a
  JSON Lines file) read with ``read_days`` from a local folder and from the same files in
  the bucket, each read in a fresh process; both must give the same ``batch.signature`` and
  row fingerprint.

Timed samples reach moto directly; requests (LIST, GET) are counted in one extra sample of
each contender through the proxy, and bytes downloaded are the sizes of the objects GET.
The L1 objects are put into moto's in-memory backend by the server process before it
serves (moto answers ~230 PUTs/s here, so uploading 10,000 objects would take ~45 s of
set-up); the L2 day is uploaded through the S3 API. The orders day is written by the
generator's own orders planner and writer (``plan_customers`` and ``plan_orders`` of
``generate(out, day, days=1, seed=7, scale=…)``, byte-identical to its orders files,
without the ~90 s of events and customers files that scale would also write).
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

from benchmarks.data import DATA_DIR
from benchmarks.harness import Contender, Stats, compare, sample, table

ROOT = Path(__file__).resolve().parents[2]
BUCKET = "idem-bench-landing"
TICKS = "ticks"  # the L1 landing root: s3://BUCKET/ticks
DAY_PREFIX = "day"  # the L2 landing root: s3://BUCKET/day
FILES_PER_DAY = 100
CREDENTIALS = {
    "access_key_id": "AKIABENCHLANDING0000",
    "secret_access_key": "benchmark-only-secret",
    "region": "us-east-1",
}
SEED = 7
# Orders rows of one generated day per unit of scale: 300 new orders, 10% re-delivered,
# 2% duplicated (idem_assets/sample/synthetic/orders.py).
ROWS_PER_SCALE = 336
# The file the L1 "replaced" tick finds with other bytes: day 3 of the range, file 7.
REPLACED = (3, 7)
STARTUP_SECONDS = 60.0
WARM_ROWS = 1_000  # the day each read's process reads before the timer

SENSOR = "sensor (listing hints)"
NAIVE = "naive (download + hash every object)"
LISTING = "the listing alone (obstore.list, no project code)"
FIRST, QUIET, CHANGED = "first tick", "quiet tick", "one file replaced"
LOCAL, BUCKET_READ = "local folder", "bucket (s3://, moto)"


# --------------------------------------------------------------------------- inputs


def first_day() -> dt.date:
    """The orders source's first partition day (its declaration)."""
    from idem_assets.sample.sources import ORDERS

    assert ORDERS.first_day is not None
    return ORDERS.first_day


def tick_key(day_index: int, file_index: int) -> str:
    """An L1 object's path relative to the landing root."""
    day = first_day() + dt.timedelta(days=day_index)
    return f"orders/date={day.isoformat()}/part-{file_index:03d}.csv"


def tick_body(day_index: int, file_index: int, variant: int = 0) -> bytes:
    """A small orders CSV (5 rows); another ``variant`` has other bytes of the same size."""
    day = first_day() + dt.timedelta(days=day_index)
    lines = ["order_id,customer_id,amount,status,order_date,updated_at"]
    for row in range(5):
        order_id = 1_000_000 + (day_index * FILES_PER_DAY + file_index) * 10 + row
        cents = 1000 + (order_id * 37 + variant) % 9000
        lines.append(
            f"{order_id},{order_id % 997},{cents // 100}.{cents % 100:02d},placed,"
            f"{day.isoformat()},{day.isoformat()}T08:00:00Z"
        )
    return ("\n".join(lines) + "\n").encode()


def orders_day(rows: int) -> Path:
    """A landing root holding one generated orders day of about ``rows`` rows (cached)."""
    from idem_assets.landing.writers import file_bytes, write_atomically
    from idem_assets.sample.sources import ORDERS
    from idem_assets.sample.synthetic.common import Calendar
    from idem_assets.sample.synthetic.customers import plan_customers
    from idem_assets.sample.synthetic.orders import plan_orders

    root = DATA_DIR / f"landing-orders-{rows}"
    done = root / "_COMPLETE"
    if not done.exists():
        shutil.rmtree(root, ignore_errors=True)
        calendar = Calendar(first_day(), 1, SEED, rows / ROWS_PER_SCALE, False)
        _, customers_by_day = plan_customers(calendar)
        for planned in plan_orders(calendar, customers_by_day).files:
            write_atomically(root / planned.relpath, file_bytes(planned, ORDERS))
        done.write_text("")
    return root


# --------------------------------------------------------------------------- servers


def serve(port: int, days: int) -> None:
    """moto's S3 server on ``port``, the L1 objects already in its backend."""
    from moto.core import DEFAULT_ACCOUNT_ID
    from moto.s3.models import s3_backends

    backend = s3_backends[DEFAULT_ACCOUNT_ID]["global"]
    backend.create_bucket(BUCKET, CREDENTIALS["region"])
    for day_index in range(days):
        for file_index in range(FILES_PER_DAY):
            key = f"{TICKS}/{tick_key(day_index, file_index)}"
            backend.put_object(BUCKET, key, tick_body(day_index, file_index))
    import moto.server

    moto.server.main(["-H", "127.0.0.1", "-p", str(port)])


@dataclass
class Servers:
    """moto (``endpoint``) and the request-logging proxy in front of it (``proxied``)."""

    endpoint: str
    proxied: str
    control: Path
    processes: list[subprocess.Popen[bytes]]

    @property
    def log(self) -> Path:
        """The proxy's request log."""
        return self.control.parent / f"{self.control.name}.log"

    def stop(self) -> None:
        """Stop both servers."""
        from idem_assets_tests.fixtures.s3 import stop

        for process in self.processes:
            stop(process)


def _wait(url: str, process: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + STARTUP_SECONDS
    while True:
        if process.poll() is not None:
            raise RuntimeError(f"{url} exited: {log.read_text(errors='replace')[-2000:]}")
        try:
            with urllib.request.urlopen(f"{url}/moto-api/", timeout=2):
                return
        except OSError:
            if time.monotonic() > deadline:
                raise RuntimeError(f"nothing serving on {url}") from None
            time.sleep(0.2)


def start_servers(work: Path, days: int) -> Servers:
    """moto with the L1 objects, and the proxy logging every request it forwards."""
    from idem_assets_tests.fixtures.s3 import free_port

    processes: list[subprocess.Popen[bytes]] = []
    servers = Servers("", "", work / "proxy.json", processes)
    try:
        port = free_port()
        moto_log = work / "moto.log"
        with moto_log.open("wb") as out:
            processes.append(
                subprocess.Popen(
                    [sys.executable, "-m", __name__, "serve", str(port), str(days)],
                    cwd=ROOT,
                    stdout=out,
                    stderr=subprocess.STDOUT,
                )
            )
        servers.endpoint = f"http://127.0.0.1:{port}"
        _wait(servers.endpoint, processes[0], moto_log)
        servers.control.write_text(json.dumps({"log_requests": True}))
        port = free_port()
        proxy_log = work / "proxy-out.log"
        with proxy_log.open("wb") as out:
            processes.append(
                subprocess.Popen(
                    [
                        sys.executable,
                        "-m",
                        "idem_assets_tests.deploy.s3_proxy",
                        servers.endpoint,
                        str(port),
                        str(servers.control),
                    ],
                    cwd=ROOT,
                    stdout=out,
                    stderr=subprocess.STDOUT,
                )
            )
        servers.proxied = f"http://127.0.0.1:{port}"
        _wait(servers.proxied, processes[1], proxy_log)
    except BaseException:
        servers.stop()
        raise
    return servers


def options(endpoint: str) -> dict[str, str]:
    """Storage options for the local server (plain HTTP, any credentials)."""
    return {"endpoint": endpoint, "allow_http": "true", **CREDENTIALS}


def bucket(endpoint: str) -> Any:
    """The fixtures' S3Bucket helper on the benchmark's bucket."""
    from idem_assets_tests.fixtures.s3 import S3Bucket

    return S3Bucket(
        endpoint,
        BUCKET,
        {
            "AWS_ACCESS_KEY_ID": CREDENTIALS["access_key_id"],
            "AWS_SECRET_ACCESS_KEY": CREDENTIALS["secret_access_key"],
        },
    )


# --------------------------------------------------------------------------- L1 contenders


def _replace(endpoint: str, variant: int) -> None:
    key = f"{TICKS}/{tick_key(*REPLACED)}"
    bucket(endpoint).put(key, tick_body(*REPLACED, variant=variant))


def prepare_tick(endpoint: str, direct: str, cursor: str | None, replace: bool) -> dict[str, Any]:
    """The orders sensor and its context (``cursor``); with ``replace``, one file replaced."""
    import dagster as dg

    from idem_assets.lib import source_sensor
    from idem_assets.resources import LakeResource
    from idem_assets.sample import ORDERS_SOURCE

    if replace:
        _replace(direct, 1)
    lake = LakeResource(
        landing_dir=f"s3://{BUCKET}/{TICKS}",
        lake_dir=tempfile.mkdtemp(prefix="bench-landing-lake-"),
        storage_options=options(endpoint),
    )
    context = dg.build_sensor_context(
        cursor=cursor, instance=dg.DagsterInstance.ephemeral(), resources={"lake": lake}
    )
    return {
        "sensor": source_sensor(ORDERS_SOURCE),
        "context": context,
        "direct": direct,
        "replaced": replace,
    }


def run_tick(state: dict[str, Any]) -> dict[str, Any]:
    """One tick of the sensor."""
    result = state["sensor"](state["context"])
    state["result"] = result
    return {}


def verify_tick(state: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    """What the tick asked for (and the replaced file put back)."""
    result = state.pop("result")
    if state["replaced"]:
        _replace(state["direct"], 0)
    return {
        "requested": sorted(r.partition_key for r in result.run_requests),
        "cursor": result.cursor,
    }


def prepare_naive(
    endpoint: str, direct: str, signatures: dict[str, str], replace: bool
) -> dict[str, Any]:
    """The bucket's landing root and the signatures the last tick saw per day."""
    from idem_assets.landing import landing_root

    if replace:
        _replace(direct, 1)
    root = landing_root(f"s3://{BUCKET}/{TICKS}", options(endpoint))
    return {"root": root, "seen": signatures, "direct": direct, "replaced": replace}


def run_naive(state: dict[str, Any]) -> dict[str, Any]:
    """A content-hashing tick: one listing, then every object downloaded and hashed."""
    from idem_assets.landing import HashCache
    from idem_assets.landing.files import signature_of
    from idem_assets.lib.sensors import listed_days
    from idem_assets.sample.sources import ORDERS

    root = state["root"]
    now = {
        day.isoformat(): signature_of(root, found, HashCache())
        for day, found in listed_days(root, ORDERS).items()
    }
    state["changed"] = sorted(day for day, sig in now.items() if state["seen"].get(day) != sig)
    state["now"] = now
    return {}


def verify_naive(state: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    """The days whose content moved (and the replaced file put back)."""
    if state["replaced"]:
        _replace(state["direct"], 0)
    return {"requested": state["changed"], "signatures": state["now"]}


def prepare_listing(endpoint: str) -> dict[str, Any]:
    """An obstore store on the landing root."""
    from obstore.store import from_url

    from idem_assets.landing.store import object_store_options

    config, client = object_store_options(options(endpoint))
    return {"store": from_url(f"s3://{BUCKET}/{TICKS}", config=config, client_options=client)}


def run_listing(state: dict[str, Any]) -> dict[str, Any]:
    """Every object of the prefix, listed in pages of 1,000."""
    import obstore

    objects = sum(len(chunk) for chunk in obstore.list(state["store"], None, chunk_size=1000))
    return {"objects": objects}


# --------------------------------------------------------------------------- L2 contenders


def prepare_read(uri: str, storage: dict[str, str] | None, warm: str) -> dict[str, Any]:
    """The landing root (a folder or the bucket prefix) of the generated day.

    A small generated day (``warm``, a local folder) is read first, so that what the reader
    imports on its first call (polars, pyarrow's readers) is not billed to the read.
    """
    from idem_assets.landing import landing_root, read_days
    from idem_assets.sample.sources import ORDERS

    read_days(warm, ORDERS, first_day(), first_day() + dt.timedelta(days=1))
    return {"root": landing_root(uri, storage)}


def run_read(state: dict[str, Any]) -> dict[str, Any]:
    """``read_days`` of the one day."""
    from idem_assets.landing import read_days
    from idem_assets.sample.sources import ORDERS

    day = first_day()
    state["batch"] = read_days(state["root"], ORDERS, day, day + dt.timedelta(days=1))
    return {}


def verify_read(state: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    """Rows, bytes, the batch's signature and its rows' fingerprint."""
    from idem_assets.lake import fingerprint

    batch = state.pop("batch")
    return {
        "rows": batch.rows.num_rows,
        "raw_rows": batch.raw_rows,
        "bytes": sum(f.size for f in batch.files),
        "files": len(batch.files),
        "signature": batch.signature,
        "fingerprint": repr(fingerprint(batch.rows)),
    }


# --------------------------------------------------------------------------- counting


@dataclass(frozen=True)
class Counts:
    """Requests one sample sent through the proxy, and the bytes it downloaded."""

    lists: int
    gets: int
    others: int
    bytes: int


def counted(contender: Contender, servers: Servers, sizes: dict[str, int]) -> Counts:
    """One sample of a contender (pointed at the proxy), its requests read from the log."""
    servers.log.unlink(missing_ok=True)
    sample(contender)
    entries = (
        [json.loads(line) for line in servers.log.read_text().splitlines()]
        if servers.log.exists()
        else []
    )
    lists = gets = others = size = 0
    for entry in entries:
        if entry.get("fault") != "request":
            continue
        parts = urlsplit(entry["path"])
        key = unquote(parts.path).lstrip("/").removeprefix(f"{BUCKET}/")
        if entry["method"] == "GET" and "list-type" in parts.query:
            lists += 1
        elif entry["method"] == "GET" and key and key != BUCKET:
            gets += 1
            size += sizes.get(key, 0)
        else:
            others += 1
    return Counts(lists, gets, others, size)


# --------------------------------------------------------------------------- the family


def _row(stat: Stats, scenario: str, counts: Counts | None) -> list[Any]:
    low, high = stat.spread
    requested = stat.last("requested", [])
    return [
        scenario,
        stat.name,
        stat.median,
        f"{low:.3f}–{high:.3f}",
        counts.lists if counts else "—",
        counts.gets if counts else "—",
        counts.bytes / 2**20 if counts else "—",
        len(requested) if stat.name != LISTING else f"{stat.last('objects', 0):,} listed",
        stat.rss,
    ]


TICK_HEADERS = [
    "tick",
    "contender",
    "median s",
    "min–max s",
    "LIST requests",
    "GET requests",
    "MiB downloaded",
    "runs requested",
    "peak RSS MiB",
]


def _expect(condition: bool, message: str) -> None:
    if not condition:
        raise AssertionError(message)


def run_ticks(
    servers: Servers, days: int, reps: int, naive_reps: int
) -> tuple[list[str], dict[str, Any]]:
    """L1: the markdown lines and the numbers."""
    objects = days * FILES_PER_DAY
    direct, proxied = servers.endpoint, servers.proxied
    sizes = {
        f"{TICKS}/{tick_key(d, f)}": len(tick_body(d, f))
        for d in range(days)
        for f in range(FILES_PER_DAY)
    }
    replaced_day = (first_day() + dt.timedelta(days=REPLACED[0])).isoformat()

    def tick(name: str, endpoint: str, cursor: str | None, replace: bool) -> Contender:
        return Contender(
            name, prepare_tick, run_tick, (endpoint, direct, cursor, replace), verify_tick
        )

    def naive(endpoint: str, seen: dict[str, str], replace: bool = False) -> Contender:
        return Contender(
            NAIVE, prepare_naive, run_naive, (endpoint, direct, seen, replace), verify_naive
        )

    from idem_assets.landing.files import files_signature

    # The naive tick's previous signatures: what it saw on the last tick, i.e. the bodies
    # put in the bucket (its quiet tick checks that it finds every day unchanged).
    signatures = {
        (first_day() + dt.timedelta(days=d)).isoformat(): files_signature(
            (tick_key(d, f), hashlib.sha256(tick_body(d, f)).hexdigest())
            for f in range(FILES_PER_DAY)
        )
        for d in range(days)
    }
    # The first tick's cursor is the one the quiet and the replaced ticks start from.
    first = compare([tick(SENSOR, direct, None, False)], reps)[0]
    cursor = first.last("cursor")
    scenarios = {QUIET: (cursor, False), CHANGED: (cursor, True)}
    stats = compare(
        [
            *(tick(SENSOR, direct, c, r) for c, r in scenarios.values()),
            Contender(LISTING, prepare_listing, run_listing, (direct,)),
        ],
        reps,
    )
    # ~4.5 ms a GET on moto: tens of seconds a sample at 10,000 objects, so sampled apart.
    hashing = compare([naive(direct, signatures)], naive_reps)[0]
    by_scenario = {FIRST: first, **dict(zip([*scenarios, "listing"], stats, strict=True))}
    by_scenario["naive"] = hashing
    scenarios = {FIRST: (None, False), **scenarios}
    counts = {
        scenario: counted(tick(SENSOR, proxied, c, r), servers, sizes)
        for scenario, (c, r) in scenarios.items()
    }
    counts["naive"] = counted(naive(proxied, signatures), servers, sizes)

    expected = {FIRST: days, QUIET: 0, CHANGED: 1, "naive": 0}
    for scenario, want in expected.items():
        got = by_scenario[scenario].last("requested", [])
        _expect(len(got) == want, f"{scenario}: {len(got)} runs requested, expected {want}")
    _expect(
        by_scenario[CHANGED].last("requested") == [replaced_day],
        f"the replaced file's day {replaced_day} was not the one requested",
    )
    _expect(by_scenario["listing"].last("objects") == objects, "the listing missed objects")

    rows = [
        _row(by_scenario[FIRST], FIRST, counts[FIRST]),
        _row(by_scenario[QUIET], QUIET, counts[QUIET]),
        _row(by_scenario[CHANGED], CHANGED, counts[CHANGED]),
        _row(by_scenario["naive"], "every tick (measured quiet)", counts["naive"]),
        _row(by_scenario["listing"], "diagnostic", None),
    ]
    quiet, naive_s, listing = (by_scenario[k].median for k in (QUIET, "naive", "listing"))
    md = [
        f"### L1. A landing-sensor tick over {objects:,} objects ({days} days × "
        f"{FILES_PER_DAY} small CSV files of orders, s3://{BUCKET}/{TICKS} on moto)",
        "",
        "The orders sensor (`source_sensor(ORDERS_SOURCE)`, ticked with "
        "`dg.build_sensor_context`) against a content-hashing tick. Each sample in a fresh "
        f"process (Dagster imported before the timer): {reps} first ticks (the last one's "
        f"cursor starts the others), then {reps} each of the quiet tick, the replaced-file "
        f"tick and the listing alone, alternating, then {naive_reps} of the naive tick (about "
        "4.5 ms a GET on moto). Requests and bytes: one more sample of each through the "
        f"request-logging proxy. The replaced file ({tick_key(*REPLACED)}) keeps its size: "
        "only its ETag changes.",
        "",
        table(TICK_HEADERS, rows),
        "",
        f"- quiet tick: {quiet:.2f} s with {counts[QUIET].gets} GETs; the naive tick "
        f"downloads all {counts['naive'].gets:,} objects "
        f"({counts['naive'].bytes / 2**20:.1f} MiB) on every tick and takes {naive_s:.2f} s "
        f"({naive_s / quiet:.1f}× the quiet tick).",
        f"- of the quiet tick, the server's listing alone ({counts[QUIET].lists} pages of "
        f"1,000) is {listing:.2f} s: moto answers each page of this prefix in "
        f"~{listing / max(counts[QUIET].lists, 1) * 1000:.0f} ms (real S3 answers a page "
        "in tens of ms); the sensor's own work on top of it is "
        f"{max(quiet - listing, 0.0):.2f} s.",
        f"- runs requested: first tick {len(by_scenario[FIRST].last('requested'))} "
        f"(every day), quiet tick 0, after the replacement 1 ({replaced_day}); the naive "
        "tick finds the same changes by hashing.",
        "",
    ]
    numbers = {
        "objects": objects,
        "seconds": {
            FIRST: by_scenario[FIRST].median,
            QUIET: quiet,
            CHANGED: by_scenario[CHANGED].median,
            "naive": naive_s,
            "listing": listing,
        },
        "counts": {k: vars(v) for k, v in counts.items()},
    }
    return md, numbers


def run_reads(servers: Servers, rows: int, reps: int) -> tuple[list[str], dict[str, Any]]:
    """L2: the markdown lines and the numbers."""
    local, warm = orders_day(rows), str(orders_day(WARM_ROWS))
    folder = local / "orders" / f"date={first_day().isoformat()}"
    sizes = {
        f"{DAY_PREFIX}/{p.relative_to(local).as_posix()}": p.stat().st_size
        for p in folder.iterdir()
    }
    uploaded = bucket(servers.endpoint).upload_tree(local / "orders", f"{DAY_PREFIX}/orders")
    _expect(uploaded == len(sizes), f"{uploaded} files uploaded, {len(sizes)} in the folder")
    uri = f"s3://{BUCKET}/{DAY_PREFIX}"

    def read(name: str, endpoint: str | None) -> Contender:
        where, storage = (uri, options(endpoint)) if endpoint else (str(local), None)
        return Contender(name, prepare_read, run_read, (where, storage, warm), verify_read)

    stats = compare([read(LOCAL, None), read(BUCKET_READ, servers.endpoint)], reps)
    counts = counted(read(BUCKET_READ, servers.proxied), servers, sizes)
    here, there = stats
    same_signature = here.last("signature") == there.last("signature")
    same_rows = here.last("fingerprint") == there.last("fingerprint")
    same_every = all(
        s.extra[i]["signature"] == here.last("signature")
        and s.extra[i]["fingerprint"] == here.last("fingerprint")
        for s in stats
        for i in range(len(s.extra))
    )
    table_rows = []
    for s in stats:
        low, high = s.spread
        table_rows.append(
            [
                s.name,
                s.median,
                f"{low:.3f}–{high:.3f}",
                f"{s.median / here.median:.2f}×",
                f"{s.last('rows') / s.median:,.0f}",
                s.last("bytes") / 2**20 / s.median,
                s.rss,
                f"{counts.lists} LIST, {counts.gets} GET" if s is there else "—",
            ]
        )
    mib = here.last("bytes") / 2**20
    md = [
        f"### L2. Reading one {here.last('rows'):,}-row orders day: local folder vs bucket",
        "",
        f"`read_days(root, ORDERS, day, day + 1)` of {first_day()} from the sample "
        f"generator (seed {SEED}, scale {rows / ROWS_PER_SCALE:.2f}: {here.last('files')} "
        f"files, {mib:.1f} MiB — Parquet, CSV, JSON Lines), with `landing_root(folder)` and "
        f"`landing_root('{uri}', options)`. Samples per contender: {reps}, alternating, each "
        "in a fresh process; MB/s is the files' bytes over the read's wall time.",
        "",
        table(
            [
                "landing root",
                "median s",
                "min–max s",
                "× local",
                "rows/s",
                "MiB/s",
                "peak RSS MiB",
                "requests",
            ],
            table_rows,
        ),
        "",
        f"- same `batch.signature` in the folder and the bucket: "
        f"{'yes' if same_signature else '**no**'} (`{(here.last('signature') or '')[:16]}…`); "
        f"same row fingerprint (`idem_assets.lake.fingerprint(batch.rows)`): "
        f"{'yes' if same_rows else '**no**'}, in every sample: {'yes' if same_every else 'no'}.",
        f"- the bucket read downloaded {counts.bytes / 2**20:.1f} MiB in {counts.gets} GETs "
        f"after {counts.lists} LIST(s), each file once.",
        "",
    ]
    numbers = {
        "rows": here.last("rows"),
        "seconds": {LOCAL: here.median, BUCKET_READ: there.median},
        "equal": same_signature and same_rows and same_every,
        "bytes": here.last("bytes"),
    }
    return md, numbers


def run_family(
    days: int, rows: int, repetitions: int, naive_repetitions: int = 1
) -> tuple[str, dict[str, Any]]:
    """L1 and L2: the markdown section (without its ## heading) and the numbers."""
    work = Path(tempfile.mkdtemp(prefix="bench-landing-"))
    orders_day(rows), orders_day(WARM_ROWS)  # generated (once) before the servers start
    started = time.perf_counter()
    servers = start_servers(work, days)
    try:
        tick_md, tick_numbers = run_ticks(servers, days, repetitions, naive_repetitions)
        read_md, read_numbers = run_reads(servers, rows, repetitions)
    finally:
        servers.stop()
        shutil.rmtree(work, ignore_errors=True)
    md = [
        f"moto {_moto_version()} in its own process on 127.0.0.1 (S3 API over HTTP), the "
        "request-logging proxy in front of it for the counted samples. Family wall time "
        f"{time.perf_counter() - started:.0f} s.",
        "",
        *tick_md,
        *read_md,
    ]
    return "\n".join(md), {"ticks": tick_numbers, "read": read_numbers}


def _moto_version() -> str:
    from importlib.metadata import version

    return version("moto")


def plot_groups(numbers: dict[str, Any]) -> dict[str, dict[str, float]]:
    """Bar groups for results/landing.png: the three ticks, ours and the naive one."""
    seconds = numbers["ticks"]["seconds"]
    return {
        FIRST: {SENSOR: seconds[FIRST]},
        QUIET: {SENSOR: seconds[QUIET], NAIVE: seconds["naive"], LISTING: seconds["listing"]},
        CHANGED: {SENSOR: seconds[CHANGED]},
    }


def read_groups(numbers: dict[str, Any]) -> dict[str, dict[str, float]]:
    """Bar groups for results/landing_read.png."""
    return {f"read {numbers['read']['rows']:,} rows": dict(numbers["read"]["seconds"])}


if __name__ == "__main__":
    if sys.argv[1:2] == ["serve"]:
        serve(int(sys.argv[2]), int(sys.argv[3]))
