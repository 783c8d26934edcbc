"""The landing reader on a prefix of a bucket (moto server on loopback) and in a folder.

One tree is laid out both ways: every rule the reader applies to a folder (layouts, hidden
and ignored files, sub-folders, the newest-snapshot rule, gzip, every format, the declared
first day, list_days) gives the same discoveries, signatures and rows from the bucket.
Signatures describe bytes, so they are equal too. Then what only a bucket can do wrong:
a missing bucket or prefix, an unreachable endpoint, missing or refused credentials, and
an object replaced or deleted between its listing and its read.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import gzip
import hashlib
import random
from pathlib import Path

import pytest

from idem_assets.lake import fingerprint
from idem_assets.landing import (
    HashCache,
    LandingFileError,
    LandingRootError,
    day_signature,
    landing_root,
    list_days,
    read_days,
    read_snapshot,
    snapshot_signature,
)
from idem_assets.landing.files import (
    TREE_LISTING_DAYS,
    discover_day,
    discover_days,
    discover_snapshot,
    signature_of,
)
from idem_assets.landing.store import LandingRoot, LocalRoot, ObjectRoot
from idem_assets.sample.generator import generate
from idem_assets.sample.sources import CUSTOMERS, EVENTS, ORDERS, PRODUCT_CATALOG, SOURCES
from idem_assets.sample.tpch import lay_out_tpch
from idem_assets.sources import load_source
from idem_assets.sources.__main__ import main as sources_main
from idem_assets_tests.fixtures.s3 import FaultProxy, IamServer, S3Bucket
from idem_assets_tests.landing.builders import orders_csv, put

pytestmark = pytest.mark.slow

START = dt.date(2024, 3, 1)
DAYS = 4
TPCH_DAYS = 6
TPCH = {
    name: load_source(Path(__file__).parents[2] / "idem_assets/defs/tpch" / name / "defs.yaml")
    for name in ("orders", "lineitem", "customer")
}
ROW = "{id},7,1.00,paid,{day},{day}T10:00:00Z"
# Orders laid out year/month/day instead of date=..., with a first day after the tree's.
DATED = dataclasses.replace(
    ORDERS, name="dated", layout_template="{source}/{yyyy}/{mm}/{dd}", first_day=START
)


def _hand_written(landing: Path) -> None:
    """Files in the shapes exports take, beside the generated ones."""
    day = START.isoformat()
    folder = f"orders/date={day}"
    put(landing, f"{folder}/_SUCCESS", "")
    put(landing, f"{folder}/.part-0001.csv.tmp", "half written")
    put(landing, f"{folder}/notes.txt", "not data")
    put(landing, f"{folder}/backfill/old.csv", orders_csv(ROW.format(id=9, day=day)))
    put(
        landing,
        f"{folder}/zz-extra.csv.gz",
        gzip.compress(orders_csv(ROW.format(id=8, day=day)).encode()),
    )
    for offset in (-1, 0, 1):  # the first one lies before DATED's first day
        when = START + dt.timedelta(days=offset)
        rel = f"dated/{when:%Y}/{when:%m}/{when:%d}/part.csv"
        put(landing, rel, orders_csv(ROW.format(id=100 + offset, day=when.isoformat())))
    put(landing, "dated/2024/13/01/part.csv", "not a day folder")
    put(landing, "product_catalog/catalog-2024-03-09.csv", "product_id,name,category,price\n")


@pytest.fixture(scope="module")
def local_tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The generated shop (with its planted defects), TPC-H from tpchgen-cli, hand-written files."""
    landing = tmp_path_factory.mktemp("tree") / "landing"
    generate(landing, START, DAYS, seed=11)
    lay_out_tpch(landing, 0.01, TPCH_DAYS)
    _hand_written(landing)
    return landing


@pytest.fixture
def both(local_tree: Path, s3_bucket: S3Bucket) -> tuple[LandingRoot, LandingRoot]:
    """The same tree in a folder and under a bucket prefix."""
    uploaded = s3_bucket.upload_tree(local_tree, "exports/landing")
    assert uploaded == sum(1 for p in local_tree.rglob("*") if p.is_file())
    return landing_root(local_tree), landing_root(s3_bucket.uri("exports/landing"))


def _batch_state(batch) -> dict:
    return {
        "rows": fingerprint(batch.rows),
        "quarantine": sorted(
            (r["source_file"], r["row_number"], r["reason"]) for r in batch.quarantine.to_pylist()
        ),
        "files": [(f.relpath, f.format, f.size, f.sha256, f.rows, f.day) for f in batch.files],
        "raw_rows": batch.raw_rows,
        "ignored": dict(batch.ignored_files),
        "dropped": dict(batch.dropped_columns),
        "notes": dict(batch.notes),
        "signature": batch.signature,
    }


