"""The YAML-only TPC-H domain, materialized twice through the real code location.

tpchgen-cli's data is laid out in a landing zone, then ``tpch_orders`` and
``tpch_lineitem`` run as one single-run backfill over the whole window and
``tpch_customer`` as its snapshot, each with every check, twice. The second pass must
reproduce the first without a new Delta commit.
"""

import datetime as dt
import gzip
import io
from dataclasses import dataclass
from pathlib import Path

import dagster as dg
import pyarrow.parquet as pq
import pytest

from idem_assets.lake import Fingerprint, read_rows
from idem_assets.landing.quarantine import QUARANTINE_TABLE
from idem_assets.resources import CheckpointResource, LakeResource
from idem_assets.sample.tpch import TPCH_FIRST_DAY
from idem_assets.sources import load_source
from idem_assets_tests.harness import Project, materialization_metadata
from idem_assets_tests.tpch.conftest import DAYS

DEFS = Path(__file__).resolve().parents[2] / "idem_assets" / "defs" / "tpch"
DAILY = ("tpch_orders", "tpch_lineitem")
SNAPSHOT = "tpch_customer"
TABLES = (*DAILY, SNAPSHOT)
DECLARATIONS = {"tpch_orders": "orders", "tpch_lineitem": "lineitem", "tpch_customer": "customer"}
LANDING_CHECKS = {"rerun_equality", "unique_natural_key", "conservation", "quarantine_share"}
LAST_DAY = TPCH_FIRST_DAY + dt.timedelta(days=DAYS - 1)


@dataclass(frozen=True)
class Pass:
    """One materialization of the three assets: runs, metadata and the tables after it."""

    runs: tuple[dg.ExecuteInProcessResult, ...]
    metadata: dict[str, dict]
    versions: dict[str, int]
    fingerprints: dict[str, Fingerprint]
    rows: dict[str, int]


def materialize_tpch(project: Project) -> Pass:
    """The daily assets over the window in one run, then the customer snapshot."""
    defs = project.definitions()
    daily = [dg.AssetKey(name) for name in DAILY]
    tags = {
        "dagster/asset_partition_range_start": TPCH_FIRST_DAY.isoformat(),
        "dagster/asset_partition_range_end": LAST_DAY.isoformat(),
    }
    backfill = defs.resolve_implicit_job_def_def_for_assets(daily).execute_in_process(
        tags=tags, instance=project.instance, asset_selection=daily, raise_on_error=False
    )
    snapshot = [dg.AssetKey(SNAPSHOT)]
    replace = defs.resolve_implicit_job_def_def_for_assets(snapshot).execute_in_process(
        instance=project.instance, asset_selection=snapshot, raise_on_error=False
    )
    runs = (backfill, replace)
    metadata = {k: v for run in runs for k, v in materialization_metadata(run).items()}
    return Pass(
        runs=runs,
        metadata=metadata,
        versions={t: project.version(t) for t in TABLES},
        fingerprints={t: project.table_fingerprint(t) for t in TABLES},
        rows={t: read_rows(project.lake.table(t).open()).num_rows for t in TABLES},
    )


def landing_rows(landing: Path) -> dict[str, int]:
    """Data rows in the laid-out files, counted from the files themselves."""
    tpch = landing / "tpch"
    orders = sum(pq.read_metadata(p).num_rows for p in (tpch / "orders").rglob("*.parquet"))
    lineitem = sum(
        len(io.BytesIO(gzip.decompress(p.read_bytes())).readlines()) - 1
        for p in (tpch / "lineitem").rglob("*.csv.gz")
    )
    [customer] = (tpch / "customer").glob("*.csv")
    return {
        "tpch_orders": orders,
        "tpch_lineitem": lineitem,
        "tpch_customer": len(customer.read_bytes().splitlines()) - 1,
    }


@pytest.fixture(scope="module")
def tpch_project(tpch_landing, tmp_path_factory) -> Project:
    """An empty lake reading the laid-out TPC-H landing zone (DAYS days at SCALE)."""
    root = tmp_path_factory.mktemp("tpch_project")
    lake = LakeResource(landing_dir=str(tpch_landing.out_dir), lake_dir=str(root / "lake"))
    checkpoint = CheckpointResource(url=f"sqlite:///{root / 'state' / 'checkpoint.db'}")
    return Project(
        root=root, lake=lake, checkpoint=checkpoint, instance=dg.DagsterInstance.ephemeral()
    )


@pytest.fixture(scope="module")
def passes(tpch_project) -> tuple[Pass, Pass]:
    """The same materialization twice on unchanged landing files."""
    return materialize_tpch(tpch_project), materialize_tpch(tpch_project)


def test_both_passes_succeed_and_every_check_passes(passes):
    for run_pass in passes:
        evaluated: dict[str, set[str]] = {t: set() for t in TABLES}
        judged: dict[str, set[str]] = {t: set() for t in TABLES}
        for run in run_pass.runs:
            assert run.success
            for evaluation in run.get_asset_check_evaluations():
                asset = evaluation.asset_key.to_user_string()
                # WARN value rules too: TPC-H data satisfies its own specification.
                assert evaluation.passed, (asset, evaluation.check_name, evaluation.metadata)
                evaluated[asset].add(evaluation.check_name)
                if evaluation.check_name == "value_rules":
                    entries = evaluation.metadata["rules"].value
                    judged[asset] |= {entry["rule"] for entry in entries}  # type: ignore[union-attr]
        for table, name in DECLARATIONS.items():
            rules = {r.name for r in load_source(DEFS / name / "defs.yaml").contract().rules}
            assert rules and evaluated[table] == LANDING_CHECKS | {"value_rules"}, table
            assert judged[table] == rules, table  # every declared rule, in one check


def test_second_pass_commits_nothing(passes):
    first, second = passes
    for table in TABLES:
        assert first.metadata[table]["committed"] is True, table
        assert second.metadata[table]["committed"] is False, table
        assert second.metadata[table]["delta_version"] == first.metadata[table]["delta_version"]
        assert second.versions[table] == first.versions[table] == 0, table


def test_second_pass_reproduces_the_tables(passes):
    first, second = passes
    assert second.fingerprints == first.fingerprints
    for table in TABLES:
        assert second.metadata[table]["fingerprint"] == first.metadata[table]["fingerprint"]
        assert first.fingerprints[table].rows == first.rows[table], table


def test_no_row_is_quarantined(passes, tpch_project):
    first, _ = passes
    for table in TABLES:
        assert first.metadata[table]["quarantined_rows"] == 0, table
        assert first.metadata[table]["raw_rows"] == first.metadata[table]["valid_rows"]
    stored = tpch_project.lake.table(QUARANTINE_TABLE).open()
    if stored is not None:
        sources = read_rows(stored).column("source").to_pylist()
        assert not set(sources) & set(TABLES)


def test_tables_hold_every_landing_row(passes, tpch_project):
    expected = landing_rows(tpch_project.landing)
    first, second = passes
    assert all(expected.values())
    assert first.rows == second.rows == expected
    for table in TABLES:
        assert first.metadata[table]["dagster/row_count"] == expected[table], table
