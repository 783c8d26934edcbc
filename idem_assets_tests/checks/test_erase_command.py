"""``idem-assets erase``: a customer erased from every table declaring customer_id, kept out
of a replay of all landing history, a check red when it comes back, and no file on storage
holding it once the retention has passed and the files are vacuumed."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import dagster as dg
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable, write_deltalake

from idem_assets.lake import read_rows
from idem_assets.lake.erasure import key_digest
from idem_assets.sample.generator import generate
from idem_assets_tests.checks.test_check_command import COMMAND, ROOT, _env
from idem_assets_tests.harness import START, day_keys

KEYS = day_keys(4)
RANGE = f"{KEYS[0]}...{KEYS[-1]}"
SELECT = "key:orders or key:customers"
ERASABLE = ("orders", "customers")


def _run(tmp_path: Path, *args: str, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(COMMAND), *args],
        cwd=ROOT,
        env={**_env(tmp_path), **env},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def _holders(tmp_path: Path, customer: int) -> dict[str, int]:
    """Table -> rows holding the customer now."""
    out = {}
    for name in ERASABLE:
        ids = read_rows(DeltaTable(str(tmp_path / "lake" / name))).column("customer_id")
        out[name] = ids.to_pylist().count(customer)
    return out


def _shows(text: str, customer: int) -> bool:
    """Whether ``text`` shows the value as a value (paths, digests and times hold digits)."""
    return any(
        form in text for form in (f"={customer}", f": {customer}", f"'{customer}'", f" {customer} ")
    )


def _files_holding(tmp_path: Path, customer: int, quarantine_only: bool = False) -> list[Path]:
    """Every Parquet file under the lake (any version's, tombstones too) holding it: in a
    customer_id column, or in a quarantined row's raw record of orders or customers."""
    found = []
    for path in sorted((tmp_path / "lake").rglob("*.parquet")):
        table = pq.read_table(path)
        if "customer_id" in table.column_names and not quarantine_only:
            if customer in table.column("customer_id").to_pylist():
                found.append(path)
        elif "raw_record" in table.column_names:
            # The quarantine, partitioned by source=<name>/
            source = next((p[len("source=") :] for p in path.parts if p.startswith("source=")), "")
            records = [json.loads(r) for r in table.column("raw_record").to_pylist()]
            if source in ERASABLE and any(
                isinstance(r, dict) and str(r.get("customer_id")) == str(customer) for r in records
            ):
                found.append(path)
    return found


@pytest.fixture(scope="module")
def erased(tmp_path_factory):
    """Four days of orders and customers, then one customer of both erased."""
    tmp_path = tmp_path_factory.mktemp("erase")
    generate(tmp_path / "landing", START, 4, seed=7)
    done = _run(tmp_path, "check", "--select", SELECT, "--partition-range", RANGE, "--materialize")
    assert done.returncode == 0, done.stdout + done.stderr[-2000:]
    orders = read_rows(DeltaTable(str(tmp_path / "lake" / "orders")))
    customers = set(
        read_rows(DeltaTable(str(tmp_path / "lake" / "customers")))
        .column("customer_id")
        .to_pylist()
    )
    customer = next(c for c in orders.column("customer_id").to_pylist() if c in customers)
    assert all(_holders(tmp_path, customer).values())
    erase = _run(tmp_path, "erase", "--key", f"customer_id={customer}")
    assert erase.returncode == 0, erase.stdout + erase.stderr[-2000:]
    return tmp_path, customer, erase


def test_erase_removes_the_key_from_every_declaring_table_and_never_prints_it(erased):
    tmp_path, customer, erase = erased
    digest = key_digest("customer_id", str(customer))
    assert f"erased key {digest} (customer_id)" in erase.stdout
    assert f"customer_id={customer}" not in erase.stdout + erase.stderr
    assert "data file(s) hold it" in erase.stdout and "removed by a commit" in erase.stdout
    assert _holders(tmp_path, customer) == {"orders": 0, "customers": 0}
    for name in ERASABLE:
        newest = DeltaTable(str(tmp_path / "lake" / name)).history(1)[0]
        assert newest["idem.erased"] == digest


def test_a_replay_of_all_landing_history_keeps_it_out_and_every_check_passes(erased):
    tmp_path, customer, _ = erased
    again = _run(tmp_path, "erase", "--key", f"customer_id={customer}")
    assert again.returncode == 0 and "no row holds it" in again.stdout
    # Every day loaded again from its landing files, as a rerun or backfill would.
    done = _run(tmp_path, "check", "--select", SELECT, "--partition-range", RANGE, "--materialize")
    assert done.returncode == 0, done.stdout + done.stderr[-2000:]
    assert _holders(tmp_path, customer) == {"orders": 0, "customers": 0}
    rows = [line.split() for line in done.stdout.splitlines()]
    checked = {(r[0], r[2]) for r in rows if len(r) > 3 and r[3] == "yes"}
    for name in ERASABLE:
        for check in ("erased_keys_absent", "rerun_equality", "conservation"):
            assert (name, check) in checked, done.stdout


def test_the_key_written_back_behind_the_lake_turns_its_check_red(erased, tmp_path):
    source, customer, _ = erased
    # A copy of the lake, so the other tests keep theirs.
    shutil.copytree(source / "lake", tmp_path / "lake")
    shutil.copytree(source / "landing", tmp_path / "landing")
    shutil.copy(source / "state.db", tmp_path / "state.db")
    customers = DeltaTable(str(tmp_path / "lake" / "customers"))
    stored = read_rows(customers)
    back = stored.slice(0, 1).set_column(
        stored.schema.get_field_index("customer_id"),
        "customer_id",
        pa.array([customer], stored.schema.field("customer_id").type),
    )
    write_deltalake(customers, back, mode="append")
    done = _run(tmp_path, "check", "--select", "key:customers", "--partition", KEYS[0])
    assert done.returncode == 1, done.stdout + done.stderr[-2000:]
    rows = [line.split()[:4] for line in done.stdout.splitlines()]
    assert ["customers", KEYS[0], "erased_keys_absent", "NO"] in rows, done.stdout
    assert str(customer) not in done.stdout.replace(KEYS[0], "")


def _listed(stdout: str, lake: Path) -> list[Path]:
    """The files a status lists (``<table>: N data file(s) hold it`` then a line per file)."""
    found, table = [], None
    for line in stdout.splitlines():
        if line.startswith("  ") and line.rstrip().endswith("data file(s) hold it"):
            table = line.strip().split(":")[0]
        elif line.startswith("    ") and table is not None:
            found.append(lake / table / line.split()[0])
    return sorted(found)


def test_status_lists_every_file_a_scan_finds_and_vacuum_now_leaves_none(erased, tmp_path):
    source, customer, _ = erased
    shutil.copytree(source / "lake", tmp_path / "lake")
    shutil.copytree(source / "landing", tmp_path / "landing")
    shutil.copy(source / "state.db", tmp_path / "state.db")
    # A rerun of every day after the erase: more versions, none of them holding the key.
    done = _run(tmp_path, "check", "--select", SELECT, "--partition-range", RANGE, "--materialize")
    assert done.returncode == 0, done.stdout + done.stderr[-2000:]
    held = _files_holding(tmp_path, customer)
    assert held  # the erase left them for the retention
    status = _run(tmp_path, "erase", "--status")
    assert status.returncode == 0, status.stdout + status.stderr[-2000:]
    assert _listed(status.stdout, tmp_path / "lake") == held, status.stdout
    assert not _shows(status.stdout, customer)
    now = _run(tmp_path, "erase", "--vacuum-now")
    assert now.returncode == 0, now.stdout + now.stderr[-2000:]
    assert "retention overridden" in now.stdout and "time travel" in now.stdout
    assert _files_holding(tmp_path, customer) == []
    assert "no data file holds it any more (since " in now.stdout
    status = _run(tmp_path, "erase", "--status")
    assert "no data file holds it any more (since " in status.stdout
    assert "hold it\n" not in status.stdout and _listed(status.stdout, tmp_path / "lake") == []
    # Every table still reads, at its newest version, with the rows it had.
    for name in ERASABLE:
        assert read_rows(DeltaTable(str(tmp_path / "lake" / name))).num_rows > 0


def _quarantined(lake: Path) -> set[str]:
    """The customer ids in raw records of quarantined orders and customers rows."""
    rows = read_rows(DeltaTable(str(lake / "quarantine")))
    return {
        str(record["customer_id"])
        for source, text in zip(
            rows.column("source").to_pylist(), rows.column("raw_record").to_pylist(), strict=True
        )
        if source in ERASABLE
        and isinstance(record := json.loads(text), dict)
        and "customer_id" in record
    }


def test_a_quarantined_row_holding_the_key_is_erased_and_listed_too(erased, tmp_path):
    source, _, _ = erased
    shutil.copytree(source / "lake", tmp_path / "lake")
    shutil.copy(source / "state.db", tmp_path / "state.db")
    held = sorted(_quarantined(tmp_path / "lake"))
    assert held  # the generator plants bad rows; some name a customer
    customer = int(held[0])
    erase = _run(tmp_path, "erase", "--key", f"customer_id={customer}")
    assert erase.returncode == 0, erase.stdout + erase.stderr[-2000:]
    assert "  quarantine: 1 row(s) deleted in version" in erase.stdout, erase.stdout
    assert str(customer) not in _quarantined(tmp_path / "lake")
    # The quarantine's removed file is listed like any table's, and found by the scan.
    removed = _files_holding(tmp_path, customer, quarantine_only=True)
    assert removed and set(removed) <= set(_listed(erase.stdout, tmp_path / "lake"))
    now = _run(tmp_path, "erase", "--vacuum-now")
    assert now.returncode == 0, now.stdout + now.stderr[-2000:]
    assert _files_holding(tmp_path, customer) == []


def test_status_names_events_of_dagster_s_log_that_show_an_erased_value(erased, tmp_path):
    source, customer, _ = erased
    home = tmp_path / "home"
    home.mkdir()
    (home / "dagster.yaml").write_text("")
    with dg.DagsterInstance.from_config(str(home)) as instance:
        # An event written by code of its own, before the erase, showing the value.
        instance.report_runless_asset_event(
            dg.AssetMaterialization("customers", metadata={"customer_id": customer})
        )
    status = _run(source, "erase", "--status", DAGSTER_HOME=str(home))
    assert status.returncode == 0, status.stdout + status.stderr[-2000:]
    digest = key_digest("customer_id", str(customer))
    assert (
        f"run (runless): ASSET_MATERIALIZATION customers (customer_id) holds erased key(s) {digest}"
        in status.stdout
    )
    assert "1 event(s) of 1 run(s) hold erased values" in status.stdout
    assert not _shows(status.stdout, customer)
    without = _run(source, "erase", "--status")
    assert "Dagster's event log: not read (set DAGSTER_HOME" in without.stdout


def test_usage_errors_exit_2(erased):
    source, _, _ = erased
    bad = _run(source, "erase", "--key", "customer_id")
    assert bad.returncode == 2 and "column=value" in bad.stderr
    unknown = _run(source, "erase", "--key", "customer_id=1", "--tables", "events")
    assert unknown.returncode == 2 and "not lake tables declaring customer_id" in unknown.stderr
    nobody = _run(source, "erase", "--key", "email=a@b.c")
    assert nobody.returncode == 2 and "no lake table declares email" in nobody.stderr
