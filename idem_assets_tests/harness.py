"""Run the real code location against a landing zone and lake in tmp dirs."""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import dagster as dg

from idem_assets.checkpoint.leases import Clock
from idem_assets.definitions import build_definitions
from idem_assets.defs.automation.jobs import catalog_job, daily_lake_job
from idem_assets.lake import Fingerprint, fingerprint, read_rows
from idem_assets.lib import source_definitions
from idem_assets.lib.resources import default_resources
from idem_assets.resources import CheckpointResource, LakeResource, NotificationResource
from idem_assets.sample.generator import generate
from idem_assets.sources import LandingSource
from idem_assets_tests.checkpoint.clock import SteppedClock, ahead_of_store

DAILY_TABLES = ("orders", "customers", "events", "daily_sales")
ALL_TABLES = (*DAILY_TABLES, "product_catalog")
START = dt.date(2024, 3, 1)


@dataclass
class Project:
    """A landing zone, a lake and a Dagster instance of one test."""

    root: Path
    lake: LakeResource
    checkpoint: CheckpointResource
    instance: dg.DagsterInstance
    notifier: NotificationResource | None = None

    @property
    def landing(self) -> Path:
        """Landing root."""
        return Path(self.lake.landing_uri)

    def definitions(self) -> dg.Definitions:
        """The code location's definitions, wired to this project's dirs."""
        notifier = self.notifier or NotificationResource(
            base_url="http://127.0.0.1:9", token="unused-in-this-test"
        )
        return build_definitions(default_resources(self.lake, self.checkpoint, notifier))

    def run_days(
        self,
        first: str,
        last: str | None = None,
        assets: Sequence[str] | None = None,
        run_config: dict | None = None,
    ) -> dg.ExecuteInProcessResult:
        """Run the daily job for one partition or, as one single run, an inclusive range."""
        job = self.definitions().resolve_job_def(daily_lake_job.name)
        selection = [dg.AssetKey(a) for a in assets] if assets else None
        if last is None or last == first:
            return job.execute_in_process(
                partition_key=first,
                instance=self.instance,
                asset_selection=selection,
                raise_on_error=False,
                run_config=run_config,
            )
        tags = {
            "dagster/asset_partition_range_start": first,
            "dagster/asset_partition_range_end": last,
        }
        return job.execute_in_process(
            tags=tags,
            instance=self.instance,
            asset_selection=selection,
            raise_on_error=False,
            run_config=run_config,
        )

    def run_job(
        self, name: str, partition: str | None = None, run_config: dict | None = None
    ) -> dg.ExecuteInProcessResult:
        """Run any job of the code location (optionally for one partition)."""
        job = self.definitions().resolve_job_def(name)
        return job.execute_in_process(
            partition_key=partition,
            instance=self.instance,
            run_config=run_config,
            raise_on_error=False,
        )

    def run_catalog(self) -> dg.ExecuteInProcessResult:
        """Run the catalog job."""
        job = self.definitions().resolve_job_def(catalog_job.name)
        return job.execute_in_process(instance=self.instance, raise_on_error=False)

    def table_fingerprint(self, name: str) -> Fingerprint:
        """Whole-table fingerprint."""
        return fingerprint(read_rows(self.lake.table(name).open()))

    def table_rows(self, name: str) -> list[dict]:
        """Every row of a table as dicts."""
        return read_rows(self.lake.table(name).open()).to_pylist()

    def version(self, name: str) -> int:
        """Current Delta version of a table."""
        table = self.lake.table(name).open()
        assert table is not None, f"{name} does not exist"
        return table.version()


def new_project(root: Path, days: int = 4, seed: int = 7, clean: bool = False) -> Project:
    """Generate landing data and return a project around it."""
    landing, lake_dir = root / "landing", root / "lake"
    generate(landing, START, days, seed, clean=clean)
    lake = LakeResource(landing_dir=str(landing), lake_dir=str(lake_dir))
    checkpoint = CheckpointResource(url=f"sqlite:///{root / 'state' / 'checkpoint.db'}")
    return Project(
        root=root, lake=lake, checkpoint=checkpoint, instance=dg.DagsterInstance.ephemeral()
    )


