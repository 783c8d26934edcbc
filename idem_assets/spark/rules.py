"""Row rules on typed columns in Spark expressions, with the local reader's reasons.

The rules of ``idem_assets.landing.normalise._row_rules``, in the same order: natural key
null or blank, version null, folder-date column null or of another day, non-nullable
columns null, and the declaration's quarantine-severity value rules
(``idem_assets.landing.rules.ValueRule``).
"""

from __future__ import annotations

from collections.abc import Mapping

import pyarrow as pa
from pyspark.sql import Column
from pyspark.sql import functions as F

from idem_assets.landing.contract import SourceContract
from idem_assets.landing.rules import ValueRule, anchored
from idem_assets.spark.values import shown, stripped, typed_text


def _java_anchored(pattern: str) -> str:
    # Java's "$" also matches before a final line break; "\z" is the end in both engines.
    whole = anchored(pattern)
    return whole[:-1] + r"\z" if whole.endswith("$") else whole


def violated(rule: ValueRule, value: Column) -> Column:
    """True where a non-null value breaks the rule (``ValueRule.violated`` in Spark)."""
    if rule.kind == "allowed":
        broken = ~value.isin(list(rule.allowed))
    elif rule.kind == "non_negative":
        broken = value < 0
    elif rule.kind == "pattern":
        assert rule.pattern is not None
        broken = ~value.cast("string").rlike(_java_anchored(rule.pattern))
    else:
        broken = F.lit(False)
        if rule.low is not None:
            broken = broken | (value < F.lit(rule.low))
        if rule.high is not None:
            broken = broken | (value > F.lit(rule.high))
    return value.isNotNull() & broken


def reason(rule: ValueRule, value: Column, kind: pa.DataType) -> Column:
    """The message for a row that breaks the rule (``ValueRule.reason`` in Spark)."""
    text = shown(typed_text(value, kind))
    column = rule.column
    if rule.kind == "allowed":
        choices = ", ".join(sorted(map(str, rule.allowed)))
        return F.concat(F.lit(f"{column}: value '"), text,
                        F.lit(f"' is not allowed (expected one of {choices})"))
    if rule.kind == "non_negative":
        return F.concat(F.lit(f"{column}: "), text, F.lit(" is negative (must be >= 0)"))
    if rule.kind == "pattern":
        return F.concat(F.lit(f"{column}: value '"), text,
                        F.lit(f"' does not match {rule.pattern}"))
    return F.concat(F.lit(f"{column}: "), text,
                    F.lit(f" is outside the range ({rule.describe()})"))


def row_rules(contract: SourceContract, typed: Mapping[str, Column], folder: Column
              ) -> list[Column]:
    """Each row rule's message where the row breaks it (null elsewhere), in the local order."""
    rules: list[Column] = []
    for key in contract.natural_key:
        value = typed[key]
        is_text = pa.types.is_string(contract.schema.field(key).type)
        blank = value.isNull() | (F.length(stripped(value)) == 0 if is_text else F.lit(False))
        rules.append(F.when(blank, F.lit(f"{key}: natural key is null or blank")))
    version = contract.version_column
    if version and version not in contract.natural_key:
        rules.append(F.when(typed[version].isNull(), F.lit(
            f"{version}: version column is null, so newest-wins cannot order this row")))
    if contract.date_column:
        name, value = contract.date_column, typed[contract.date_column]
        where = F.concat(F.lit("the partition folder date="), folder.cast("string"))
        rules.append(F.when(value.isNull(), F.concat(
            F.lit(f"{name}: is null but must equal "), where)))
        rules.append(F.when(value != folder, F.concat(
            F.lit(f"{name}: "), value.cast("string"), F.lit(" is outside "), where)))
    for field in contract.schema:
        if not field.nullable and field.name not in contract.natural_key:
            rules.append(F.when(typed[field.name].isNull(), F.lit(
                f"{field.name}: is null but the column is declared not nullable")))
    for rule in contract.quarantine_rules:
        value = typed[rule.column]
        rules.append(F.when(violated(rule, value),
                            reason(rule, value, contract.schema.field(rule.column).type)))
    return rules
