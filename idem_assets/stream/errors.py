"""Errors of stream ingestion: each names the stream, the batch and the file at fault."""

from __future__ import annotations


class StreamError(Exception):
    """Base class for stream ingestion errors."""


class FileChangedError(StreamError, ValueError):
    """A file assigned to a batch no longer has the bytes it had when the batch was planned."""

    def __init__(
        self, stream: str, seq: int, relpath: str, expected: str, actual: str | None
    ) -> None:
        now = "is gone" if actual is None else f"now has sha256 {actual[:16]}"
        super().__init__(
            f"{relpath}: changed after it was assigned to batch {seq} of stream {stream!r} "
            f"(planned with sha256 {expected[:16]}, {now}). Stream files are append-only: "
            "restore the original bytes, or land the correction as a new file and set this "
            "one aside"
        )
        self.stream = stream
        self.seq = seq
        self.relpath = relpath


class StreamBlocked(StreamError):
    """The oldest unfinished batch cannot run now, so no later batch may run either."""


class StreamStateError(StreamError):
    """The offset log and the Delta table disagree, or a log record is malformed."""
