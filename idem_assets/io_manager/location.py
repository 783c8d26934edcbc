"""Where an output's Delta table lives.

Constructed like dagster-deltalake's IO managers (``root_uri``), tables sit where they put
them, so a team switching keeps its tables: ``<root>/<schema>/<table>``, the table being
the asset key's last part (ops: the output name or its ``table`` metadata) and the schema
its ``schema`` metadata, else the IO manager's ``schema``, else the asset key's
second-to-last part, else ``public``. Constructed with the project's ``LakeResource``,
tables sit at ``<lake>/<asset key path>``. ``idem/table`` overrides both.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import dagster as dg

DEFAULT_SCHEMA = "public"
_SEGMENT = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.=-]{0,127}$")


@dataclass(frozen=True)
class TablePath:
    """A table's path under its root, and the name its writes are tracked under."""

    path: str
    name: str


def _segment(value: object, what: str) -> str:
    text = str(value)
    if not _SEGMENT.match(text) or text in (".", ".."):
        raise ValueError(f"{what} {text!r} is not a plain path segment (letters, digits, _ . = -)")
    return text


def dropin_path(context: dg.OutputContext, schema: str | None) -> TablePath:
    """dagster-deltalake's ``<schema>/<table>`` for an asset or op output."""
    metadata = context.definition_metadata or {}
    chosen = getattr(metadata.get("schema"), "value", metadata.get("schema")) or schema
    if context.has_asset_key:
        key = context.asset_key.path
        table = key[-1]
        chosen = chosen or (key[-2] if len(key) > 1 else DEFAULT_SCHEMA)
    else:
        table = getattr(metadata.get("table"), "value", metadata.get("table")) or context.name
        chosen = chosen or DEFAULT_SCHEMA
    path = f"{_segment(chosen, 'schema')}/{_segment(table, 'table')}"
    return TablePath(path, path)


def lake_path(context: dg.OutputContext) -> TablePath:
    """The project lake's ``<asset key path>`` (ops: ``<output name>``)."""
    if context.has_asset_key:
        path = "/".join(_segment(p, "asset key part") for p in context.asset_key.path)
        return TablePath(path, context.asset_key.to_user_string())
    metadata = context.definition_metadata or {}
    table = getattr(metadata.get("table"), "value", metadata.get("table")) or context.name
    path = _segment(table, "table")
    return TablePath(path, path)
