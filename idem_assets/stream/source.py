"""A stream source: an append-only landing folder, its row contract and its lake table schema."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from idem_assets._lazy import lazy_module
from idem_assets.landing.column_types import TypedColumn, arrow_schema
from idem_assets.landing.contract import SourceContract
from idem_assets.sources.declaration import SOURCE_NAME

if TYPE_CHECKING:
    import pyarrow as pa
else:
    pa = lazy_module("pyarrow")  # imported on first use: see idem_assets._lazy


STREAM_BATCH_COLUMN = "stream_batch"
SOURCE_FILE_COLUMN = "source_file"
# Lineage columns appended to the contract columns: which batch and file each row came from.
LINEAGE_COLUMNS = (
    TypedColumn.of(STREAM_BATCH_COLUMN, "int64", nullable=False),
    TypedColumn.of(SOURCE_FILE_COLUMN, "string", nullable=False),
)


@dataclass(frozen=True)
class StreamSource:
    """One stream. Its name is the landing folder, the table name and the Delta txn app id."""

    contract: SourceContract
    # Columns identifying a person: keys the erasure ledger holds are left out of batches.
    erasable_keys: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not SOURCE_NAME.match(self.contract.name):
            raise ValueError(
                f"stream name {self.contract.name!r} must match {SOURCE_NAME.pattern} "
                "(it names a folder, a table and a checkpoint scope)"
            )

    @property
    def name(self) -> str:
        """The stream id."""
        return self.contract.name

    @property
    def app_id(self) -> str:
        """Delta ``txn`` app id of the stream's table commits."""
        return self.name

    @property
    def quarantine_app_id(self) -> str:
        """Delta ``txn`` app id of the stream's commits to the shared quarantine table."""
        return f"{self.name}/quarantine"

    @property
    def scope(self) -> str:
        """Checkpoint scope of the offset log: one tracker per batch."""
        return f"stream/{self.name}/batches"

    @property
    def schema(self) -> pa.Schema:
        """The lake table schema: contract columns, then the lineage columns."""
        return pa.schema([*self.contract.schema, *arrow_schema(LINEAGE_COLUMNS)])

    def folder(self, landing_dir: str | Path) -> Path:
        """The local landing folder new files arrive in (for writers of sample files)."""
        return Path(landing_dir) / self.name


def stream_of(
    contract: SourceContract, name: str, erasable_keys: tuple[str, ...] = ()
) -> StreamSource:
    """A stream with ``contract``'s columns and rules under another name (no folder dates)."""
    return StreamSource(
        dataclasses.replace(contract, name=name, daily=False, date_column=None), erasable_keys
    )
