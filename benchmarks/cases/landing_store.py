"""Landing zone in object storage: sensor ticks over a bucket, and a day read from it.

Everything runs against moto's S3 server on 127.0.0.1, started here in its own process.

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
  the bucket; both must give the same ``batch.signature`` and row fingerprint.

Requests are counted from moto's own request log (one line per request, written by the
server) for exactly the timed call of every sample; bytes downloaded are the sizes of the
objects GET. (The fault proxy of ``idem_assets_tests/deploy/s3_proxy.py`` counts the same
requests but adds ~40 ms to each here: its handler sends a response's headers and body as
two writes with Nagle's algorithm on, and the second waits for the client's delayed ACK;
10,000 GETs through it would take ~8 minutes. Measured: 44.5 ms a GET through it, 4.6 ms
direct, 6.3 ms through the same handler with ``disable_nagle_algorithm = True``.)

The L1 objects are put into moto's in-memory backend by the server process before it
serves: moto answers ~230 PUTs/s here, so uploading 10,000 objects would take ~45 s of
set-up. The L2 day is uploaded through the S3 API. The orders day is written by the
generator's own orders planner and file writer (what ``generate(out, day, days=1, seed=7,
scale=…)`` writes for orders, byte for byte, without the ~100 s of events and customers
files that scale would also write).

Samples run in fresh processes forked from a small fork server (``method="forkserver"``):
a spawned child would start with this process's peak RSS (Linux keeps the forked copy's
high-water mark across exec), and this process has generated a 1M-row day.
"""

from __future__ import annotations

import datetime as dt
import functools
import hashlib
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

from benchmarks.data import DATA_DIR
from benchmarks.harness import Contender, Stats, compare, table

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
WARM_ROWS = 1_000  # the day each read's process reads before the timer
# The file the L1 "replaced" tick finds with other bytes: day 3 of the range, file 7.
REPLACED = (3, 7)
STARTUP_SECONDS = 60.0
METHOD = "forkserver"

SENSOR = "sensor (listing hints)"
NAIVE = "naive (download + hash every object)"
LISTING = "the listing alone (obstore.list, no project code)"
FIRST, QUIET, CHANGED = "first tick", "quiet tick", "one file replaced"
LOCAL, BUCKET_READ = "local folder", "bucket (s3://, moto)"
DOWNLOAD = "the download alone (obstore.get, nothing parsed)"


# --------------------------------------------------------------------------- inputs


def first_day() -> dt.date:
    """The orders source's first partition day (its declaration)."""
    from idem_assets.sample.sources import ORDERS

    assert ORDERS.first_day is not None
    return ORDERS.first_day


def day_of(index: int) -> dt.date:
    """The ``index``-th day of the L1 range."""
    return first_day() + dt.timedelta(days=index)


def tick_key(day_index: int, file_index: int) -> str:
    """An L1 object's path relative to the landing root."""
    return f"orders/date={day_of(day_index).isoformat()}/part-{file_index:03d}.csv"


def tick_body(day_index: int, file_index: int, variant: int = 0) -> bytes:
    """A small orders CSV (5 rows); another ``variant`` has other bytes of the same size."""
    day = day_of(day_index).isoformat()
    lines = ["order_id,customer_id,amount,status,order_date,updated_at"]
    for row in range(5):
        order_id = 1_000_000 + (day_index * FILES_PER_DAY + file_index) * 10 + row
        cents = 1000 + (order_id * 37 + variant) % 9000
        lines.append(
            f"{order_id},{order_id % 997},{cents // 100}.{cents % 100:02d},placed,"
            f"{day},{day}T08:00:00Z"
        )
    return ("\n".join(lines) + "\n").encode()


def orders_day(rows: int) -> Path:
    """A landing root holding one generated orders day of about ``rows`` rows (cached)."""
    from idem_assets.sample.sources import ORDERS
    from idem_assets.sample.synthetic.common import Calendar
    from idem_assets.sample.synthetic.customers import plan_customers
    from idem_assets.sample.synthetic.orders import plan_orders
    from idem_assets.sample.writers import file_bytes, write_atomically

    root = DATA_DIR / f"landing-orders-{rows}"
    done = root / "_COMPLETE"
    if not done.exists():
        shutil.rmtree(root, ignore_errors=True)
        # generate()'s calendar, and the two plans its orders files come from
        calendar = Calendar(first_day(), 1, SEED, rows / ROWS_PER_SCALE, False)
        _, customers_by_day = plan_customers(calendar)
        for planned in plan_orders(calendar, customers_by_day).files:
            write_atomically(root / planned.relpath, file_bytes(planned, ORDERS))
        done.write_text("")
    return root


