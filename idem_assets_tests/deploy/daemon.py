"""One sensor-daemon iteration against a real instance, as `dagster-daemon` runs it.

This reaches into Dagster's own daemon and test helpers (``dagster._daemon``,
``dagster._core.test_utils``): there is no public API for "tick this sensor now".
Expect to revisit it when upgrading Dagster.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import dagster as dg
from dagster._core.remote_origin import InProcessCodeLocationOrigin
from dagster._core.scheduler.instigation import InstigatorTick, SensorInstigatorData
from dagster._core.test_utils import create_test_daemon_workspace_context, freeze_time
from dagster._core.types.loadable_target_origin import LoadableTargetOrigin
from dagster._core.workspace.context import WorkspaceProcessContext
from dagster._core.workspace.load_target import InProcessWorkspaceLoadTarget
from dagster._daemon.sensor import execute_sensor_iteration

LOCATION = "idem_assets"
_logger = logging.getLogger("idem_assets_tests.sensor_daemon")


@contextmanager
def daemon_workspace(instance: dg.DagsterInstance, root: Path) -> Iterator[WorkspaceProcessContext]:
    """The code location loaded for the daemon, in process, against ``instance``."""
    origin = InProcessCodeLocationOrigin(
        LoadableTargetOrigin(module_name="idem_assets.definitions", working_directory=str(root)),
        location_name=LOCATION,
    )
    with create_test_daemon_workspace_context(
        InProcessWorkspaceLoadTarget([origin]), instance
    ) as context:
        yield context


class SensorDaemon:
    """Starts a sensor in the instance and ticks it the way the sensor daemon does."""

    def __init__(self, context: WorkspaceProcessContext, sensor_name: str) -> None:
        self.context = context
        self.instance = context.instance
        location = context.create_request_context().get_code_location(LOCATION)
        repository = next(iter(location.get_repositories().values()))
        self.sensor = repository.get_sensor(sensor_name)
        self.instance.start_sensor(self.sensor)
        self._clock = time.time()

    def tick(self) -> InstigatorTick:
        """Run one daemon iteration past the sensor's minimum interval; the recorded tick."""
        self._clock += (self.sensor.min_interval_seconds or 30) + 1
        with freeze_time(self._clock):
            list(execute_sensor_iteration(self.context, _logger, None, None))
        return self.ticks()[0]

    def ticks(self) -> list[InstigatorTick]:
        """Ticks the instance recorded for the sensor, newest first."""
        return list(
            self.instance.get_ticks(self.sensor.get_remote_origin_id(), self.sensor.selector_id)
        )

    def forget_cursor(self) -> None:
        """What `dagster sensor cursor --delete` does: the next tick starts from scratch."""
        state = self.instance.get_instigator_state(
            self.sensor.get_remote_origin_id(), self.sensor.selector_id
        )
        assert state is not None and isinstance(state.instigator_data, SensorInstigatorData)
        self.instance.update_instigator_state(
            state.with_data(state.instigator_data._replace(cursor=None))
        )
