"""The generator: byte-for-byte determinism, the defects it plants, and reading it back."""

from __future__ import annotations

import datetime as dt
import hashlib
import json
from collections import defaultdict
from pathlib import Path

import pytest

from idem_assets.landing import (
    day_signature,
    list_days,
    read_days,
    read_snapshot,
    snapshot_signature,
)
from idem_assets.sample.__main__ import main
from idem_assets.sample.generator import generate, plan, write_late_orders
from idem_assets.sample.sources import CUSTOMERS, EVENTS, ORDERS, PRODUCT_CATALOG, SOURCES
from idem_assets_tests.landing.builders import assert_conserved

START = dt.date(2024, 3, 1)
DAYS = 8
END = START + dt.timedelta(days=DAYS)


def _tree(root: Path) -> dict[str, str]:
    return {
        p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


@pytest.fixture(scope="module")
def landing(tmp_path_factory) -> tuple[Path, dict]:
    root = tmp_path_factory.mktemp("landing")
    summary = generate(root, START, DAYS, seed=7, scale=0.5)
    return root, summary.as_dict()


def test_same_seed_same_bytes_and_signatures(tmp_path, landing):
    root, _ = landing
    again = tmp_path / "again"
    generate(again, START, DAYS, seed=7, scale=0.5)
    assert _tree(again) == _tree(root)
    for contract in (ORDERS, CUSTOMERS, EVENTS):
        days = list_days(root, contract)
        assert days == [START + dt.timedelta(days=k) for k in range(DAYS)]
        assert [day_signature(again, contract, d) for d in days] == [
            day_signature(root, contract, d) for d in days
        ]
    assert snapshot_signature(again, PRODUCT_CATALOG) == snapshot_signature(root, PRODUCT_CATALOG)


def test_different_seed_different_data(tmp_path, landing):
    root, _ = landing
    other = tmp_path / "other"
    generate(other, START, DAYS, seed=8, scale=0.5)
    for contract in (ORDERS, CUSTOMERS, EVENTS):
        for k in range(DAYS):
            day = START + dt.timedelta(days=k)
            assert day_signature(other, contract, day) != day_signature(root, contract, day)
    assert snapshot_signature(other, PRODUCT_CATALOG) != snapshot_signature(root, PRODUCT_CATALOG)


def test_every_row_is_accounted_for_and_only_planted_rows_are_quarantined(landing):
    root, summary = landing
    total = 0
    for contract in (ORDERS, CUSTOMERS, EVENTS):
        batch = read_days(root, contract, START, END)
        assert_conserved(batch, contract)
        assert batch.raw_rows == summary["rows"][contract.name]
        assert len(batch.files) == summary["files"][contract.name]
        total += batch.quarantine.num_rows
    orders = read_days(root, ORDERS, START, END)
    reasons = orders.quarantine.column("reason").to_pylist()
    defects = summary["defects"]
    # A row without a version cannot be stored faithfully: quarantined.
    assert (
        sum("updated_at: version column is null" in r for r in reasons)
        == defects["orders_missing_version"]
        == 2
    )
    assert total == len(reasons) == 2
    # Unknown statuses and negative amounts are business rules: loaded, for checks to report.
    rows = orders.rows.to_pylist()
    assert sum(r["status"] == "lost" for r in rows) == defects["orders_unknown_status"] == 2
    assert sum(r["amount"] < 0 for r in rows) == defects["orders_negative_amount"] == 2


def test_clean_generation_quarantines_nothing(tmp_path):
    summary = generate(tmp_path, START, 6, seed=3, clean=True, scale=0.2)
    for contract in (ORDERS, CUSTOMERS, EVENTS):
        batch = read_days(tmp_path, contract, START, START + dt.timedelta(days=6))
        assert batch.quarantine.num_rows == 0
        assert batch.raw_rows == summary.rows[contract.name]
    assert "orders_unknown_status" not in summary.defects


def _rows_by_file(batch) -> list[tuple[str, dict]]:
    """Valid rows paired with their file (quarantined rows are skipped in file order)."""
    bad = defaultdict(set)
    for q in batch.quarantine.to_pylist():
        bad[q["source_file"]].add(q["row_number"])
    rows = iter(batch.rows.to_pylist())
    out = []
    for file in batch.files:
        for number in range(1, file.rows + 1):
            if number not in bad[file.relpath]:
                out.append((file.relpath, next(rows)))
    return out


def test_orders_carry_redeliveries_duplicates_and_late_files(landing):
    root, summary = landing
    defects = summary["defects"]
    per_folder: dict[dt.date, dict[str, list[dict]]] = defaultdict(lambda: defaultdict(list))
    for k in range(DAYS):
        day = START + dt.timedelta(days=k)
        batch = read_days(root, ORDERS, day, day + dt.timedelta(days=1))
        for relpath, row in _rows_by_file(batch):
            per_folder[day][relpath.rsplit("/", 1)[1]].append(row)
    redelivered = duplicates = late_files = late_updates = 0
    for k, (day, files) in enumerate(sorted(per_folder.items())):
        first = {
            r["order_id"]: r
            for name in ("part-000", "part-001")
            for f, rows in files.items()
            if f.startswith(name)
            for r in rows
        }
        again = [r for f, rows in files.items() if f.startswith("part-002") for r in rows]
        for row in again:
            original = first[row["order_id"]]
            assert row["order_date"] == original["order_date"] == day
            if row == original:
                duplicates += 1
            else:
                assert row["updated_at"] > original["updated_at"]
                assert row["status"] != original["status"] or row["status"] in (
                    "cancelled",
                    "refunded",
                )
                redelivered += 1
        for name, rows in files.items():
            if name.startswith("late-"):
                arrived = dt.date.fromisoformat(name[len("late-") :].split(".")[0])
                assert arrived == day + dt.timedelta(days=3)
                assert all(
                    r["updated_at"].date() == arrived and r["order_date"] == day for r in rows
                )
                late_files += 1
                late_updates += len(rows)
        assert k < DAYS - 3 or not any(n.startswith("late-") for n in files)
    assert (redelivered, duplicates) == (
        defects["orders_redelivered"],
        defects["orders_exact_duplicates"],
    )
    assert redelivered >= DAYS * 10 and duplicates >= DAYS
    assert (late_files, late_updates) == (DAYS - 3, defects["orders_late_updates"])


def test_files_mix_formats_forms_and_extra_columns(landing):
    root, summary = landing
    batch = read_days(root, ORDERS, START, END)
    for k in range(DAYS):
        folder = f"orders/date={START + dt.timedelta(days=k)}/"
        formats = {f.format for f in batch.files if f.relpath.startswith(folder)}
        assert formats == {"parquet", "csv", "jsonl"}
    assert len(batch.dropped_columns) == summary["defects"]["orders_extra_column_files"]
    assert {c for cols in batch.dropped_columns.values() for c in cols} == {"channel"}
    text = "".join(p.read_text() for p in root.glob("orders/*/*.csv"))
    text += "".join(p.read_text() for p in root.glob("orders/*/*.jsonl"))
    assert "Z," in text or 'Z"' in text
    assert "+02:00" in text
    assert any(len(v) == 19 for v in _timestamps(text))  # naive, no offset, no fraction


def _timestamps(text: str) -> list[str]:
    import re

    return re.findall(r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(?=[,\"\n])", text)


def test_customers_have_changes_and_a_late_older_change_each_day(landing):
    root, summary = landing
    seen: dict[int, dt.datetime] = {}
    late_older = 0
    for k in range(DAYS):
        day = START + dt.timedelta(days=k)
        rows = read_days(root, CUSTOMERS, day, day + dt.timedelta(days=1)).rows.to_pylist()
        for row in rows:
            if row["customer_id"] in seen and row["updated_at"] < seen[row["customer_id"]]:
                assert row["email"].startswith("stale.")
                late_older += 1
        for row in rows:
            previous = seen.get(row["customer_id"])
            seen[row["customer_id"]] = max(previous or row["updated_at"], row["updated_at"])
    assert late_older == summary["defects"]["customers_late_older_changes"] == DAYS - 2


def test_events_have_late_and_reingested_events(landing):
    root, summary = landing
    rows = []
    for k in range(DAYS):
        day = START + dt.timedelta(days=k)
        for row in read_days(root, EVENTS, day, day + dt.timedelta(days=1)).rows.to_pylist():
            assert row["ingested_at"].date() == day
            rows.append({**row, "folder": day})
    by_id = defaultdict(list)
    for row in rows:
        by_id[row["event_id"]].append(row)
    again = [versions for versions in by_id.values() if len(versions) > 1]
    for first, second in again:
        assert second["folder"] == first["folder"] + dt.timedelta(days=1)
        assert second["ingested_at"] > first["ingested_at"]
        keep = ("customer_id", "event_type", "event_time", "payload")
        assert [first[c] for c in keep] == [second[c] for c in keep]
    assert len(again) == summary["defects"]["events_reingested"] > 0
    firsts = [versions[0] for versions in by_id.values()]
    late = [r for r in firsts if r["event_time"].date() < r["folder"]]
    assert all(r["event_time"].date() == r["folder"] - dt.timedelta(days=1) for r in late)
    assert len(late) == summary["defects"]["events_late"] > 0
    assert all(json.loads(r["payload"])["page"].startswith("/products/") for r in rows)


def test_catalog_snapshots_every_seven_days(landing):
    root, summary = landing
    names = sorted(p.name for p in (root / "product_catalog").iterdir())
    assert names == ["catalog-2024-03-01.csv", "catalog-2024-03-08.csv"]
    newest = read_snapshot(root, PRODUCT_CATALOG)
    assert newest.files[0].relpath == "product_catalog/catalog-2024-03-08.csv"
    assert newest.rows.num_rows == 25 + summary["defects"]["catalog_new_products"]
    assert summary["defects"]["catalog_snapshots"] == 2


def test_generated_values_read_back_exactly(landing):
    root, _ = landing
    plans = plan(START, DAYS, 7, scale=0.5)
    for source, source_plan in plans.items():
        contract = SOURCES[source]
        expected = sorted(
            tuple(row[c] for c in contract.columns)
            for f in source_plan.files
            for row in f.rows
            if source != "orders" or row["updated_at"] is not None
        )
        if contract.daily:
            batch = read_days(root, contract, START, END)
            got = sorted(tuple(r.values()) for r in batch.rows.to_pylist())
        else:
            snapshot = read_snapshot(root, PRODUCT_CATALOG)
            got = sorted(tuple(r.values()) for r in snapshot.rows.to_pylist())
            newest = source_plan.files[-1]
            expected = sorted(tuple(row[c] for c in contract.columns) for row in newest.rows)
        assert got == expected, source


def test_write_late_orders_changes_only_that_partition(tmp_path):
    generate(tmp_path, START, 5, seed=11, scale=0.2)
    day = START + dt.timedelta(days=1)
    before = {d: day_signature(tmp_path, ORDERS, d) for d in list_days(tmp_path, ORDERS)}
    old = read_days(tmp_path, ORDERS, day, day + dt.timedelta(days=1)).rows.to_pylist()
    path = write_late_orders(tmp_path, day, seed=1, n=4)
    assert path.parent == tmp_path / "orders" / f"date={day}"
    after = {d: day_signature(tmp_path, ORDERS, d) for d in list_days(tmp_path, ORDERS)}
    assert [d for d in after if after[d] != before[d]] == [day]
    batch = read_days(tmp_path, ORDERS, day, day + dt.timedelta(days=1))
    late = [r for f, r in _rows_by_file(batch) if f.endswith(path.name)]
    assert len(late) == 4 and len({r["order_id"] for r in late}) == 4
    newest_before = max(r["updated_at"] for r in old)
    existing = {r["order_id"] for r in old}
    assert all(
        r["order_id"] in existing and r["updated_at"] > newest_before and r["order_date"] == day
        for r in late
    )


def test_write_late_orders_is_repeatable_and_checks_its_input(tmp_path):
    generate(tmp_path / "a", START, 2, seed=11, scale=0.1)
    generate(tmp_path / "b", START, 2, seed=11, scale=0.1)
    first = write_late_orders(tmp_path / "a", START, seed=2, n=3)
    same = write_late_orders(tmp_path / "b", START, seed=2, n=3)
    assert first.name == same.name and first.read_bytes() == same.read_bytes()
    second = write_late_orders(tmp_path / "a", START, seed=2, n=3)
    assert second != first  # the folder changed, so a further, newer file is added
    with pytest.raises(ValueError, match="no orders files"):
        write_late_orders(tmp_path / "a", START + dt.timedelta(days=9), seed=2, n=1)
    with pytest.raises(ValueError, match="n must be between 1 and"):
        write_late_orders(tmp_path / "a", START, seed=2, n=10_000)


def test_generate_rejects_nonsense(tmp_path):
    with pytest.raises(ValueError, match="days must be at least 1"):
        generate(tmp_path, START, 0, seed=1)
    with pytest.raises(ValueError, match="scale must be positive"):
        generate(tmp_path, START, 1, seed=1, scale=0)


def test_cli_generate_inspect_and_late_orders(tmp_path, capsys):
    from idem_assets.sample.sources import DEFS_DIR
    from idem_assets.sources.__main__ import main as source_main

    out = tmp_path / "landing"
    args = [
        "generate",
        "--out",
        str(out),
        "--start",
        "2024-03-01",
        "--days",
        "4",
        "--seed",
        "5",
        "--scale",
        "0.1",
    ]
    assert main(args) == 0
    summary = json.loads(capsys.readouterr().out)
    assert (
        summary["rows"]["orders"]
        == read_days(out, ORDERS, START, START + dt.timedelta(days=4)).raw_rows
    )
    orders_yaml, catalog_yaml = (
        str(DEFS_DIR / "orders" / "defs.yaml"),
        str(DEFS_DIR / "catalog" / "defs.yaml"),
    )
    assert (
        source_main(
            ["inspect", orders_yaml, "--landing", str(out), "--start", "2024-03-01", "--days", "3"]
        )
        == 0
    )
    inspected = json.loads(capsys.readouterr().out)
    assert inspected["quarantine_by_first_column"] == {"updated_at": 1}
    assert inspected["rows_breaking_rules"] == {"amount_non_negative": 1, "status_allowed": 1}
    assert (
        inspected["signature"]
        == read_days(out, ORDERS, START, START + dt.timedelta(days=3)).signature
    )
    assert source_main(["inspect", catalog_yaml, "--landing", str(out)]) == 0
    assert json.loads(capsys.readouterr().out)["files"] == [
        "product_catalog/catalog-2024-03-01.csv"
    ]
    assert main(["late-orders", "--landing", str(out), "--day", "2024-03-02", "--n", "2"]) == 0
    assert Path(capsys.readouterr().out.strip()).is_file()
    assert main(["late-orders", "--landing", str(out), "--day", "2024-04-01"]) == 2
    assert "no orders files for 2024-04-01" in capsys.readouterr().err