# --------------------------------------------------------------------------- the server


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
class Server:
    """moto on ``endpoint``; every request it answers is a line of ``log``."""

    endpoint: str
    log: Path
    process: subprocess.Popen[bytes]

    def stop(self) -> None:
        """Stop the server."""
        from idem_assets_tests.fixtures.s3 import stop

        stop(self.process)


def start_server(work: Path, days: int) -> Server:
    """moto with the L1 objects in the bucket, serving once they are all there."""
    from idem_assets_tests.fixtures.s3 import free_port

    port = free_port()
    log = work / "moto.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", __name__, "serve", str(port), str(days)],
            cwd=ROOT,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    server = Server(f"http://127.0.0.1:{port}", log, process)
    deadline = time.monotonic() + STARTUP_SECONDS
    while True:
        if process.poll() is not None:
            raise RuntimeError(f"moto exited: {log.read_text(errors='replace')[-2000:]}")
        try:
            with urllib.request.urlopen(f"{server.endpoint}/moto-api/", timeout=2):
                return server
        except OSError:
            if time.monotonic() > deadline:
                server.stop()
                raise RuntimeError(f"nothing serving on {server.endpoint}") from None
            time.sleep(0.2)


def options(endpoint: str) -> dict[str, str]:
    """Storage options for the local server (plain HTTP, any credentials)."""
    return {"endpoint": endpoint, "allow_http": "true", **CREDENTIALS}


def bucket(endpoint: str) -> Any:
    """The test fixtures' S3Bucket helper, on the benchmark's bucket."""
    from idem_assets_tests.fixtures.s3 import S3Bucket

    return S3Bucket(
        endpoint,
        BUCKET,
        {
            "AWS_ACCESS_KEY_ID": CREDENTIALS["access_key_id"],
            "AWS_SECRET_ACCESS_KEY": CREDENTIALS["secret_access_key"],
        },
    )


# --------------------------------------------------------------------------- counting

_REQUEST = re.compile(r'"(GET|PUT|HEAD|POST|DELETE) (\S+) HTTP/[\d.]+" (\d{3})')


@dataclass(frozen=True)
class Meter:
    """What a sample asks of the server: its log, its process, the size of every object."""

    log: str
    pid: int
    sizes: dict[str, int]  # key (with its prefix) -> bytes


