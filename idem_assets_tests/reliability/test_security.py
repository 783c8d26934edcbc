"""Injection strings are refused before anything is written; the notification token never leaks."""

from __future__ import annotations

import json
from pathlib import Path

import dagster as dg
import pyarrow as pa
import pytest

from idem_assets.checkpoint import open_store
from idem_assets.io_manager import WriteSpec
from idem_assets.landing import list_days
from idem_assets.lib import source_sensor
from idem_assets.lib.asset_def import LAKE_IO_MANAGER_KEY
from idem_assets.lib.resources import default_resources
from idem_assets.notify import NOTIFY_TOKEN_ENV, Faults, NotificationServer
from idem_assets.partitions import daily_partitions
from idem_assets.resources import NotificationResource
from idem_assets.sample.sources import ORDERS, ORDERS_SOURCE
from idem_assets_tests.harness import Project, check_results, materialization_metadata
from idem_assets_tests.reliability.corpus import DAY, csv_bytes, event, jsonl_bytes, order
from idem_assets_tests.reliability.runner import failures
from idem_assets_tests.reliability.world import project_at, record_row

INJECTION = "2024-03-01' OR '1'='1"
KEY = DAY.isoformat()
CUSTOMER_COLUMNS = ("customer_id", "name", "email", "segment", "updated_at")


def nothing_written(project: Project) -> bool:
    """No Delta table under the lake root and no checkpoint record."""
    lake = Path(project.lake.lake_root)
    tables = [p for p in lake.rglob("_delta_log")] if lake.exists() else []
    db = Path(project.checkpoint.resolved_url.removeprefix("sqlite:///"))
    if not db.exists():
        return not tables
    with open_store(project.checkpoint.resolved_url) as store:
        return not tables and store.list() == []


@pytest.mark.parametrize("where", ["partition_key", "range_start", "range_end"])
def test_injected_partition_key_is_refused_and_nothing_is_written(where, landing, tmp_path):
    project = project_at(tmp_path, landing)
    run = {
        "partition_key": (INJECTION, None),
        "range_start": (INJECTION, "2024-03-02"),
        "range_end": ("2024-03-01", INJECTION),
    }[where]
    with pytest.raises((dg.DagsterUnknownPartitionError, ValueError)) as refused:
        project.run_days(*run)
    assert INJECTION in str(refused.value)
    clean = nothing_written(project)
    record_row(
        "security",
        f"partition_key_injection_{where}",
        runs=1,
        faults=f"partition key {INJECTION!r} as the {where.replace('_', ' ')}",
        equal=clean,
        duplicates=0,
        lost=0,
        error=str(refused.value)[:120],
    )
    assert clean


def test_injected_landing_folder_never_becomes_a_partition(tmp_path):
    project = project_at(tmp_path, tmp_path / "landing")
    folder = tmp_path / "landing" / "orders" / f"date={INJECTION}"
    folder.mkdir(parents=True)
    (folder / "part-000.csv").write_bytes(csv_bytes([order(1, order_date="2024-03-01")]))
    assert list_days(project.landing, ORDERS) == []
    context = dg.build_sensor_context(instance=project.instance, resources={"lake": project.lake})
    assert not source_sensor(ORDERS_SOURCE)(context).run_requests
    record_row(
        "security",
        "landing_folder_injection",
        runs=1,
        faults=f"folder date={INJECTION}",
        equal=nothing_written(project),
        duplicates=0,
        lost=0,
    )


# write spec field -> injected value (asset metadata ``idem/<field>``)
BAD_SPECS = {
    "partition_column": 'order_date" OR 1=1 --',
    "natural_key": ["order_id; DROP TABLE orders"],
    "version_column": "updated_at) OR (1=1",
    "table": "../escaped",
    "strategy": "overwrite; DELETE",
}


@pytest.mark.parametrize("field", list(BAD_SPECS))
def test_injected_write_spec_metadata_fails_the_run_before_any_write(field, landing, tmp_path):
    project = project_at(tmp_path, landing)
    metadata = {
        **WriteSpec(
            strategy="overwrite", natural_key=("order_id",), partition_column="order_date"
        ).to_metadata(),
        f"idem/{field}": BAD_SPECS[field],
    }

    @dg.asset(
        name="evil",
        partitions_def=daily_partitions(ORDERS.first_day),
        metadata=metadata,
        io_manager_key=LAKE_IO_MANAGER_KEY,
    )
    def evil() -> pa.Table:
        return pa.table({"order_id": [1], "order_date": [DAY]})

    resources = default_resources(
        project.lake, project.checkpoint, NotificationResource(token="unused")
    )
    result = dg.materialize(
        [evil],
        resources=resources,
        partition_key=KEY,
        instance=project.instance,
        raise_on_error=False,
    )
    assert not result.success
    errors = " ".join(failures(result))
    assert f"WriteSpec\n{field}" in errors, errors  # pydantic names the field
    clean = nothing_written(project) and not (tmp_path / "escaped").exists()
    record_row(
        "security",
        f"write_spec_injection_{field}",
        runs=1,
        faults=f"idem/{field} = {BAD_SPECS[field]!r}",
        equal=clean,
        duplicates=0,
        lost=0,
        error=errors.rsplit(" <- ", 1)[-1][:160],
    )
    assert clean


@pytest.mark.parametrize("name", ["../outside", "orders/../../outside", "/etc", "", "a//b"])
def test_table_names_cannot_leave_the_lake(name, landing, tmp_path):
    project = project_at(tmp_path, landing)
    with pytest.raises(ValueError, match="table"):
        project.lake.table(name)
    with pytest.raises(ValueError, match="table"):
        WriteSpec(strategy="replace", natural_key=("id",), table=name)


