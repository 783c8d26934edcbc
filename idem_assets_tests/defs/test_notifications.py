"""The notifications asset: exactly once per record, dead letters visible and re-drivable."""

import dagster as dg
import pytest

from idem_assets.checkpoint import Status
from idem_assets.defs.notifications.assets import NOTIFY_STATUSES, scope_of
from idem_assets.defs.notifications.sensors import notification_retry_sensor
from idem_assets.notify import Faults, NotificationClient, NotificationServer
from idem_assets.resources import NotificationResource
from idem_assets_tests.harness import START, check_results, on_a_stepped_clock

KEY = START.isoformat()


@pytest.fixture
def server(tmp_path):
    """A real notification service on loopback."""
    with NotificationServer(tmp_path / "notify.db", "s3cret-token-for-tests") as running:
        yield running


def _wire(project, server, token="s3cret-token-for-tests"):
    project.notifier = NotificationResource(
        base_url=server.url, token=token, max_retries=1, backoff_seconds=0.01
    )
    return project


def _notable(project):
    return sum(
        1
        for r in project.table_rows("orders")
        if r["status"] in NOTIFY_STATUSES and r["order_date"] == START
    )


def _md(result):
    mat = result.get_asset_materialization_events()[0].event_specific_data.materialization
    return {k: getattr(v, "value", v) for k, v in mat.metadata.items()}


def test_each_notable_order_is_notified_once_even_when_rerun(project, server):
    _wire(project, server)
    assert project.run_days(KEY).success
    expected = _notable(project)
    assert expected > 0
    first = project.run_job("notifications_job", KEY)
    second = project.run_job("notifications_job", KEY)
    assert first.success and second.success
    assert _md(first)["delivered"] == expected
    assert _md(second)["delivered"] == 0 and _md(second)["records_registered_now"] == 0
    stats = NotificationClient(server.url, "s3cret-token-for-tests").stats()
    assert stats["deliveries"] == stats["distinct_keys"] == expected
    checks = check_results(second)
    assert checks[("notifications", "no_dead_letters")]
    assert checks[("notifications", "all_settled")]


def test_rejected_sends_become_dead_letters_then_redrive_delivers_them(project, server):
    assert project.run_days(KEY).success
    expected = _notable(project)
    _wire(project, server, token="wrong-token")  # 401: final, no retry can fix it
    failed = project.run_job("notifications_job", KEY)
    md = _md(failed)
    assert md["exhausted_now"] == expected and md["delivered"] == 0
    evaluation = next(
        e for e in failed.get_asset_check_evaluations() if e.check_name == "no_dead_letters"
    )
    assert not evaluation.passed
    listed = evaluation.metadata["records"].value
    assert len(listed) == min(expected, 50)
    assert "bearer token" in listed[0]["last_error"]
    assert "wrong-token" not in str(listed)

    _wire(project, server)  # the token is fixed; a person re-drives the partition
    redriven = project.run_job("notifications_redrive_job", KEY)
    assert redriven.success
    assert _md(redriven)["redriven"] == expected
    assert _md(redriven)["delivered"] == expected
    assert check_results(redriven)[("notifications", "no_dead_letters")]


def test_retry_sensor_requests_partitions_whose_backoff_is_over(project, server):
    # Runs, the sensor and the test share one clock: the backoff ends when the test says.
    project, clock = on_a_stepped_clock(_wire(project, server))
    assert project.run_days(KEY).success
    server.set_faults(Faults(error_rate=1.0))
    config = {"ops": {"notifications": {"config": {"retry_in_seconds": 60.0}}}}
    assert project.run_job("notifications_job", KEY, run_config=config).success
    with project.checkpoint.open() as store:
        failed = store.counts(scope_of(START))[Status.FAILED.value]
    assert failed == _notable(project) > 0
    due_at = clock.now + 60.0  # the clock has not moved since the sends failed
    context = dg.build_sensor_context(
        instance=project.instance, resources={"checkpoint": project.checkpoint}
    )
    clock.advance(59.0)
    assert notification_retry_sensor(context).run_requests == []  # still backing off
    clock.advance(1.0)
    requests = notification_retry_sensor(context).run_requests
    assert [r.partition_key for r in requests] == [KEY]
    assert requests[0].run_key == f"retry:{scope_of(START)}:{int(due_at)}"
    server.set_faults(Faults())
    retried = project.run_job("notifications_job", KEY)
    assert _md(retried)["delivered"] == _notable(project)
    assert notification_retry_sensor(context).run_requests == []
