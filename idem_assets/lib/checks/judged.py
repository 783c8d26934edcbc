"""A span of landing days read once and judged day by day, for the landing checks.

Each valid row keeps the day folder it was read from, and rows are deduplicated within
their day, as a run of that day alone deduplicates them; the table, the quarantine table
and the landing files are each read once for the whole span. So the results of a
2,406-day range cost about one read of it, and each day's result equals what the day
checked alone reports.
"""

from __future__ import annotations

import datetime as dt
import functools
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import dagster as dg

from idem_assets.io_manager import PreparedBatch, Window, prepare, target_table
from idem_assets.io_manager.writes import strategy_for
from idem_assets.lake import LakeTable, read_rows
from idem_assets.lake.erasure import Erased
from idem_assets.lake.frames import conform, to_arrow
from idem_assets.lake.history import VALID_FROM
from idem_assets.lake.history_deletes import history_deletes
from idem_assets.lake.merge import Tombstones
from idem_assets.landing.erasure import quarantine_held
from idem_assets.landing.quarantine import QUARANTINE_TABLE, quarantine_conditions
from idem_assets.landing.reader import LandingBatch
from idem_assets.landing.rules import ValueRule
from idem_assets.lib.asset_def import LakeAssetDef
from idem_assets.lib.checks.conservation import conservation_result
from idem_assets.lib.checks.results import (
    DayShare,
    quarantine_share_result,
    top_reasons,
    value_rules_result,
)
from idem_assets.resources import LakeResource

if TYPE_CHECKING:
    import polars as pl
    import pyarrow as pa
    from deltalake import DeltaTable

    from idem_assets.lake.predicates import Condition

# The window a row belongs to, while a span is judged (never written anywhere).
_WINDOW = "__idem_window"


