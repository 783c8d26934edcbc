"""notifications: one POST per order that reached a notable status, exactly once."""

import datetime as dt
import os
import socket
from typing import TYPE_CHECKING

import dagster as dg
from pydantic import Field

from idem_assets._lazy import lazy_module
from idem_assets.defs.sales.assets import ORDERS_TABLE
from idem_assets.io_manager import Window, read, target_table
from idem_assets.lib.automation import follows_upstream
from idem_assets.notify import idempotency_key
from idem_assets.notify.outbox import DeliveryReport, OutboxRecord, drain, register
from idem_assets.partitions import partition_dates
from idem_assets.resources import CheckpointResource, LakeResource, NotificationResource

if TYPE_CHECKING:
    import pyarrow as pa
    import pyarrow.compute as pc
else:
    # imported on first use: see idem_assets._lazy
    pa = lazy_module("pyarrow")
    pc = lazy_module("pyarrow.compute")


# An order reaching one of these statuses earns its customer one notification.
NOTIFY_STATUSES = ("shipped", "delivered", "refunded")
SCOPE_PREFIX = "notifications/"


class NotificationsConfig(dg.Config):
    """How a notifications run sends and retries."""

    max_attempts: int = Field(
        default=5,
        description="Attempts per record before it is a "
        "dead letter (counted across runs, restarts and workers).",
    )
    batch_size: int = Field(default=50, description="Records claimed per lease.")
    lease_seconds: float = Field(
        default=60.0,
        description="Lease per claimed batch; a "
        "crashed worker's records are retried after it runs out.",
    )
    retry_in_seconds: float | None = Field(
        default=None,
        description="Backoff before a failed record is due again "
        "(default: 30 s doubling per attempt, capped at 1 h).",
    )
    redrive_exhausted: bool = Field(
        default=False, description="Re-drive this partition's dead letters before sending."
    )
    deadline_seconds: float | None = Field(
        default=600.0, description="Stop claiming after this long; the rest waits for a retry."
    )


def scope_of(day: dt.date) -> str:
    """Checkpoint scope holding one day's notification records."""
    return f"{SCOPE_PREFIX}{day.isoformat()}"


def day_of(scope: str) -> dt.date | None:
    """The day of a notifications scope, or None for other scopes."""
    if not scope.startswith(SCOPE_PREFIX):
        return None
    try:
        return dt.date.fromisoformat(scope[len(SCOPE_PREFIX) :])
    except ValueError:
        return None


def notification_records(orders: "pa.Table", day: dt.date) -> list[OutboxRecord]:
    """The records of one day: an order in a notable status, keyed by (order, status)."""
    notable = orders.filter(
        pc.and_(
            pc.is_in(orders.column("status"), pa.array(NOTIFY_STATUSES)),
            pc.equal(orders.column("order_date"), pa.scalar(day)),
        )
    )
    records = []
    for row in sorted(notable.to_pylist(), key=lambda r: r["order_id"]):
        payload = {
            "type": "order_status",
            "order_id": row["order_id"],
            "customer_id": row["customer_id"],
            "status": row["status"],
            "amount": str(row["amount"]),
            "order_date": day.isoformat(),
        }
        records.append(
            OutboxRecord(
                record_id=f"order/{row['order_id']}/{row['status']}",
                key=idempotency_key("order-status", row["order_id"], row["status"]),
                payload=payload,
            )
        )
    return records


def worker_name(run_id: str) -> str:
    """A lease owner naming the host, process and run."""
    return f"{socket.gethostname()}:{os.getpid()}:{run_id[:8]}"


@dg.asset(
    partitions_def=ORDERS_TABLE.partitions_def,
    deps=[ORDERS_TABLE.key],
    automation_condition=follows_upstream(),
    group_name="side_effects",
    owners=["team:data-platform"],
    kinds={"http", "checkpoint"},
    description=(
        "POSTs one notification per order that reached shipped, delivered or refunded, with a "
        "deterministic Idempotency-Key. Each record is tracked in the checkpoint store "
        "(pending → in_progress → succeeded | failed → exhausted): retries, crashed workers "
        "and concurrent runs never send twice, and records that exhaust their attempts wait as "
        "dead letters for a person to re-drive."
    ),
)
def notifications(
    context: dg.AssetExecutionContext,
    config: NotificationsConfig,
    lake: LakeResource,
    checkpoint: CheckpointResource,
    notifier: NotificationResource,
) -> dg.MaterializeResult:
    """Send the partition's notifications exactly once."""
    window = Window(*partition_dates(context))
    orders = read(
        ORDERS_TABLE.spec,
        target_table(lake, ORDERS_TABLE.spec, ORDERS_TABLE.key),
        window,
        ORDERS_TABLE.arrow_schema,
    )
    client = notifier.client()
    total = DeliveryReport()
    counts: dict[str, int] = {}
    redriven = 0
    with checkpoint.open() as store:
        for day in window.days():
            scope = scope_of(day)
            if config.redrive_exhausted:
                redriven += store.redrive(scope)
            total.registered += register(
                store, scope, notification_records(orders, day), max_attempts=config.max_attempts
            )
            report = drain(
                store,
                scope,
                client,
                owner=worker_name(context.run.run_id),
                lease_seconds=config.lease_seconds,
                batch_size=config.batch_size,
                retry_in_seconds=config.retry_in_seconds,
                deadline_seconds=config.deadline_seconds,
            )
            for name in ("delivered", "already_delivered", "failed", "exhausted", "lease_lost"):
                setattr(total, name, getattr(total, name) + getattr(report, name))
            total.errors.extend(report.errors)
            for status, n in store.counts(scope).items():
                counts[status] = counts.get(status, 0) + n
    if total.exhausted:
        context.log.warning(f"{total.exhausted} notification(s) exhausted into dead letters")
    return dg.MaterializeResult(
        metadata={
            "partition_range": window.label(),
            "records_registered_now": total.registered,
            "delivered": total.delivered,
            "already_delivered": total.already_delivered,
            "failed_will_retry": total.failed,
            "exhausted_now": total.exhausted,
            "redriven": redriven,
            "status_counts": dg.MetadataValue.json(counts),
            "errors": dg.MetadataValue.json(total.errors[:20]),
        }
    )