def server_cpu(meter: Meter) -> float:
    """CPU seconds (user + system) the server process has used so far."""
    fields = Path(f"/proc/{meter.pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def mark(meter: Meter) -> tuple[int, float]:
    """Where the server's log ends and its CPU so far (taken just before the timed call)."""
    return Path(meter.log).stat().st_size, server_cpu(meter)


def requests_since(meter: Meter, at: tuple[int, float]) -> dict[str, Any]:
    """LIST and GET requests in the log since ``at``, the bytes GET and the server's CPU."""
    time.sleep(0.2)  # the server logs a request after answering it
    offset, cpu = at
    with open(meter.log, "rb") as handle:
        handle.seek(offset)
        text = handle.read().decode(errors="replace")
    counts: dict[str, Any] = {"lists": 0, "gets": 0, "others": 0, "bytes": 0}
    counts["server_cpu"] = server_cpu(meter) - cpu
    for method, target, _status in _REQUEST.findall(text):
        parts = urlsplit(target)
        key = unquote(parts.path).lstrip("/").removeprefix(f"{BUCKET}/")
        if method == "GET" and "list-type" in parts.query:
            counts["lists"] += 1
        elif method == "GET" and key and key != BUCKET:
            counts["gets"] += 1
            counts["bytes"] += meter.sizes.get(key, 0)
        else:
            counts["others"] += 1
    return counts


def cpu_timed(run: Callable[[dict[str, Any]], None]) -> Callable[[dict[str, Any]], dict]:
    """A contender's run that also reports the CPU its process spent in it (every thread)."""

    @functools.wraps(run)
    def timed(state: dict[str, Any]) -> dict[str, Any]:
        started = time.process_time()
        run(state)
        return {"cpu": time.process_time() - started}

    return timed


def _replace(endpoint: str, variant: int) -> None:
    key = f"{TICKS}/{tick_key(*REPLACED)}"
    bucket(endpoint).put(key, tick_body(*REPLACED, variant=variant))


# --------------------------------------------------------------------------- L1 contenders


def prepare_tick(
    endpoint: str, meter: Meter, lake_dir: str, cursor: str | None, replace: bool
) -> dict[str, Any]:
    """The orders sensor and its context (``cursor``); with ``replace``, one file replaced."""
    import dagster as dg

    from idem_assets.lib import source_sensor
    from idem_assets.resources import LakeResource
    from idem_assets.sample import ORDERS_SOURCE

    if replace:
        _replace(endpoint, 1)
    lake = LakeResource(
        landing_dir=f"s3://{BUCKET}/{TICKS}",
        lake_dir=lake_dir,
        storage_options=options(endpoint),
    )
    context = dg.build_sensor_context(
        cursor=cursor, instance=dg.DagsterInstance.ephemeral(), resources={"lake": lake}
    )
    state = {"sensor": source_sensor(ORDERS_SOURCE), "context": context}
    return {**state, "endpoint": endpoint, "meter": meter, "replaced": replace, "at": mark(meter)}


@cpu_timed
def run_tick(state: dict[str, Any]) -> None:
    """One tick of the sensor."""
    state["result"] = state["sensor"](state["context"])


def verify_tick(state: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    """What the tick asked of the server and for which days it requested runs."""
    result = state.pop("result")
    counts = requests_since(state["meter"], state["at"])
    if state["replaced"]:
        _replace(state["endpoint"], 0)
    return {
        **counts,
        "requested": sorted(r.partition_key for r in result.run_requests),
        "cursor": result.cursor,
    }


def prepare_naive(endpoint: str, meter: Meter, signatures: dict[str, str]) -> dict[str, Any]:
    """The bucket's landing root and the signatures the last tick saw per day."""
    from idem_assets.landing import landing_root

    root = landing_root(f"s3://{BUCKET}/{TICKS}", options(endpoint))
    return {"root": root, "seen": signatures, "meter": meter, "at": mark(meter)}


@cpu_timed
def run_naive(state: dict[str, Any]) -> None:
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
    state["days"] = len(now)


def verify_naive(state: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    """What the tick asked of the server, and the days whose content moved."""
    counts = requests_since(state["meter"], state["at"])
    return {**counts, "requested": state["changed"], "days": state["days"]}


def prepare_listing(endpoint: str, meter: Meter) -> dict[str, Any]:
    """An obstore store on the landing root (the settings the landing zone passes it)."""
    from obstore.store import from_url

    from idem_assets.landing.store import object_store_options

    config, client = object_store_options(options(endpoint))
    store = from_url(f"s3://{BUCKET}/{TICKS}", config=config, client_options=client)
    return {"store": store, "meter": meter, "at": mark(meter)}


@cpu_timed
def run_listing(state: dict[str, Any]) -> None:
    """Every object of the prefix, listed in pages of 1,000."""
    import obstore

    state["objects"] = sum(len(c) for c in obstore.list(state["store"], None, chunk_size=1000))


def verify_listing(state: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    """Objects listed and the requests it took."""
    return {**requests_since(state["meter"], state["at"]), "objects": state["objects"]}


# --------------------------------------------------------------------------- L2 contenders


def prepare_read(
    uri: str, storage: dict[str, str] | None, warm: str, meter: Meter | None
) -> dict[str, Any]:
    """The landing root (a folder or the bucket prefix) of the generated day.

    A small generated day (``warm``, a local folder) is read first, so that what the reader
    imports on its first call (polars, pyarrow's readers) is not billed to the read.
    """
    from idem_assets.landing import landing_root, read_days
    from idem_assets.sample.sources import ORDERS

    read_days(warm, ORDERS, first_day(), first_day() + dt.timedelta(days=1))
    at = mark(meter) if meter else None
    return {"root": landing_root(uri, storage), "meter": meter, "at": at}


@cpu_timed
def run_read(state: dict[str, Any]) -> None:
    """``read_days`` of the one day."""
    from idem_assets.landing import read_days
    from idem_assets.sample.sources import ORDERS

    day = first_day()
    state["batch"] = read_days(state["root"], ORDERS, day, day + dt.timedelta(days=1))


def verify_read(state: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    """Rows, bytes, the batch's signature and its rows' fingerprint (and the requests)."""
    from idem_assets.lake import fingerprint

    counts = requests_since(state["meter"], state["at"]) if state["meter"] else {}
    batch = state.pop("batch")
    return {
        **counts,
        "rows": batch.rows.num_rows,
        "size": sum(f.size for f in batch.files),
        "files": len(batch.files),
        "signature": batch.signature,
        "fingerprint": repr(fingerprint(batch.rows)),
    }


def prepare_download(endpoint: str, meter: Meter) -> dict[str, Any]:
    """An obstore store on the L2 prefix."""
    from obstore.store import from_url

    from idem_assets.landing.store import object_store_options

    config, client = object_store_options(options(endpoint))
    store = from_url(f"s3://{BUCKET}/{DAY_PREFIX}", config=config, client_options=client)
    return {"store": store, "meter": meter, "at": mark(meter)}


@cpu_timed
def run_download(state: dict[str, Any]) -> None:
    """Every object of the day downloaded (listed, then streamed), nothing parsed."""
    import obstore

    size = 0
    for chunk in obstore.list(state["store"], None, chunk_size=1000):
        for meta in chunk:
            for part in obstore.get(state["store"], meta["path"]).stream(min_chunk_size=1 << 20):
                size += len(part)
    state["size"] = size


def verify_download(state: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    """Bytes downloaded and the requests it took."""
    return {**requests_since(state["meter"], state["at"]), "size": state["size"]}


# --------------------------------------------------------------------------- L1


def cpu(stat: Stats, key: str = "cpu") -> float:
    """Median CPU seconds of a contender's samples (its process, or the server's)."""
    return statistics.median(extra.get(key, 0.0) for extra in stat.extra)


def _tick_row(stat: Stats, scenario: str) -> list[Any]:
    low, high = stat.spread
    runs = (
        f"{stat.last('objects', 0):,} listed"
        if stat.name == LISTING
        else len(stat.last("requested", []))
    )
    return [
        scenario,
        stat.name,
        stat.median,
        f"{low:.3f}–{high:.3f}",
        cpu(stat),
        cpu(stat, "server_cpu"),
        stat.last("lists"),
        stat.last("gets"),
        stat.last("bytes") / 2**20,
        runs,
        stat.rss,
    ]


TICK_HEADERS = [
    "tick",
    "contender",
    "median s",
    "min–max s",
    "CPU s",
    "moto CPU s",
    "LIST requests",
    "GET requests",
    "MiB downloaded",
    "runs requested",
    "peak RSS MiB",
]


def _expect(condition: bool, message: str) -> None:
    if not condition:
        raise AssertionError(message)


def _same(stat: Stats, key: str) -> bool:
    return len({repr(extra.get(key)) for extra in stat.extra}) == 1


def run_ticks(
    server: Server, work: Path, days: int, reps: int, naive_reps: int
) -> tuple[list[str], dict[str, Any]]:
    """L1: the markdown lines and the numbers."""
    from idem_assets.landing.files import files_signature

    objects = days * FILES_PER_DAY
    endpoint, lake = server.endpoint, str(work / "lake")
    meter = Meter(
        str(server.log),
        server.process.pid,
        {
            f"{TICKS}/{tick_key(d, f)}": len(tick_body(d, f))
            for d in range(days)
            for f in range(FILES_PER_DAY)
        },
    )
    replaced_day = day_of(REPLACED[0]).isoformat()

    def tick(cursor: str | None, replace: bool) -> Contender:
        return Contender(
            SENSOR,
            prepare_tick,
            run_tick,
            (endpoint, meter, lake, cursor, replace),
            verify_tick,
        )

    # The naive tick's previous signatures: what it saw last, i.e. the bodies put in the
    # bucket (so its quiet tick also checks that it finds every day unchanged).
    signatures = {
        day_of(d).isoformat(): files_signature(
            (tick_key(d, f), hashlib.sha256(tick_body(d, f)).hexdigest())
            for f in range(FILES_PER_DAY)
        )
        for d in range(days)
    }
    listing_alone = Contender(
        LISTING, prepare_listing, run_listing, (endpoint, meter), verify_listing
    )
    compare([listing_alone], 1, METHOD)  # untimed: the fork server and moto warmed up
    # The first tick's cursor is the one the quiet and the replaced ticks start from.
    first = compare([tick(None, False)], reps, METHOD)[0]
    cursor = first.last("cursor")
    quiet, changed, listing = compare(
        [
            tick(cursor, False),
            tick(cursor, True),
            listing_alone,
        ],
        reps,
        METHOD,
    )
    # ~5 ms a GET on moto: tens of seconds a sample at 10,000 objects, so sampled apart.
    (naive,) = compare(
        [Contender(NAIVE, prepare_naive, run_naive, (endpoint, meter, signatures), verify_naive)],
        naive_reps,
        METHOD,
    )
    for stat, want in ((first, days), (quiet, 0), (changed, 1), (naive, 0)):
        got = stat.last("requested", [])
        _expect(len(got) == want, f"{stat.name}: {len(got)} runs requested, expected {want}")
    _expect(changed.last("requested") == [replaced_day], f"{replaced_day} was not requested")
    _expect(naive.last("days") == days, f"the naive tick saw {naive.last('days')} days")
    _expect(listing.last("objects") == objects, "the listing missed objects")
    for stat in (first, quiet, changed, listing, naive):
        _expect(_same(stat, "gets") and _same(stat, "lists"), f"{stat.name}: requests vary")

    rows = [
        _tick_row(first, FIRST),
        _tick_row(quiet, QUIET),
        _tick_row(changed, CHANGED),
        _tick_row(naive, "every tick (measured quiet)"),
        _tick_row(listing, "diagnostic"),
    ]
    pages = quiet.last("lists")
    md = [
        f"### L1. A landing-sensor tick over {objects:,} objects ({days} days × "
        f"{FILES_PER_DAY} small CSV files of orders, s3://{BUCKET}/{TICKS} on moto)",
        "",
        "The orders sensor (`source_sensor(ORDERS_SOURCE)`, ticked with "
        "`dg.build_sensor_context`) against a content-hashing tick. Each sample in a fresh "
        "process, Dagster imported before the timer; after one untimed listing (the server "
        f"and the fork server warmed up): {reps} first tick(s) (the last one's "
        f"cursor starts the others), then {reps} each of the quiet tick, the replaced-file "
        f"tick and the listing alone, alternating, then {naive_reps} of the naive tick (its "
        f"{objects:,} GETs take tens of seconds on moto). CPU s is the sample process's "
        "CPU (user + system, every thread) in the timed call, moto CPU s the server's in the "
        "same window: they hold under load, when wall times do not. Requests and bytes are "
        "those of the timed call, from moto's request log (the same in every sample). The "
        f"replaced file ({tick_key(*REPLACED)}) keeps its size: only its ETag changes.",
        "",
        table(TICK_HEADERS, rows),
        "",
        f"- quiet tick: {quiet.median:.2f} s, {quiet.last('gets')} GETs, {pages} LISTs; the "
        f"naive tick downloads all {naive.last('gets'):,} objects "
        f"({naive.last('bytes') / 2**20:.1f} MiB) on every tick and takes "
        f"{naive.median:.2f} s ({naive.median / quiet.median:.1f}× the quiet tick).",
        f"- where the quiet tick's {quiet.median:.2f} s go: {cpu(quiet):.2f} s of CPU in "
        f"the sensor's process (Dagster's context, {objects:,} listed keys parsed into day "
        f"folders, the cursor); moto spends {cpu(quiet, 'server_cpu'):.2f} s of CPU "
        f"answering its {pages} LISTs, and the listing alone (no project code) takes "
        f"{listing.median:.2f} s wall, ~{listing.median / max(pages, 1) * 1000:.0f} ms a "
        "page (for every page moto scans all the bucket's keys and sorts the prefix's).",
        f"- runs requested: first tick {len(first.last('requested'))} (every day), quiet "
        f"tick 0, after the replacement 1 ({replaced_day}); the naive tick finds the same "
        "by hashing.",
        "",
    ]
    numbers = {
        "objects": objects,
        "seconds": {
            FIRST: first.median,
            QUIET: quiet.median,
            CHANGED: changed.median,
            "naive": naive.median,
            "listing": listing.median,
        },
        "gets": {
            FIRST: first.last("gets"),
            QUIET: quiet.last("gets"),
            CHANGED: changed.last("gets"),
            "naive": naive.last("gets"),
        },
        "lists": pages,
        "naive_mib": naive.last("bytes") / 2**20,
        "cpu": {QUIET: cpu(quiet), "listing": cpu(listing)},
        "server_cpu": {QUIET: cpu(quiet, "server_cpu"), "listing": cpu(listing, "server_cpu")},
    }
    return md, numbers


# --------------------------------------------------------------------------- L2


def run_reads(server: Server, rows: int, reps: int) -> tuple[list[str], dict[str, Any]]:
    """L2: the markdown lines and the numbers."""
    local, warm = orders_day(rows), str(orders_day(WARM_ROWS))
    folder = local / "orders" / f"date={first_day().isoformat()}"
    meter = Meter(
        str(server.log),
        server.process.pid,
        {
            f"{DAY_PREFIX}/{p.relative_to(local).as_posix()}": p.stat().st_size
            for p in folder.iterdir()
        },
    )
    uploaded = bucket(server.endpoint).upload_tree(local / "orders", f"{DAY_PREFIX}/orders")
    _expect(uploaded == len(meter.sizes), f"{uploaded} files uploaded of {len(meter.sizes)}")
    uri = f"s3://{BUCKET}/{DAY_PREFIX}"
    stats = compare(
        [
            Contender(LOCAL, prepare_read, run_read, (str(local), None, warm, None), verify_read),
            Contender(
                BUCKET_READ,
                prepare_read,
                run_read,
                (uri, options(server.endpoint), warm, meter),
                verify_read,
            ),
            Contender(
                DOWNLOAD, prepare_download, run_download, (server.endpoint, meter), verify_download
            ),
        ],
        reps,
        METHOD,
    )
    here, there, download = stats
    same_signature = here.last("signature") == there.last("signature")
    same_rows = here.last("fingerprint") == there.last("fingerprint")
    every = all(_same(s, "signature") and _same(s, "fingerprint") for s in (here, there))
    for stat in (there, download):
        _expect(_same(stat, "gets") and _same(stat, "lists"), f"{stat.name}: requests vary")
    _expect(download.last("size") == here.last("size"), "the download missed bytes")
    table_rows = []
    for s in stats:
        low, high = s.spread
        table_rows.append(
            [
                s.name,
                s.median,
                f"{low:.3f}–{high:.3f}",
                f"{s.median / here.median:.2f}×",
                f"{here.last('rows') / s.median:,.0f}" if s is not download else "—",
                s.last("size") / 1e6 / s.median,
                cpu(s),
                cpu(s, "server_cpu") if s is not here else "—",
                s.rss,
                f"{s.last('lists')} LIST, {s.last('gets')} GET ({s.last('bytes') / 2**20:.1f} MiB)"
                if s is not here
                else "—",
            ]
        )
    mib = here.last("size") / 2**20
    md = [
        f"### L2. Reading one {here.last('rows'):,}-row orders day: local folder vs bucket",
        "",
        f"`read_days(root, ORDERS, day, day + 1)` of {first_day()} from the sample "
        f"generator (seed {SEED}, scale {rows / ROWS_PER_SCALE:.2f}: {here.last('files')} "
        f"files, {mib:.1f} MiB: Parquet, CSV, JSON Lines), with `landing_root(folder)` and "
        f"`landing_root('{uri}', options)`. Samples per contender: {reps}, alternating, "
        "each in a fresh process that first read a 1,000-row day (the reader's lazy "
        "imports); MB/s is the files' bytes (10⁶) over the read's wall time. The last row "
        "is a diagnostic: the same objects only downloaded (obstore), nothing parsed.",
        "",
        table(
            [
                "landing root",
                "median s",
                "min–max s",
                "× local",
                "rows/s",
                "MB/s",
                "CPU s",
                "moto CPU s",
                "peak RSS MiB",
                "requests (moto's log)",
            ],
            table_rows,
        ),
        "",
        f"- the same `batch.signature` from the folder and the bucket: "
        f"{'yes' if same_signature else '**no**'} (`{(here.last('signature') or '')[:16]}…`); "
        "the same row fingerprint (`idem_assets.lake.fingerprint(batch.rows)`): "
        f"{'yes' if same_rows else '**no**'}; both the same in every sample: "
        f"{'yes' if every else '**no**'}.",
        f"- the bucket read took {there.median / here.median:.2f}× the local read's wall "
        f"time and {cpu(there) / cpu(here):.2f}× its CPU ({cpu(there):.2f} s vs "
        f"{cpu(here):.2f} s): parsing and checking the rows is the same work from both "
        f"roots; downloading the {mib:.1f} MiB from moto with nothing parsed takes "
        f"{download.median:.2f} s ({download.last('size') / 1e6 / download.median:.0f} "
        "MB/s).",
        "",
    ]
    numbers = {
        "rows": here.last("rows"),
        "seconds": {LOCAL: here.median, BUCKET_READ: there.median, DOWNLOAD: download.median},
        "equal": same_signature and same_rows and every,
        "bytes": here.last("size"),
        "cpu": {LOCAL: cpu(here), BUCKET_READ: cpu(there)},
        "server_cpu": cpu(there, "server_cpu"),
    }
    return md, numbers


# --------------------------------------------------------------------------- the family


def run_family(
    days: int, rows: int, repetitions: int, naive_repetitions: int = 1
) -> tuple[str, dict[str, Any]]:
    """L1 and L2: the markdown section (without its ## heading) and the numbers."""
    from importlib.metadata import version

    started, load_before = time.perf_counter(), os.getloadavg()
    orders_day(rows), orders_day(WARM_ROWS)  # generated once, cached in benchmarks/.data
    work = Path(tempfile.mkdtemp(prefix="bench-landing-"))
    server = start_server(work, days)
    try:
        tick_md, tick_numbers = run_ticks(server, work, days, repetitions, naive_repetitions)
        read_md, read_numbers = run_reads(server, rows, repetitions)
    finally:
        server.stop()
        shutil.rmtree(work, ignore_errors=True)
    md = [
        f"moto {version('moto')} in its own process on 127.0.0.1 (the S3 API over plain "
        "HTTP, its in-memory backend), reached directly by every sample; requests counted "
        "from its request log. The family took "
        f"{time.perf_counter() - started:.0f} s; load average (1 min) {load_before[0]:.2f} "
        f"before, {os.getloadavg()[0]:.2f} after, on {os.cpu_count()} cores shared with other "
        "work (moto, the sample and anything else running share them).",
        "",
        *tick_md,
        *read_md,
    ]
    load = f"{load_before[0]:.1f} before, {os.getloadavg()[0]:.1f} after"
    return "\n".join(md), {"ticks": tick_numbers, "read": read_numbers, "load": load}


def plot_groups(numbers: dict[str, Any]) -> dict[str, dict[str, float]]:
    """Bar groups for results/landing.png: the three ticks, and the naive tick beside."""
    seconds = numbers["ticks"]["seconds"]
    return {
        FIRST: {SENSOR: seconds[FIRST]},
        QUIET: {SENSOR: seconds[QUIET], NAIVE: seconds["naive"], LISTING: seconds["listing"]},
        CHANGED: {SENSOR: seconds[CHANGED]},
    }


def read_groups(numbers: dict[str, Any]) -> dict[str, dict[str, float]]:
    """Bar groups for results/landing_read.png: the day read from the folder and the bucket."""
    return {f"read a {numbers['read']['rows']:,}-row day": dict(numbers["read"]["seconds"])}


if __name__ == "__main__":
    if sys.argv[1:2] == ["serve"]:
        serve(int(sys.argv[2]), int(sys.argv[3]))
