"""Source declarations: a landing source and its lake table, in YAML or Python (no Dagster)."""

from idem_assets.sources.files import DeclarationError, declaration_from_mapping, load_source
from idem_assets.sources.model import (
    CheckOptions,
    Column,
    CsvOptions,
    LandingSource,
    NumberOptions,
    Rule,
    SensorOptions,
    parse_type,
)

__all__ = [
    "CheckOptions",
    "Column",
    "CsvOptions",
    "DeclarationError",
    "LandingSource",
    "NumberOptions",
    "Rule",
    "SensorOptions",
    "declaration_from_mapping",
    "load_source",
    "parse_type",
]
