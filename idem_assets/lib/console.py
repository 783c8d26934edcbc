"""What a run prints on the console: a line per write, per failed check and per run.

The instance profiles (``deploy/*/dagster.yaml``) set Dagster's console to INFO
(``python_logs: python_log_level``), which prints each write's line (the IO manager's), warnings
and errors, and add :class:`RunLines` as a handler of every run's log, which prints the rest of
what a person reads: one line when a run succeeds or is canceled (after how long, for which
partitions; a failed run's line is Dagster's own ERROR), and one per failed check and day
(WARNING for a WARN check, ERROR for an ERROR one), which Dagster logs at DEBUG. With
``IDEM_LOG_LEVEL=DEBUG`` in the environment of the process that runs the job it also prints
Dagster's step-by-step events (DEBUG); so does a run whose config asks Dagster's console for
them (``loggers: {console: {config: {log_level: DEBUG}}}``). The instance stores every event
whatever the console prints.
"""

from __future__ import annotations

import logging
import os
import sys
import warnings
from collections.abc import Mapping

import dagster as dg

from idem_assets.partitions import PARTITION_TAG, RANGE_END_TAG, RANGE_START_TAG

LOG_LEVEL_ENV = "IDEM_LOG_LEVEL"
LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
# Dagster's console format, so both read as one log.
FORMAT = "%(asctime)s - %(name)s - %(levelname)s - %(message)s"
DATE_FORMAT = "%Y-%m-%d %H:%M:%S %z"

_RUN_ENDS = {
    dg.DagsterEventType.RUN_SUCCESS: "succeeded",
    dg.DagsterEventType.RUN_CANCELED: "was canceled",
    dg.DagsterEventType.RUN_FAILURE: "failed",
}
# A run tagged `idem/console: quiet` gets no run lines (a caller that reports the run itself,
# as `make demo` does); DEBUG, when asked for, still prints.
CONSOLE_TAG = "idem/console"
QUIET = "quiet"
# When each run of this process started (a run's start and end are logged by one process,
# possibly through different log managers and so different handlers).
_STARTED: dict[str, float] = {}


def log_level() -> str:
    """The level ``IDEM_LOG_LEVEL`` asks for (INFO when unset)."""
    level = (os.environ.get(LOG_LEVEL_ENV) or "INFO").upper()
    if level not in LEVELS:
        raise ValueError(f"{LOG_LEVEL_ENV}={level!r}: use one of {', '.join(LEVELS)}")
    return level


def partitions_of(tags: Mapping[str, str]) -> str:
    """`` · partition D`` or `` · partitions A...B`` from a run's tags, or nothing."""
    first, last = tags.get(RANGE_START_TAG), tags.get(RANGE_END_TAG)
    if first and last:
        return f" · partition {first}" if first == last else f" · partitions {first}...{last}"
    partition = tags.get(PARTITION_TAG)
    return f" · partition {partition}" if partition else ""


def run_line(record: logging.LogRecord) -> tuple[int, str] | None:
    """(level, message) of the line a person reads for ``record``, or None for no line.

    Records Dagster's console prints at INFO (writes, warnings, errors, a failed run) get no
    line here; a run's success or cancelation and a failed check, logged at DEBUG, get one.
    """
    event: dg.DagsterEvent | None = getattr(record, "dagster_event", None)
    if event is None:
        return None
    meta: Mapping[str, object] = getattr(record, "dagster_meta", {})
    tags = meta.get("job_tags")
    tags = tags if isinstance(tags, Mapping) else {}
    if tags.get(CONSOLE_TAG) == QUIET:
        return None
    run_id = str(meta.get("run_id") or "")
    where = f"{meta.get('job_name')} - {run_id}"
    if event.event_type == dg.DagsterEventType.RUN_START:
        _STARTED[run_id] = record.created
    elif event.event_type in _RUN_ENDS:
        started = _STARTED.pop(run_id, None)
        if record.levelno >= logging.INFO:  # a failure: Dagster's console prints it
            return None
        took = "" if started is None else f" in {record.created - started:.1f} s"
        partitions = partitions_of(tags)
        return logging.INFO, f"{where} - run {_RUN_ENDS[event.event_type]}{took}{partitions}"
    elif event.event_type == dg.DagsterEventType.ASSET_CHECK_EVALUATION:
        evaluation = event.event_specific_data
        if isinstance(evaluation, dg.AssetCheckEvaluation) and not evaluation.passed:
            warn = evaluation.severity == dg.AssetCheckSeverity.WARN
            day = f" for {evaluation.partition}" if evaluation.partition else ""
            about = f": {evaluation.description}" if evaluation.description else ""
            check = f"{evaluation.asset_key.to_user_string()}:{evaluation.check_name}"
            return (
                logging.WARNING if warn else logging.ERROR,
                f"{where} - check {check} failed{day}{about}",
            )
    return None


class RunLines(logging.StreamHandler):  # type: ignore[type-arg]
    """A run log's handler printing :func:`run_line`'s lines (and DEBUG records when asked).

    Named in the instance profile (``python_logs: dagster_handler_config``), so every run on
    the instance prints them, whichever job and logger configuration it has.
    """

    def __init__(self) -> None:
        super().__init__(sys.stderr)
        self.setFormatter(logging.Formatter(FORMAT, DATE_FORMAT))
        self.debug = log_level() == "DEBUG"

    def emit(self, record: logging.LogRecord) -> None:
        """Print ``record`` as its run line, or as it is at DEBUG when DEBUG was asked for."""
        line = run_line(record)
        if line is not None:
            level, message = line
            shown = logging.makeLogRecord(record.__dict__)
            shown.levelno, shown.levelname = level, logging.getLevelName(level)
            shown.msg, shown.args = message, ()
            super().emit(shown)
        elif self.debug and record.levelno < logging.INFO:
            super().emit(record)


def quiet_handler_notice() -> None:
    """Silence Dagster's beta notice about instance-configured handlers in this process.

    The instance profiles configure :class:`RunLines`; Dagster would otherwise print the
    notice once in every run's console, which is noise of our configuration, not news.
    """
    warnings.filterwarnings(
        "ignore", message="Handling yaml-defined logging configuration", category=dg.BetaWarning
    )
