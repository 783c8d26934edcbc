"""Row rules on typed columns in Spark expressions, with the local reader's reasons.

The rules of ``idem_assets.landing.normalise._row_rules``, in the same order: natural key
null or blank, version null, folder-date column null or of another day, non-nullable
columns null, and the declaration's quarantine-severity value rules
(``idem_assets.landing.rules.ValueRule``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import pyarrow as pa
from pyspark.sql import Column
from pyspark.sql import functions as F

from idem_assets.landing.contract import SourceContract
from idem_assets.landing.rules import ValueRule, anchored
from idem_assets.spark.values import shown, stripped, typed_text


def violated(rule: ValueRule, value: Column) -> Column:
    """True where a non-null value breaks the rule (``ValueRule.violated`` in Spark)."""
    if rule.kind == "allowed":
        broken = ~value.isin(list(rule.allowed))
    elif rule.kind == "non_negative":
        broken = value < 0
    elif rule.kind == "pattern":
        assert rule.pattern is not None
        broken = ~value.cast("string").rlike(anchored(rule.pattern))
    else:
        broken = F.lit(False)
        if rule.low is not None:
            broken = broken | (value < F.lit(rule.low))
        if rule.high is not None:
            broken = broken | (value > F.lit(rule.high))
    return value.isNotNull() & broken


def reason(rule: ValueRule, value: Column, kind: pa.DataType) -> Column:
    """The message for a row that breaks the rule (``ValueRule.reason`` in Spark)."""
    before, after = rule.reason_parts()
    return F.concat(F.lit(before), shown(typed_text(value, kind)), F.lit(after))


@dataclass(frozen=True)
class RowRule:
    """A row rule: where a row breaks it, and the message for such a row."""

    broken: Column
    message: Column


def row_rules(
    contract: SourceContract, typed: Mapping[str, Column], folder: Column
) -> list[RowRule]:
    """The row rules of ``contract`` over typed columns, in the local reader's order."""
    rules: list[RowRule] = []
    for key in contract.natural_key:
        value = typed[key]
        is_text = pa.types.is_string(contract.schema.field(key).type)
        blank = value.isNull() | (F.length(stripped(value)) == 0 if is_text else F.lit(False))
        rules.append(RowRule(blank, F.lit(f"{key}: natural key is null or blank")))
    version = contract.version_column
    if version and version not in contract.natural_key:
        rules.append(
            RowRule(
                typed[version].isNull(),
                F.lit(f"{version}: version column is null, so newest-wins cannot order this row"),
            )
        )
    if contract.date_column and contract.daily:
        name, value = contract.date_column, typed[contract.date_column]
        where = F.concat(F.lit("the partition folder date="), folder.cast("string"))
        rules.append(
            RowRule(value.isNull(), F.concat(F.lit(f"{name}: is null but must equal "), where))
        )
        rules.append(
            RowRule(
                value != folder,
                F.concat(F.lit(f"{name}: "), value.cast("string"), F.lit(" is outside "), where),
            )
        )
    for field in contract.schema:
        if not field.nullable and field.name not in contract.natural_key:
            rules.append(
                RowRule(
                    typed[field.name].isNull(),
                    F.lit(f"{field.name}: is null but the column is declared not nullable"),
                )
            )
    for rule in contract.quarantine_rules:
        value = typed[rule.column]
        rules.append(
            RowRule(
                violated(rule, value), reason(rule, value, contract.schema.field(rule.column).type)
            )
        )
    return rules
