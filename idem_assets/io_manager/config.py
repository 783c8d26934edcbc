"""The IO manager's configuration: dagster-deltalake's construction, dagster-delta's modes,
and where the tables and the write records are.

``IdempotentDeltaIOManager`` (``manager.py``) adds the writing; what a field means is said
once, here, and shown in the Dagster UI.
"""

from __future__ import annotations

from typing import Any

import dagster as dg
from pydantic import Field, field_validator, model_validator

from idem_assets._deltalake_config import (
    AzureConfig,
    ClientConfig,
    GcsConfig,
    LocalConfig,
    S3Config,
)
from idem_assets.io_manager.delta_modes import MergeConfig, SchemaMode, WriteMode
from idem_assets.io_manager.location import TablePath, dropin_path, lake_path
from idem_assets.io_manager.settings import mode_of, setting
from idem_assets.io_manager.spec import WriteSpec
from idem_assets.lake import LakeTable
from idem_assets.resources import CheckpointResource, LakeResource, storage_option_values


class DeltaIOManagerConfig(dg.ConfigurableIOManager):
    """The configuration of ``IdempotentDeltaIOManager``, and where it finds tables."""

    root_uri: str | None = Field(
        default=None,
        description="Storage location of the Delta tables, as dagster-deltalake's root_uri: "
        "tables at <root>/<schema>/<table>. Leave unset to use `lake` instead.",
    )
    storage_options: AzureConfig | S3Config | LocalConfig | GcsConfig = Field(
        default=LocalConfig(),
        discriminator="provider",
        description="dagster-deltalake's storage configuration for root_uri (pass "
        "credentials as dg.EnvVar).",
    )
    client_options: ClientConfig | None = Field(
        default=None, description="dagster-deltalake's http client configuration."
    )
    schema_: str | None = Field(
        default=None,
        alias="schema",
        description="Schema (parent folder) of every table, as in dagster-deltalake.",
    )
    mode: WriteMode = Field(
        default=WriteMode.overwrite,
        description="How outputs are written, as in dagster-delta: overwrite (replace exactly "
        "the output's partitions, or its table), merge (merge_config), append (exactly once "
        "per output), error (create; a rerun of the same rows is a no-op), ignore (create "
        "if absent) or create_or_replace (replace the whole table). An asset's 'mode' "
        "metadata overrides it. Every mode commits nothing on an unchanged rerun.",
    )
    merge_config: MergeConfig | None = Field(
        default=None,
        description="dagster-delta's MergeConfig for mode='merge': merge_type, predicate, "
        "aliases; an asset's 'merge_predicate' and 'merge_operations_config' override it.",
    )
    schema_mode: SchemaMode | None = Field(
        default=None,
        description="merge: add an output's new columns to the table (stored rows read "
        "null), in every mode; overwrite: let a replace change the table's columns.",
    )
    commit_properties: dict[str, Any] | None = Field(
        default=None,
        description="delta-rs CommitProperties fields; custom_metadata entries are added to "
        "every commit (commit retries stay ours).",
    )
    writer_engine: str = Field(
        default="rust",
        description="Accepted for dagster-deltalake compatibility: deltalake "
        "1.x writes with its Rust engine whatever this says.",
    )
    overwrite_schema: bool = Field(
        default=False,
        description="Let an output change its table's columns (a replace "
        "overwrites the schema; a partition overwrite adds new columns).",
    )
    table_config: dict[str, str] | None = Field(
        default=None, description="Delta table configuration set when a table is created."
    )
    custom_metadata: dict[str, str] | None = Field(
        default=None, description="Entries added to every commit's metadata."
    )
    writer_properties: dict[str, str] | None = Field(
        default=None, description="Parquet writer properties (delta-rs WriterProperties)."
    )
    lake: LakeResource | None = Field(
        default=None,
        description="The project's lake: tables at <lake>/<asset key path>. "
        "Used when root_uri is unset.",
    )
    checkpoint: CheckpointResource | None = Field(
        default=None,
        description="Where write records are kept. Unset: IDEM_STATE_URL, else "
        "SQLite in <root>/_idem_state/ for a local root (see docs/migrating.md for object "
        "storage).",
    )
    write_lease_seconds: float = Field(
        default=60.0,
        description="Lease on a write's checkpoint record, renewed while the write runs; a "
        "crashed run's record is reconciled this long after it stopped renewing.",
    )

    @field_validator("mode", mode="before")
    @classmethod
    def _mode(cls, value: Any) -> WriteMode:
        return mode_of(value)

    @model_validator(mode="after")
    def _merge_configured(self) -> DeltaIOManagerConfig:
        if self.mode is WriteMode.merge and self.merge_config is None:
            raise ValueError(
                "mode='merge' needs merge_config, e.g. MergeConfig(merge_type=MergeType.upsert, "
                "predicate='s.id = t.id', source_alias='s', target_alias='t')"
            )
        return self

    # --- where tables are ---------------------------------------------------------------

    def _root(self) -> str | None:
        return self.root_uri.rstrip("/") if self.root_uri else None

    def _options(self) -> dict[str, str]:
        return storage_option_values(self.storage_options, self.client_options)

    def _path(self, context: dg.OutputContext, table: str | None) -> TablePath:
        if self._root() is not None:
            located = dropin_path(context, self.schema_)
        else:
            located = lake_path(context)
        if table:
            return TablePath(table, located.name)
        return located

    def _table(self, context: dg.OutputContext, spec: WriteSpec) -> tuple[LakeTable, str]:
        return self._located(context, spec.table)

    def _located(self, context: dg.OutputContext, table: str | None) -> tuple[LakeTable, str]:
        located = self._path(context, table)
        root = self._root()
        if root is not None:
            return LakeTable(f"{root}/{located.path}", self._options()), located.name
        lake = self.lake or LakeResource()
        return lake.table(located.path), located.name

    def _checkpoint(self) -> CheckpointResource:
        if self.checkpoint is not None:
            return self.checkpoint
        root = self._root()
        return CheckpointResource.beside(root) if root is not None else CheckpointResource()

    def _commit_extras(self, context: dg.OutputContext) -> dict[str, str]:
        """The configured commit metadata (``custom_metadata``, and ``commit_properties``'
        custom_metadata, of the manager and then of the output)."""
        entries: dict[str, Any] = {}
        for properties in (self.commit_properties, setting(context, "commit_properties")):
            if isinstance(properties, dict) and isinstance(properties.get("custom_metadata"), dict):
                entries.update(properties["custom_metadata"])
        entries.update(self.custom_metadata or {})
        own = setting(context, "custom_metadata")
        if isinstance(own, dict):
            entries.update(own)
        return {str(k): str(v) for k, v in entries.items()}