DAILY = {
    "orders": ORDERS,
    "customers": CUSTOMERS,
    "events": EVENTS,
    "dated": DATED,
    "tpch_orders": TPCH["orders"].contract(),
    "tpch_lineitem": TPCH["lineitem"].contract(),
}
SNAPSHOTS = {"product_catalog": PRODUCT_CATALOG, "tpch_customer": TPCH["customer"].contract()}


@pytest.mark.parametrize("name", sorted(DAILY))
def test_a_bucket_prefix_reads_like_the_folder_it_was_uploaded_from(both, name):
    local, bucket = both
    contract = DAILY[name]
    days = list_days(local, contract)
    assert days and list_days(bucket, contract) == days
    first, last = days[0], days[-1] + dt.timedelta(days=1)
    if contract.first_day is not None and first < contract.first_day:
        first = contract.first_day
    for day in days:
        if contract.before_first_day(day):
            continue
        assert _listed(bucket, contract, day) == _listed(local, contract, day)
        assert day_signature(bucket, contract, day) == day_signature(local, contract, day)
    want = _batch_state(read_days(local, contract, first, last))
    got = _batch_state(read_days(bucket, contract, first, last))
    assert got == want
    assert want["raw_rows"] > 0


def _listed(root: LandingRoot, contract, day) -> tuple[list, dict]:
    """What a day's discovery says, without the stamps (mtimes here, ETags there)."""
    found = discover_day(root, contract, day)
    return [(f.relpath, f.size) for f in found.files], found.ignored


@pytest.mark.parametrize("name", sorted(SNAPSHOTS))
def test_a_snapshot_in_a_bucket_is_its_newest_object_by_name(both, name):
    local, bucket = both
    contract = SNAPSHOTS[name]
    newest = discover_snapshot(bucket, contract).files
    assert [f.relpath for f in newest] == [
        f.relpath for f in discover_snapshot(local, contract).files
    ]
    assert snapshot_signature(bucket, contract) == snapshot_signature(local, contract)
    assert _batch_state(read_snapshot(bucket, contract)) == _batch_state(
        read_snapshot(local, contract)
    )


def test_the_hand_written_shapes_are_seen_for_what_they_are_in_the_bucket(both):
    _, bucket = both
    day = START.isoformat()
    found = discover_day(bucket, ORDERS, START)
    folder = f"orders/date={day}"
    hidden = "hidden file (name starts with '.' or '_'): in-progress or marker file"
    assert found.ignored == {
        f"{folder}/.part-0001.csv.tmp": hidden,
        f"{folder}/_SUCCESS": hidden,
        f"{folder}/backfill": "sub-folder: only files directly in the folder are read",
        f"{folder}/notes.txt": (
            "unsupported suffix '.txt': expected one of .parquet, .csv, .csv.gz, .jsonl, .jsonl.gz"
        ),
    }
    assert f"{folder}/zz-extra.csv.gz" in [f.relpath for f in found.files]
    # The year/month/day layout: 2024/13/01 names no day; the day before first_day is listed
    # (so sensors can report it) but reading it is refused.
    assert list_days(bucket, DATED) == [
        START - dt.timedelta(days=1),
        START,
        START + dt.timedelta(days=1),
    ]
    with pytest.raises(ValueError, match="before the source's first partition day"):
        read_days(bucket, DATED, START - dt.timedelta(days=1), START)


def test_signatures_are_equal_for_every_day_of_every_source(both):
    local, bucket = both
    compared = 0
    for contract in [*SOURCES.values(), *DAILY.values()]:
        if not contract.daily:
            continue
        for day in list_days(local, contract):
            assert day_signature(bucket, contract, day) == day_signature(local, contract, day)
            compared += 1
    assert compared >= 3 * DAYS + TPCH_DAYS


def test_a_missing_bucket_or_an_empty_prefix_is_an_error_not_an_empty_zone(s3_bucket):
    missing = landing_root("s3://no-such-bucket-here/landing")
    with pytest.raises(
        LandingRootError, match="s3://no-such-bucket-here/landing: the bucket does not exist"
    ):
        list_days(missing, ORDERS)
    empty = landing_root(s3_bucket.uri("typo"))
    with pytest.raises(LandingRootError, match=r"typo: holds no objects: a typo"):
        read_days(empty, ORDERS, START, START + dt.timedelta(days=1))
    # Inside a prefix that exists, a day without files is a valid, empty day.
    s3_bucket.put("landing/_SUCCESS", "")
    batch = read_days(
        landing_root(s3_bucket.uri("landing")), ORDERS, START, START + dt.timedelta(days=1)
    )
    assert (batch.raw_rows, batch.files) == (0, ())