# Stepped clocks by name: Dagster builds resources again from their config, so a resource
# finds its clock by a name it carries as config.
_CLOCKS: dict[str, SteppedClock] = {}


class SteppedCheckpoint(CheckpointResource):
    """A ``CheckpointResource`` whose leases and backoffs run on a registered ``SteppedClock``."""

    clock_name: str

    def clock(self) -> SteppedClock:  # type: ignore[override]
        """The stepped clock registered under ``clock_name``."""
        return _CLOCKS[self.clock_name]


def stepped_checkpoint(url: str) -> tuple[SteppedCheckpoint, SteppedClock]:
    """A checkpoint resource at ``url`` on a new stepped clock, and the clock."""
    clock = SteppedClock()
    name = f"clock-{len(_CLOCKS)}"
    _CLOCKS[name] = clock
    return SteppedCheckpoint(url=url, clock_name=name), clock


class AheadCheckpoint(CheckpointResource):
    """A ``CheckpointResource`` on the database's clock moved ``clock_ahead`` seconds ahead:
    a rerun in its own process takes a dead run's records at once (``lease_lead`` says how
    far ahead) instead of waiting its leases out."""

    clock_ahead: float

    def clock(self) -> Clock:
        """The database's clock, ``clock_ahead`` seconds ahead."""
        return ahead_of_store(self.resolved_url, self.clock_ahead)


def on_a_stepped_clock(project: Project) -> tuple[Project, SteppedClock]:
    """The project with its checkpoint store on a new stepped clock (runs, sensors and the
    test share it), and the clock."""
    checkpoint, clock = stepped_checkpoint(project.checkpoint.resolved_url)
    return dataclasses.replace(project, checkpoint=checkpoint), clock


def declared_definitions(
    sources: Sequence[LandingSource], landing: Path, root: Path, **lake_config: Any
) -> tuple[dg.Definitions, LakeResource]:
    """Definitions of declared sources alone (no shipped domain), with a lake under ``root``
    (``lake_config``: more LakeResource settings)."""
    lake = LakeResource(landing_dir=str(landing), lake_dir=str(root / "lake"), **lake_config)
    resources = default_resources(
        lake,
        CheckpointResource(url=f"sqlite:///{root / 'state.db'}"),
        NotificationResource(base_url="http://127.0.0.1:9", token="unused"),
    )
    return (
        dg.Definitions.merge(
            *(source_definitions(s) for s in sources), dg.Definitions(resources=resources)
        ),
        lake,
    )


def day_keys(days: int, start: dt.date = START) -> list[str]:
    """Partition keys of ``days`` consecutive days."""
    return [(start + dt.timedelta(days=i)).isoformat() for i in range(days)]


def check_results(result: dg.ExecuteInProcessResult) -> dict[tuple[str, str], bool]:
    """(asset, check) -> passed, for every check evaluation of a run (all must pass).

    A failed check of severity WARN (a value rule on data the generator plants on
    purpose, or a quarantine share above its threshold) counts as passed here: it is a data
    warning, not a broken proof. ``warnings`` lists them.
    """
    outcome: dict[tuple[str, str], bool] = {}
    for evaluation in result.get_asset_check_evaluations():
        key = (evaluation.asset_key.to_user_string(), evaluation.check_name)
        ok = evaluation.passed or evaluation.severity == dg.AssetCheckSeverity.WARN
        outcome[key] = outcome.get(key, True) and ok
    return outcome


def warnings(result: dg.ExecuteInProcessResult) -> dict[tuple[str, str], dict]:
    """(asset, check) -> metadata of every failed WARN check evaluation of a run."""
    return {
        (e.asset_key.to_user_string(), e.check_name): {
            k: getattr(v, "value", v) for k, v in e.metadata.items()
        }
        for e in result.get_asset_check_evaluations()
        if not e.passed and e.severity == dg.AssetCheckSeverity.WARN
    }


def materialization_metadata(result: dg.ExecuteInProcessResult) -> dict[str, dict]:
    """asset -> metadata values of its (last) materialization in the run."""
    out = {}
    for event in result.get_asset_materialization_events():
        mat = event.event_specific_data.materialization  # type: ignore[union-attr]
        out[mat.asset_key.to_user_string()] = {
            k: getattr(v, "value", v) for k, v in mat.metadata.items()
        }
    return out
