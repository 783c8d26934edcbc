"""A stream run in its own process, so a test can SIGKILL it between commit and checkpoint.

Usage: python -m idem_assets_tests.spark.stream_child STREAM_DIR LAKE_DIR CHECKPOINT LOG
With IDEM_SPARK_KILL_AFTER_BATCH=N set, the process group is SIGKILLed right after batch N
is committed to Delta and before Spark records the batch in its checkpoint.
"""

from __future__ import annotations

import functools
import json
import os
import signal
import sys
from pathlib import Path

from idem_assets.lake import LakeTable, WriteResult
from idem_assets.sample import EVENTS, EVENTS_SOURCE
from idem_assets.spark.resource import local_spark_session
from idem_assets.spark.streaming import StreamSink, start_stream, with_dates_of_spark

KILL_ENV = "IDEM_SPARK_KILL_AFTER_BATCH"
APP_ID = "events-stream"
TABLE = "events_stream"


def main(argv: list[str]) -> int:
    """Drain the stream folder once (availableNow), logging every batch decision."""
    stream_dir, lake_dir, checkpoint, log = (Path(a) for a in argv)
    kill_after = os.environ.get(KILL_ENV)

    def after_commit(batch_id: int, result: WriteResult) -> None:
        with log.open("a") as handle:
            handle.write(
                json.dumps(
                    {"batch": batch_id, "committed": result.committed, "rows": result.rows_written}
                )
                + "\n"
            )
        if kill_after is not None and batch_id == int(kill_after):
            # The whole group: this interpreter and the Spark JVM it started.
            os.killpg(os.getpgid(0), signal.SIGKILL)

    spark = local_spark_session(conf={"spark.sql.shuffle.partitions": "2"})
    sink = StreamSink(
        LakeTable(str(lake_dir / TABLE)),
        APP_ID,
        contract=EVENTS,
        schema=EVENTS_SOURCE.table_schema(),
        prepare=functools.partial(with_dates_of_spark, pairs=[("event_date", "event_time")]),
        partition_column="event_date",
        after_commit=after_commit,
    )
    start_stream(spark, stream_dir, checkpoint, sink).awaitTermination()
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
