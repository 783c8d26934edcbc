"""Exactly-once micro-batch ingestion of append-only landing folders into Delta (no Dagster)."""

from idem_assets.stream.errors import (
    FileChangedError,
    StreamBlocked,
    StreamError,
    StreamStateError,
)
from idem_assets.stream.files import OffsetFile
from idem_assets.stream.generator import GeneratedFile, append_stream_files
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
from idem_assets.stream.source import EVENTS_STREAM, StreamSource, stream_of

__all__ = [
    "EVENTS_STREAM",
    "BatchOutcome",
    "BatchPlan",
    "Busy",
    "FileChangedError",
    "GeneratedFile",
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
    "append_stream_files",
    "outlook",
    "retry_batch",
    "set_aside_files",
    "stream_of",
]