@dataclass(frozen=True)
class JudgedSpan:
    """A span's landing batch, deduplicated per window, with the stored counts per window."""

    definition: LakeAssetDef
    lake: LakeResource
    batch: LandingBatch
    windows: Sequence[Window]
    # Window index of each day folder (a snapshot's rows: under None).
    window_of: Mapping[dt.date | None, int]
    deduplicated: PreparedBatch
    # Valid rows left out because they hold an erased key, per window.
    erased_by_window: Counter[int]
    # The batch's quarantine rows a write leaves out because they hold an erased key.
    quarantine_erased: pa.Array

    @classmethod
    def of(
        cls,
        definition: LakeAssetDef,
        lake: LakeResource,
        batch: LandingBatch,
        windows: Sequence[Window],
        erased: Erased,
    ) -> JudgedSpan:
        """Judge ``batch`` (read for the span of ``windows``) window by window, leaving out
        the rows of ``erased`` keys."""
        import polars as pl  # here, not at import: see idem_assets._lazy

        window_of: dict[dt.date | None, int] = {
            day: index for index, window in enumerate(windows) for day in window.days()
        }
        if not any(window.partitioned for window in windows):
            window_of = {None: 0}
        rows = definition.derive(batch.rows) if definition.derive else batch.rows
        rows = conform(to_arrow(rows), definition.arrow_schema)
        if window_of == {None: 0} or not rows.num_rows:
            index = pl.zeros(rows.num_rows, dtype=pl.Int32, eager=True)
        else:
            days = pl.Series(batch.row_days())
            index = days.replace_strict(window_of, return_dtype=pl.Int32)
        rows = rows.append_column(_WINDOW, index.to_arrow())
        import pyarrow.compute as pc  # here, not at import: see idem_assets._lazy

        # Rows of erased keys are left out, as a write leaves them out, and counted.
        held = erased.held(rows)
        erased_rows = Counter(rows.filter(held).column(_WINDOW).to_pylist())
        rows = rows.filter(pc.invert(held))
        spec = definition.spec
        quarantine_erased = quarantine_held(
            batch.quarantine, erased, {batch.source: spec.erasable_keys}
        )
        if spec.dedupe and spec.natural_key:
            # The window is part of the key: each window deduplicated as if read alone.
            spec = spec.model_copy(update={"natural_key": (_WINDOW, *spec.natural_key)})
        deduplicated = prepare(spec, rows)
        return cls(
            definition,
            lake,
            batch,
            windows,
            window_of,
            deduplicated,
            erased_rows,
            quarantine_erased,
        )

    def _counts(self, values: list[object]) -> Counter[int]:
        """How many of ``values`` (day folders or partition days) fall in each window."""
        return Counter(self.window_of[value] for value in values if value in self.window_of)

    @functools.cached_property
    def _position(self) -> dict[Window, int]:
        return {window: index for index, window in enumerate(self.windows)}

    @functools.cached_property
    def _kept(self) -> pl.DataFrame:
        import polars as pl  # here, not at import: see idem_assets._lazy

        frame = pl.from_arrow(self.deduplicated.rows)
        assert isinstance(frame, pl.DataFrame)
        return frame

    @functools.cached_property
    def _kept_by_window(self) -> Counter[int]:
        return Counter(self._kept.get_column(_WINDOW).to_list())

    @functools.cached_property
    def _valid_by_window(self) -> Counter[int]:
        valid: Counter[int] = Counter()
        for day, rows in self.batch.rows_per_day.items():
            if day in self.window_of:
                valid[self.window_of[day]] += rows
        return valid

    @functools.cached_property
    def _raw_by_day(self) -> Counter[dt.date | None]:
        raw: Counter[dt.date | None] = Counter()
        for file in self.batch.files:
            raw[file.day] += file.rows
        return raw

    @functools.cached_property
    def _raw_by_window(self) -> Counter[int]:
        raw: Counter[int] = Counter()
        for day, rows in self._raw_by_day.items():
            if day in self.window_of:
                raw[self.window_of[day]] += rows
        return raw

    @functools.cached_property
    def _quarantine_kept(self) -> pa.Table:
        """The batch's quarantine rows a write keeps (not those holding an erased key)."""
        import pyarrow.compute as pc  # here, not at import: see idem_assets._lazy

        return self.batch.quarantine.filter(pc.invert(self.quarantine_erased))

    @functools.cached_property
    def _quarantine_erased_by_window(self) -> Counter[int]:
        """Quarantined rows left out because they hold an erased key, per window."""
        held = self.batch.quarantine.filter(self.quarantine_erased)
        if not self._span.partitioned:
            return Counter({0: held.num_rows})
        return self._counts(held.column("partition_date").to_pylist())

    @functools.cached_property
    def _reasons_by_day(self) -> dict[dt.date | None, list[object]]:
        """The kept quarantine reasons by the day folder of their rows."""
        quarantine = self._quarantine_kept
        out: dict[dt.date | None, list[object]] = {}
        for day, reason in zip(
            quarantine.column("partition_date").to_pylist(),
            quarantine.column("reason").to_pylist(),
            strict=True,
        ):
            out.setdefault(day, []).append(reason)
        return out

    @functools.cached_property
    def _span(self) -> Window:
        starts = [w.start for w in self.windows if w.start is not None]
        ends = [w.end for w in self.windows if w.end is not None]
        return Window(min(starts), max(ends)) if starts and ends else Window()

    @functools.cached_property
    def _loaded_by_window(self) -> Counter[int]:
        """Kept rows the table holds (or holds a newer version of), per window."""
        spec = self.definition.spec
        target = target_table(self.lake, spec, self.definition.key)
        table = target.open()
        if table is None:
            return Counter()
        strategy = strategy_for(spec)
        ranges = strategy.touched(strategy.window_slice(self._span), self.deduplicated)
        if spec.strategy == "history":
            return self._accounted_in_history(target, table)
        if spec.strategy == "merge" and spec.delete_column is not None:
            return self._accounted_with_deletes(target, table, ranges)
        if spec.strategy == "merge":
            key = list(spec.natural_key)
            stored = self._stored_of_keys(table, ranges, key)
            found = self._kept.join(stored.unique(), on=key, how="semi", nulls_equal=True)
            return Counter(found.get_column(_WINDOW).to_list())
        column = spec.partition_column
        if column is None or not self._span.partitioned:
            stored_rows = read_rows(table, ranges=ranges, columns=list(spec.natural_key) or None)
            return Counter({0: stored_rows.num_rows})
        days = read_rows(table, ranges=ranges, columns=[column]).column(column).to_pylist()
        return self._counts(days)

    def _stored_of_keys(
        self, table: DeltaTable, ranges: Sequence[Condition], columns: list[str]
    ) -> pl.DataFrame:
        """``columns`` of the stored rows a merge of the batch reads: within its pruning
        ``ranges`` (the write's), of the batch's values of the first key column (the whole
        key identifies a row: the first column only prunes what is read)."""
        import polars as pl  # here, not at import: see idem_assets._lazy

        first = self.definition.spec.natural_key[0]
        stored = pl.from_arrow(
            read_rows(
                table,
                ranges=ranges,
                keys=(first, self.deduplicated.rows.column(first).combine_chunks()),
                columns=columns,
            )
        )
        assert isinstance(stored, pl.DataFrame)
        return stored

    def _accounted_with_deletes(
        self, target: LakeTable, table: DeltaTable, ranges: Sequence[Condition]
    ) -> Counter[int]:
        """Kept rows of a merge with deletes that the table accounts for, per window: an
        upsert stored (or beaten by a newer stored row or a newer delete), a delete whose key
        is gone (or came back with a newer upsert). The table is read as the write reads it:
        within ``ranges``, the write's pruning of the batch."""
        import polars as pl  # here, not at import: see idem_assets._lazy

        spec = self.definition.spec
        assert spec.delete_column is not None and spec.version_column is not None
        key, version = list(spec.natural_key), spec.version_column
        newest = "__idem_newest"
        stored = self._stored_of_keys(table, ranges, [*key, version])
        stones = Tombstones.beside(target, key, version).read()
        dead = (
            pl.from_arrow(stones)
            if stones is not None
            else pl.DataFrame(schema={**stored.select(key).schema, version: stored.schema[version]})
        )
        assert isinstance(dead, pl.DataFrame)
        marked = pl.col(spec.delete_column) == spec.delete_value
        upserts = self._kept.filter(~marked.fill_null(False))
        deletes = self._kept.filter(marked.fill_null(False))
        stored_v = stored.rename({version: newest})
        dead_v = dead.rename({version: newest})
        up = upserts.join(stored_v, on=key, how="left").join(
            dead_v.rename({newest: "__idem_dead"}), on=key, how="left"
        )
        up_ok = up.filter(
            (pl.col(newest) >= pl.col(version)).fill_null(False)
            | (pl.col("__idem_dead") >= pl.col(version)).fill_null(False)
        )
        gone = deletes.join(stored_v, on=key, how="left").filter(
            pl.col(newest).is_null() | (pl.col(newest) > pl.col(version))
        )
        return Counter(up_ok.get_column(_WINDOW).to_list() + gone.get_column(_WINDOW).to_list())

    def _accounted_in_history(self, target: LakeTable, table: DeltaTable) -> Counter[int]:
        """Kept rows a history accounts for, per window: an upsert whose version is a row of
        its key (or lost its version to a delete), a delete kept beside the table."""
        import polars as pl  # here, not at import: see idem_assets._lazy

        spec = self.definition.spec
        assert spec.version_column is not None
        key, version = list(spec.natural_key), spec.version_column
        stored = pl.from_arrow(read_rows(table, columns=[*key, VALID_FROM]))
        assert isinstance(stored, pl.DataFrame)
        stored = stored.rename({VALID_FROM: version})
        dead = pl.from_arrow(history_deletes(target, key, version))
        assert isinstance(dead, pl.DataFrame)
        on = [*key, version]
        dead = dead.cast({c: stored.schema[c] for c in on})  # typed when none is stored yet
        known = pl.concat([stored.select(on), dead.select(on)], how="vertical_relaxed")
        if spec.delete_column is None:
            events = self._kept
        else:
            marked = (pl.col(spec.delete_column) == spec.delete_value).fill_null(False)
            events = self._kept.filter(~marked)
            deletes = self._kept.filter(marked).join(dead.select(on), on=on, how="semi")
            events = pl.concat([events.join(known, on=on, how="semi"), deletes])
            return Counter(events.get_column(_WINDOW).to_list())
        found = events.join(known, on=on, how="semi")
        return Counter(found.get_column(_WINDOW).to_list())

    @functools.cached_property
    def _quarantined_by_window(self) -> Counter[int]:
        """Rows the quarantine table holds for the source, per window."""
        contract = self.definition.landing_source
        assert contract is not None
        quarantine = self.lake.table(QUARANTINE_TABLE).open()
        if quarantine is None:
            return Counter()
        stored = read_rows(
            quarantine,
            ranges=quarantine_conditions(contract, self._span),
            columns=["partition_date"],
        )
        if not self._span.partitioned:
            return Counter({0: stored.num_rows})
        return self._counts(stored.column("partition_date").to_pylist())

    def conservation(self, window: Window) -> dg.AssetCheckResult:
        """raw == loaded + duplicates dropped + quarantined + erased, for one window (a
        quarantined row holding an erased key counts as erased)."""
        index = self._position[window]
        kept = self._kept_by_window[index]
        return conservation_result(
            window.label(),
            raw=self._raw_by_window[index],
            loaded=self._loaded_by_window[index],
            duplicates=self._valid_by_window[index] - kept - self.erased_by_window[index],
            quarantined=self._quarantined_by_window[index],
            expected_loaded=kept,
            erased=self.erased_by_window[index] + self._quarantine_erased_by_window[index],
        )

    def quarantine_share(self, window: Window, threshold: float) -> dg.AssetCheckResult:
        """The quarantine share check of one window, with its own days and reasons."""
        days: list[dt.date | None] = list(window.days()) if window.partitioned else [None]
        reasons = [r for day in days for r in self._reasons_by_day.get(day, ())]
        shares = [
            DayShare(day, self._raw_by_day[day], len(self._reasons_by_day.get(day, ())))
            for day in days
        ]
        return quarantine_share_result(shares, top_reasons(reasons), threshold, window.label())

    def value_rules(
        self, window: Window, rules: Sequence[tuple[str, ValueRule]]
    ) -> dg.AssetCheckResult:
        """Each rule's offending rows among the window's kept rows, in one result."""
        index = self._position[window]
        none = self._kept.clear().drop(_WINDOW)
        return value_rules_result(
            [
                (name, rule, self._broken_by_window(name, rule).get(index, none))
                for name, rule in rules
            ],
            self._kept_by_window[index],
            self.definition.spec.natural_key,
            window.label(),
            self.definition.spec.erasable_keys,
        )

    def _broken_by_window(self, name: str, rule: ValueRule) -> dict[int, pl.DataFrame]:
        """The kept rows breaking ``rule``, by window: one filter for the whole span."""
        found = self._broken.get(name)
        if found is None:
            broken = self._kept.filter(rule.violated())
            found = self._broken[name] = {
                int(key[0]): frame.drop(_WINDOW)  # type: ignore[arg-type]
                for key, frame in broken.partition_by(_WINDOW, as_dict=True).items()
            }
        return found

    @functools.cached_property
    def _broken(self) -> dict[str, dict[int, pl.DataFrame]]:
        return {}