def test_sql_in_data_values_is_stored_as_data(tmp_path):
    landing = tmp_path / "landing"
    sly = "x' OR '1'='1"
    customers = [
        {
            "customer_id": 1,
            "name": "Robert'); DROP TABLE customers;--",
            "email": "r@example.com",
            "segment": "smb",
            "updated_at": f"{KEY}T10:00:00Z",
        }
    ]
    for source, name, data in [
        ("customers", "part-000.csv", csv_bytes(customers, CUSTOMER_COLUMNS)),
        ("events", "part-000.jsonl", jsonl_bytes([event(1, event_id=sly), event(2)])),
    ]:
        folder = landing / source / f"date={KEY}"
        folder.mkdir(parents=True)
        (folder / name).write_bytes(data)
    project = project_at(tmp_path, landing)
    for _ in range(2):
        result = project.run_days(KEY, assets=["customers", "events"])
        assert result.success, failures(result)
        assert all(check_results(result).values())
    committed = {a: m["committed"] for a, m in materialization_metadata(result).items()}
    assert committed == {"customers": False, "events": False}
    assert {r["event_id"] for r in project.table_rows("events")} == {sly, "evt-0002"}
    assert [r["name"] for r in project.table_rows("customers")] == [customers[0]["name"]]
    record_row(
        "security",
        "sql_in_data_values",
        runs=2,
        faults="quotes and SQL in keys and text values",
        equal=True,
        duplicates=0,
        lost=0,
    )


@pytest.mark.parametrize("mode", ["rejected_token", "server_errors"])
def test_notification_token_never_appears_in_logs_events_or_errors(
    mode, landing, tmp_path, monkeypatch, caplog, capfd
):
    token = f"tok-{mode}-9c41d7e2b8"
    server_token = "the-servers-own-token" if mode == "rejected_token" else token
    monkeypatch.setenv(NOTIFY_TOKEN_ENV, token)
    project = project_at(tmp_path, landing)
    (tmp_path / "dagster_home").mkdir()
    project.instance = dg.DagsterInstance.local_temp(str(tmp_path / "dagster_home"))
    assert project.run_days("2024-03-01", assets=["orders"]).success
    with NotificationServer(tmp_path / "notify.db", server_token) as server:
        if mode == "server_errors":
            server.set_faults(Faults(error_rate=1.0))
        project.notifier = NotificationResource(
            base_url=server.url,
            token=dg.EnvVar(NOTIFY_TOKEN_ENV),
            max_retries=1,
            backoff_seconds=0.01,
        )
        caplog.set_level("DEBUG")
        result = project.run_job("notifications_job", "2024-03-01")
    logs = project.instance.all_logs(result.run_id)
    with open_store(project.checkpoint.resolved_url) as store:
        records = [t.__dict__ for t in store.list()]
    captured = capfd.readouterr()
    haystacks = {
        "dagster event log": "\n".join(dg.serialize_value(entry) for entry in logs),
        "run record": dg.serialize_value(project.instance.get_run_by_id(result.run_id)),
        "python logging": caplog.text,
        "stdout/stderr": captured.out + captured.err,
        "checkpoint records": json.dumps(records, default=str),
        "materialization metadata": json.dumps(materialization_metadata(result), default=str),
        "dagster home files": "\n".join(
            p.read_bytes().decode("utf-8", "replace")
            for p in (tmp_path / "dagster_home").rglob("*")
            if p.is_file()
        ),
    }
    expected_error = "bearer token" if mode == "rejected_token" else "HTTP 503"
    assert expected_error in haystacks["checkpoint records"]  # the failures were recorded
    assert expected_error in haystacks["dagster event log"]
    assert result.run_id in haystacks["dagster home files"]  # the instance's storage is read
    leaks = [name for name, text in haystacks.items() if token in text]
    record_row(
        "security",
        f"token_never_logged_{mode}",
        runs=1,
        faults=f"notifications run failing with {expected_error!r}",
        equal=not leaks,
        duplicates=0,
        lost=0,
        places_searched=sorted(haystacks),
        leaks=leaks,
    )
    assert leaks == []


@pytest.mark.parametrize(
    ("base_url", "token", "message"),
    [
        ("http://127.0.0.1:9/?token=x", "fine-token", "must not carry credentials, query"),
        ("http://user:secret@127.0.0.1:9", "fine-token", "must not carry credentials"),
        ("http://127.0.0.1:9", "tok\r\nX-Injected: 1", "printable ASCII"),
    ],
)
def test_injected_notification_settings_are_refused_before_any_send(
    base_url, token, message, landing, tmp_path
):
    project = project_at(tmp_path, landing)
    assert project.run_days("2024-03-01", assets=["orders"]).success
    project.notifier = NotificationResource(base_url=base_url, token=token)
    result = project.run_job("notifications_job", "2024-03-01")
    assert not result.success
    errors = " ".join(failures(result))
    assert message in errors
    assert token not in errors and "secret" not in errors
    with open_store(project.checkpoint.resolved_url) as store:
        assert [t for t in store.list() if t.scope.startswith("notifications/")] == []


def test_injected_notifications_config_is_refused_before_the_run(landing, tmp_path):
    project = project_at(tmp_path, landing)
    config = {"ops": {"notifications": {"config": {"max_attempts": "5; DROP TABLE"}}}}
    with pytest.raises(dg.DagsterInvalidConfigError, match="max_attempts"):
        project.run_job("notifications_job", "2024-03-01", run_config=config)
    assert nothing_written(project)