def test_a_missing_local_root_is_an_error_naming_it(tmp_path):
    with pytest.raises(LandingRootError, match=f"{tmp_path / 'nope'}: does not exist"):
        day_signature(tmp_path / "nope", ORDERS, START)
    (tmp_path / "file").write_text("x")
    with pytest.raises(LandingRootError, match="is not a folder"):
        list_days(tmp_path / "file", ORDERS)
    assert day_signature(tmp_path, ORDERS, START) is None  # the root exists: an empty day


def test_an_unreachable_endpoint_names_the_setting_to_fix(monkeypatch):
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIAUNREACHABLE")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "unused")
    root = landing_root(
        "s3://somewhere/landing", {"endpoint": "http://127.0.0.1:9", "allow_http": "true"}
    )
    with pytest.raises(LandingRootError) as error:
        list_days(root, ORDERS)
    assert "s3://somewhere/landing: the endpoint cannot be reached (check AWS_ENDPOINT_URL" in str(
        error.value
    )


def test_missing_credentials_are_named_not_guessed(s3_endpoint, monkeypatch):
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_ENDPOINT_URL", s3_endpoint)
    monkeypatch.setenv("AWS_ALLOW_HTTP", "true")
    # No key anywhere: the store falls back to the instance-metadata service, which no
    # machine here runs (the connection is refused or denied).
    monkeypatch.setenv("AWS_EC2_METADATA_SERVICE_ENDPOINT", "http://127.0.0.1:9")
    with pytest.raises(LandingRootError) as error:
        list_days(landing_root("s3://any-bucket/landing"), ORDERS)
    text = str(error.value)
    assert "s3://any-bucket/landing" in text
    assert "AWS_ACCESS_KEY_ID" in text


def test_credentials_the_server_refuses_are_access_denied(iam_server: IamServer, monkeypatch):
    bucket = iam_server.bucket()
    bucket.put(
        "landing/orders/date=2024-03-01/a.csv", orders_csv(ROW.format(id=1, day="2024-03-01"))
    )
    options = {"endpoint": iam_server.endpoint, "allow_http": "true", "region": "us-east-1"}
    admin = {
        **options,
        "access_key_id": iam_server.admin["AWS_ACCESS_KEY_ID"],
        "secret_access_key": iam_server.admin["AWS_SECRET_ACCESS_KEY"],
    }
    assert list_days(landing_root(bucket.uri("landing"), admin), ORDERS) == [START]
    reader = {
        **options,
        "access_key_id": iam_server.reader["AWS_ACCESS_KEY_ID"],
        "secret_access_key": iam_server.reader["AWS_SECRET_ACCESS_KEY"],
    }
    for credentials in (
        reader,
        {
            **options,
            "access_key_id": "AKIAWRONG00000000000",
            "secret_access_key": "wrong-secret-0123456789",
        },
    ):
        with pytest.raises(LandingRootError) as error:
            list_days(landing_root(bucket.uri("landing"), credentials), ORDERS)
        assert f"{bucket.uri('landing')}: access denied" in str(error.value)
        assert credentials["secret_access_key"] not in str(error.value)


@pytest.fixture(params=["folder", "bucket"])
def landing(request, tmp_path) -> tuple[LandingRoot, object]:
    """A landing root holding one orders day, and a function that rewrites a file in it."""
    day = START.isoformat()
    rel = f"orders/date={day}/a.csv"
    data = orders_csv(ROW.format(id=1, day=day), ROW.format(id=2, day=day))
    if request.param == "folder":
        put(tmp_path, rel, data)
        return LocalRoot(
            tmp_path
        ), lambda body: put(tmp_path, rel, body) if body else (tmp_path / rel).unlink()
    bucket: S3Bucket = request.getfixturevalue("s3_bucket")
    bucket.put(f"landing/{rel}", data)
    bucket.put("landing/_SUCCESS", "")  # the prefix outlives the day's only file
    return ObjectRoot(
        bucket.uri("landing")
    ), lambda body: bucket.put(f"landing/{rel}", body) if body else bucket.delete(f"landing/{rel}")


@pytest.mark.parametrize("change", ["replaced", "deleted"])
def test_a_file_changed_between_listing_and_reading_is_refused_by_name(landing, change):
    root, rewrite = landing
    found = {START: discover_day(root, ORDERS, START)}
    signed = signature_of(root, found[START])
    rewrite(orders_csv(ROW.format(id=3, day=START.isoformat())) if change == "replaced" else None)
    with pytest.raises(LandingFileError) as error:
        read_days(root, ORDERS, START, START + dt.timedelta(days=1), found)
    message = str(error.value)
    assert message.startswith(f"orders/date={START.isoformat()}/a.csv: ")
    assert ("deleted" if change == "deleted" else "re") in message
    # Read afresh, the day has a new signature describing what is there now.
    assert day_signature(root, ORDERS, START) != signed


