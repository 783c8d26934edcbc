"""Checks of what a landing source delivered: conservation, quarantine share, value rules.

One read of a partition's landing files reports each of them:

- ``conservation``: raw rows == loaded + duplicates dropped + quarantined;
- ``quarantine_share``: warns when more than the declared share of a day's rows was
  quarantined, fails (ERROR) when a day with rows loads none: a day whose rows were all
  refused never shows all green;
- ``value_rules``, when the source declares any: every value rule of the partition's loaded
  rows in one result, each rule's counts and samples (``<column>_<kind>``) in its metadata;
  it fails with the severity of the most severe broken rule (WARN by default), so a day
  that breaks only WARN rules never blocks downstream, even where the source's checks
  block. One check for all rules, not one per rule: a check result is an event Dagster
  stores for every day of a run, and a 12-rule source over years of days would store
  twelve a day.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import dagster as dg

from idem_assets.io_manager import Window
from idem_assets.lake.erasure import Erased
from idem_assets.lib.asset_def import LakeAssetDef
from idem_assets.lib.checks.conservation import CONSERVATION
from idem_assets.lib.checks.judged import JudgedSpan
from idem_assets.lib.checks.per_partition import CheckName, LakeCheck, spans
from idem_assets.lib.checks.proofs import Reads
from idem_assets.lib.checks.results import (
    QUARANTINE_SHARE,
    VALUE_RULES,
    rule_names,
    rules_severity,
)
from idem_assets.lib.landing_io import read_landing
from idem_assets.resources import LakeResource


def landing_checks(definition: LakeAssetDef) -> LakeCheck:
    """Conservation, quarantine share and value-rule checks of a landing asset, in one read."""
    contract = definition.landing_source
    assert contract is not None, f"{definition.name} reads no landing source"
    rules = definition.value_rules
    share = definition.quarantine_share
    names = rule_names(rules)
    checks = (
        CheckName(
            CONSERVATION,
            "Every raw landing row of the partition is accounted for: "
            "loaded into the table, dropped as a duplicate of a newer row, or stored in "
            "quarantine with a reason.",
        ),
        CheckName(
            QUARANTINE_SHARE,
            f"At most {share:.1%} of each day's raw rows are "
            "quarantined (WARN above); a day with rows that loads none fails (ERROR). "
            "Metadata lists the top reasons.",
        ),
        *(
            (
                CheckName(
                    VALUE_RULES,
                    "Value rules: "
                    + "; ".join(
                        f"{name}: {rule.describe()} ({rule.severity.upper()})"
                        for name, rule in zip(names, rules, strict=True)
                    )
                    + ". Reports each rule's counts and samples of breaking rows.",
                    rules_severity(rules),
                ),
            )
            if rules
            else ()
        ),
    )

    def evaluate(
        definition: LakeAssetDef,
        lake: LakeResource,
        windows: Sequence[Window],
        selected: frozenset[str],
        *,
        erased: Erased,
    ) -> Iterator[tuple[int, dg.AssetCheckResult]]:
        daily = contract.daily and all(w.partitioned for w in windows)
        for span, members in spans(windows) if daily else [(w, [i]) for i, w in enumerate(windows)]:
            batch = read_landing(lake, contract, span)
            judged = JudgedSpan.of(definition, lake, batch, [windows[i] for i in members], erased)
            for index, window in zip(members, judged.windows, strict=True):
                if CONSERVATION in selected:
                    yield index, judged.conservation(window)
                if QUARANTINE_SHARE in selected:
                    yield index, judged.quarantine_share(window, share)
                if rules and VALUE_RULES in selected:
                    yield index, judged.value_rules(window, list(zip(names, rules, strict=True)))

    return LakeCheck(
        names=checks,
        evaluate_windows=evaluate,
        reads=frozenset({Reads.INPUTS, Reads.SLICE, Reads.QUARANTINE, Reads.ERASURES}),
    )
