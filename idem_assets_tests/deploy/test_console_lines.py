"""What a run prints on an instance of the shipped profiles: a line per write, failed check, run.

The profile's ``python_logs`` (Dagster's console at INFO, ``idem_assets.lib.console.RunLines``
beside it) is read from ``deploy/sqlite/dagster.yaml`` itself; the run is a real in-process
run of a partitioned asset with a check that fails on one day.
"""

# Dagster reads the context annotation at definition time: no postponed annotations here.
import shutil

import dagster as dg
import pytest

from idem_assets_tests.ui.server import ROOT
from idem_assets_tests.waiting import wait_until

DAYS = dg.DailyPartitionsDefinition(start_date="2024-03-01", end_date="2024-03-04")


@dg.asset(
    partitions_def=DAYS,
    check_specs=[dg.AssetCheckSpec("not_the_second", asset="ranged", blocking=False)],
    backfill_policy=dg.BackfillPolicy.single_run(),
)
def ranged(context: dg.AssetExecutionContext):
    context.log.info("wrote the range")
    yield dg.Output(None)
    # As the lake assets report a range's checks: an evaluation per day from the step.
    for key in context.selected_asset_check_keys:
        yield dg.Output(
            None, output_name=context.assets_def.get_output_name_for_asset_check_key(key)
        )
    for day in context.partition_keys:
        yield dg.AssetCheckEvaluation(
            asset_key=dg.AssetKey("ranged"),
            check_name="not_the_second",
            passed=day != "2024-03-02",
            severity=dg.AssetCheckSeverity.WARN,
            description=f"looked at {day}",
            partition=day,
        )


class Discard(dg.IOManager):
    """Stores nothing: the runs here are about what they print."""

    def handle_output(self, context: dg.OutputContext, obj: object) -> None:
        pass

    def load_input(self, context: dg.InputContext) -> None:
        return None


@dg.asset
def broken():
    raise ValueError("the input is wrong")


@pytest.fixture
def instance(tmp_path, monkeypatch):
    home = tmp_path / "home"
    home.mkdir()
    shutil.copy(ROOT / "deploy" / "sqlite" / "dagster.yaml", home / "dagster.yaml")
    # Steps print straight to this process's stderr: Dagster's log capture would mirror them
    # to it from a `tail` process, some time later (what is printed is the same).
    with (home / "dagster.yaml").open("a") as profile:
        profile.write(
            "compute_logs:\n"
            "  module: dagster._core.storage.noop_compute_log_manager\n"
            "  class: NoOpComputeLogManager\n"
        )
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    monkeypatch.delenv("IDEM_LOG_LEVEL", raising=False)
    with dg.DagsterInstance.get() as got:
        yield got


def _lines(capfd, *expected: str) -> list[str]:
    """The log lines printed once every ``expected`` text is among them (a line's
    continuation, such as a stack trace, joined to it).

    With Dagster's log capture a step's lines would reach the console from a `tail` of its
    capture file, after the run's own lines; the instance here captures nothing, and the
    wait only guards against a slow flush.
    """
    text: list[str] = []

    def printed() -> str | None:
        captured = capfd.readouterr()
        text.append(captured.err + captured.out)
        joined = "".join(text)
        return joined if all(e in joined for e in expected) else None

    joined = wait_until(printed, f"the console to show {expected}", seen=lambda: "".join(text))
    lines: list[str] = []
    for line in joined.splitlines():
        if " - dagster - " in line or not lines:
            lines.append(line)
        else:
            lines[-1] += "\n" + line
    return lines


def _run_range(instance: dg.DagsterInstance) -> dg.ExecuteInProcessResult:
    job = dg.Definitions(
        assets=[ranged], resources={"io_manager": Discard()}
    ).resolve_implicit_global_asset_job_def()
    return job.execute_in_process(
        instance=instance,
        tags={
            "dagster/asset_partition_range_start": "2024-03-01",
            "dagster/asset_partition_range_end": "2024-03-03",
        },
    )


def test_a_run_prints_its_writes_failed_checks_and_end_and_no_debug(instance, capfd):
    capfd.readouterr()
    result = _run_range(instance)
    assert result.success
    wrote, failed = "ranged - wrote the range", "check ranged:not_the_second failed for"
    lines = _lines(capfd, wrote, failed, "run succeeded")
    assert not [line for line in lines if " - DEBUG - " in line], lines
    said = sorted(line.split(f"{result.run_id} - ", 1)[-1] for line in lines)
    assert len(said) == 3 and said[:2] == [
        "check ranged:not_the_second failed for 2024-03-02: looked at 2024-03-02",
        "ranged - wrote the range",
    ], lines
    (warning,) = [line for line in lines if failed in line]
    assert " - WARNING - " in warning
    (end,) = [line for line in lines if "run succeeded" in line]
    assert f"{result.run_id} - run succeeded in " in end
    assert end.endswith(" s · partitions 2024-03-01...2024-03-03"), end
    # The instance stored every event, DEBUG ones too, whatever the console printed.
    stored = instance.all_logs(result.run_id)
    assert any(e.dagster_event and e.dagster_event.event_type_value == "STEP_START" for e in stored)


def test_a_failed_run_prints_its_failure_once(instance, capfd):
    capfd.readouterr()
    job = dg.Definitions(assets=[broken]).resolve_implicit_global_asset_job_def()
    result = job.execute_in_process(instance=instance, raise_on_error=False)
    assert not result.success
    lines = _lines(capfd, "RUN_FAILURE", "STEP_FAILURE")
    ends = [line for line in lines if "RUN_FAILURE" in line or "run succeeded" in line]
    assert len(ends) == 1 and " - ERROR - " in ends[0], lines
    steps = [line for line in lines if "STEP_FAILURE" in line]
    assert len(steps) == 1, lines
    assert " - ERROR - " in steps[0] and "ValueError: the input is wrong" in steps[0], lines


def test_idem_log_level_debug_prints_the_step_events(instance, capfd, monkeypatch):
    monkeypatch.setenv("IDEM_LOG_LEVEL", "DEBUG")
    capfd.readouterr()
    assert _run_range(instance).success
    lines = _lines(capfd, "STEP_START", "run succeeded in")
    assert any(" - DEBUG - " in line and "STEP_START" in line for line in lines), lines
    assert any("run succeeded in" in line for line in lines), lines


def test_an_unknown_level_is_refused_with_the_levels_it_takes(monkeypatch):
    from idem_assets.lib.console import log_level

    monkeypatch.setenv("IDEM_LOG_LEVEL", "chatty")
    with pytest.raises(ValueError, match="IDEM_LOG_LEVEL='CHATTY': use one of DEBUG, INFO"):
        log_level()


def test_a_run_tagged_quiet_gets_no_run_lines(instance, capfd):
    from idem_assets.lib.console import CONSOLE_TAG, QUIET

    capfd.readouterr()
    job = dg.Definitions(
        assets=[ranged], resources={"io_manager": Discard()}
    ).resolve_implicit_global_asset_job_def()
    result = job.execute_in_process(
        instance=instance,
        tags={
            CONSOLE_TAG: QUIET,
            "dagster/asset_partition_range_start": "2024-03-01",
            "dagster/asset_partition_range_end": "2024-03-03",
        },
    )
    assert result.success
    lines = _lines(capfd, "wrote the range")
    # The asset's own INFO line is Dagster's console's; the run lines are left out.
    assert [line.split(f"{result.run_id} - ", 1)[-1] for line in lines] == [
        "ranged - wrote the range"
    ], lines
