"""Source declarations: a landing source and its lake table, in YAML or Python (no Dagster)."""

from idem_assets.landing.column_types import ColumnType, parse_type
from idem_assets.sources.columns import Column
from idem_assets.sources.declaration import DailySource, LandingSource, SnapshotSource
from idem_assets.sources.load import DeclarationError, declaration_from_mapping, load_source
from idem_assets.sources.options import (
    BackfillOptions,
    CheckOptions,
    CsvOptions,
    NumberOptions,
    SensorOptions,
)
from idem_assets.sources.rules import AllowedRule, NonNegativeRule, PatternRule, RangeRule, Rule

__all__ = [
    "AllowedRule",
    "BackfillOptions",
    "CheckOptions",
    "Column",
    "ColumnType",
    "CsvOptions",
    "DailySource",
    "DeclarationError",
    "LandingSource",
    "NonNegativeRule",
    "NumberOptions",
    "PatternRule",
    "RangeRule",
    "Rule",
    "SensorOptions",
    "SnapshotSource",
    "declaration_from_mapping",
    "load_source",
    "parse_type",
]
