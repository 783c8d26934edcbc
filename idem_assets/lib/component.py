"""The YAML form of a source declaration: a Dagster component in a ``defs.yaml``.

.. code-block:: yaml

    type: idem_assets.lib.LandingSourceComponent
    attributes:
      name: orders
      first_day: 2024-03-01
      columns:
        - {name: order_id, type: int64}
        - {name: order_date, type: date}
        - {name: updated_at, type: timestamp}
      natural_key: [order_id]
      version: updated_at
      partition_date: order_date

``dg scaffold defs idem_assets.lib.LandingSourceComponent <path>`` writes a commented
starting point. The attributes are a ``LandingSource``; see docs/landing.md.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import dagster as dg
from pydantic import BaseModel

from idem_assets.lib.source import source_definitions
from idem_assets.sources import LandingSource

_TEMPLATE = """\
# A landing source and its lake table (docs/landing.md, "Declaring a source").
type: {type_name}
attributes:
  name: {name}                   # the {{source}} folder; also the asset and table name
  first_day: {today}             # first daily partition
  # or "{{source}}/{{yyyy}}/{{mm}}/{{dd}}", "{{source}}/dt={{date}}"
  layout: "{{source}}/date={{date}}"
  formats: [parquet, csv, jsonl] # .csv.gz and .jsonl.gz are read too
  columns:
    - name: id
      # int64, int32, float64, bool, string, date, timestamp, decimal(P,S)
      type: int64
      # from: ID                 # the files' name for the column, when it differs
    - name: day
      type: date
    - name: updated_at
      type: timestamp            # naive values are read in `timezone`
    # - name: status
    #   type: string
    #   rules:
    #     - allowed: [open, closed]   # a WARN check by default; severity: error | quarantine
  natural_key: [id]
  version: updated_at            # newest value wins when a key repeats
  partition_date: day            # must equal the day of the file's folder
  strategy: overwrite            # overwrite | merge (daily), replace | merge (snapshot: true)
  timezone: UTC
  # csv: {{delimiter: ";"}}
  # numbers: {{decimal: ",", thousands: "."}}
"""


class LandingSourceScaffolder(dg.Scaffolder):
    """Writes a commented ``defs.yaml`` that loads as it is."""

    def scaffold(self, request: dg.ScaffoldRequest) -> None:
        """Write ``defs.yaml`` into the target folder."""
        import datetime as dt

        name = _source_name(request.target_path)
        text = _TEMPLATE.format(
            type_name=request.type_name, name=name, today=dt.datetime.now(dt.UTC).date().isoformat()
        )
        target = request.target_path / "defs.yaml"
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")


def _source_name(folder: Path) -> str:
    cleaned = "".join(c if c.isalnum() else "_" for c in folder.name.lower()).strip("_")
    return cleaned if cleaned[:1].isalpha() else f"source_{cleaned}" if cleaned else "source"


@dg.scaffold_with(LandingSourceScaffolder)
class LandingSourceComponent(dg.Component):
    """A landing source and its lake table: asset, IO manager settings, checks and sensor."""

    def __init__(self, source: LandingSource) -> None:
        self.source = source

    @classmethod
    def get_model_cls(cls) -> type[BaseModel]:
        """The attributes of a ``defs.yaml``: a ``LandingSource`` declaration."""
        return LandingSource

    @classmethod
    def load(cls, attributes: BaseModel | None, context: dg.ComponentLoadContext) -> Any:
        """The component of validated attributes."""
        if not isinstance(attributes, LandingSource):
            raise TypeError(f"{cls.__name__} needs a LandingSource, got {attributes!r}")
        return cls(attributes)

    def build_defs(self, context: dg.ComponentLoadContext) -> dg.Definitions:
        """The source's asset, checks and landing sensor."""
        return source_definitions(self.source)
