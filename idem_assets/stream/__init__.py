"""Exactly-once micro-batch ingestion of append-only landing folders into Delta (no Dagster)."""

from idem_assets.stream.errors import (
    FileChangedError,
    StreamBlocked,
    StreamError,
    StreamStateError,
)
from idem_assets.stream.files import OffsetFile
from idem_assets.stream.ingest import Busy, StreamIngester
from idem_assets.stream.offsets import BatchPlan, LoggedBatch, OffsetLog
from idem_assets.stream.operations import Outlook, outlook, retry_batch, set_aside_files
from idem_assets.stream.report import (
    BatchOutcome,
    Observer,
    RunReport,
    StreamSettings,
    StreamStep,
)
from idem_assets.stream.source import StreamSource, stream_of

__all__ = [
    "BatchOutcome",
    "BatchPlan",
    "Busy",
    "FileChangedError",
    "LoggedBatch",
    "Observer",
    "OffsetFile",
    "OffsetLog",
    "Outlook",
    "RunReport",
    "StreamBlocked",
    "StreamError",
    "StreamIngester",
    "StreamSettings",
    "StreamSource",
    "StreamStateError",
    "StreamStep",
    "outlook",
    "retry_batch",
    "set_aside_files",
    "stream_of",
]