def test_an_unchanged_object_is_proven_by_its_etag_without_a_download(
    s3_bucket, proxy: FaultProxy, local_tree
):
    s3_bucket.upload_tree(local_tree / "orders", "landing/orders")
    options = {"endpoint": proxy.endpoint, "allow_http": "true"}
    root = landing_root(s3_bucket.uri("landing"), options)
    first = HashCache(settle_seconds=0)
    signatures = [
        signature_of(root, discover_day(root, ORDERS, START + dt.timedelta(days=i)), first)
        for i in range(DAYS)
    ]
    assert first.hashed > 0 and first.reused == 0
    proxy.set(log_requests=True)
    again = HashCache(first.kept(), settle_seconds=0)
    root = landing_root(s3_bucket.uri("landing"), options)
    assert [
        signature_of(root, discover_day(root, ORDERS, START + dt.timedelta(days=i)), again)
        for i in range(DAYS)
    ] == signatures
    assert (again.hashed, again.reused) == (0, first.hashed)
    requests = proxy.requests()
    assert requests and all("list-type=2" in r["path"] for r in requests), requests


def test_an_object_cut_mid_body_is_read_on_from_the_byte_it_stopped_at(
    s3_bucket, proxy: FaultProxy
):
    data = random.Random(3).randbytes(6 << 20)
    s3_bucket.put("landing/big/part-0.bin", data)
    root = landing_root(
        s3_bucket.uri("landing"), {"endpoint": proxy.endpoint, "allow_http": "true"}
    )
    listed = root.folder("big")
    assert listed is not None
    (item,) = listed.files
    proxy.set(cut_first=2, log_requests=True)
    assert hashlib.sha256(b"".join(root.chunks(item))).digest() == hashlib.sha256(data).digest()
    gets = [r for r in proxy.requests() if r["method"] == "GET"]
    cuts = [f for f in proxy.injected() if f["fault"] == "cut"]
    assert len(cuts) == 2 and len(gets) == 3, proxy.injected()
    # Each retry asks only for the bytes not yet received, on the same ETag.
    offsets = [int(g["range"].removeprefix("bytes=").split("-")[0]) for g in gets[1:]]
    assert gets[0].get("range") is None and 0 < offsets[0] < offsets[1] < len(data), gets


def test_inspect_reads_a_bucket_prefix(both, s3_bucket, capsys):
    declaration = Path(__file__).parents[2] / "idem_assets/defs/orders/defs.yaml"
    code = sources_main(
        [
            "inspect",
            str(declaration),
            "--landing",
            s3_bucket.uri("exports/landing"),
            "--start",
            START.isoformat(),
        ]
    )
    assert code == 0
    out = capsys.readouterr().out
    assert '"raw_rows":' in out and f"orders/date={START.isoformat()}/zz-extra.csv.gz" in out
    assert (
        sources_main(
            [
                "inspect",
                str(declaration),
                "--landing",
                "s3://no-such-bucket-here/x",
                "--start",
                START.isoformat(),
            ]
        )
        == 2
    )
    assert "the bucket does not exist" in capsys.readouterr().err


def test_bytes_hash_the_same_in_both_places(both):
    local, bucket = both
    found = discover_day(bucket, ORDERS, START)
    for item in found.files:
        expected = hashlib.sha256((Path(local.uri) / item.relpath).read_bytes()).hexdigest()
        assert bucket.sha256(item) == expected
    parquet = next(f for f in found.files if f.relpath.endswith(".parquet"))
    assert b"".join(bucket.chunks(parquet))[:4] == b"PAR1"


@pytest.mark.parametrize("name", sorted(DAILY))
def test_many_days_are_discovered_from_one_tree_listing_as_day_by_day(both, name):
    """Past TREE_LISTING_DAYS days, discover_days lists the source's tree once: the same
    files, ignored files and empty days as a listing per day, in a folder and a bucket."""
    contract = DAILY[name]
    first = list_days(both[0], contract)[0] - dt.timedelta(days=5)
    days = [first + dt.timedelta(days=n) for n in range(TREE_LISTING_DAYS)]
    for root in both:
        one_by_one = {day: discover_day(root, contract, day) for day in days}
        assert discover_days(root, contract, days) == one_by_one
        assert any(found.files for found in one_by_one.values())
