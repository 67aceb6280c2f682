"""CaseRecords -> the aggregate part of metrics.json.

Pure: no pytest, no I/O. Records may arrive in any order (serial runs, xdist
workers, merged shards); every number is independent of that order, because
sums are kept exactly (Shewchuk partials, rounded once at the end) and the
latency list is sorted before taking percentiles.

Scored records are those neither invalid, errored nor skipped; averages and
latency use only them. Every metric aggregate is the mean of a per-case value
the metric registry defines (:func:`registry.case_means`, which the gate's
paired comparison resamples too). Judge coverage counts each attempted verdict under the
metric it feeds (:func:`registry.coverage_metric`): a repeated case counts once,
attempted when any run attempted it and scored when its combined metric is not
null. Records with ``invalid_line`` count only in
``invalid_lines``. Unknown outcomes count as errors; a missing ``answerable``
means answerable; a missing category groups under "uncategorized".
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from pytest_rageval.evaluation import registry
from pytest_rageval.evaluation.registry import CaseMean, as_number
from pytest_rageval.evaluation.stability import RepeatTally

from .known import miss_name

__all__ = [
    "Aggregator",
    "CaseTable",
    "aggregate",
    "as_number",
    "percentile",
]

_OUTCOMES = ("passed", "failed", "error", "skipped", "xfailed", "xpassed")
_UNSCORED = ("error", "skipped")
_PASSING = ("passed", "xpassed")
_NO_CATEGORY = "uncategorized"


def percentile(sorted_values: list[float], q: float) -> float | None:
    """The ``q``-th percentile (0-100) of sorted values, linear between closest ranks.

    Same as numpy's default (``method="linear"``); None for an empty list.
    """
    n = len(sorted_values)
    if n == 0:
        return None
    pos = (n - 1) * (q / 100.0)
    lo = math.floor(pos)
    hi = min(lo + 1, n - 1)
    frac = pos - lo
    a, b = sorted_values[lo], sorted_values[hi]
    if frac == 0 or a == b:
        return float(a)
    return a + (b - a) * frac


class _ExactSum:
    """A running float sum whose result does not depend on the order of ``add``."""

    __slots__ = ("_partials",)

    def __init__(self) -> None:
        self._partials: list[float] = []

    def add(self, x: float) -> None:
        partials = self._partials
        i = 0
        for y in partials:
            if abs(x) < abs(y):
                x, y = y, x
            hi = x + y
            lo = y - (hi - x)
            if lo:
                partials[i] = lo
                i += 1
            x = hi
        partials[i:] = [x]

    def value(self) -> float:
        return math.fsum(self._partials)


class _Mean:
    """Running exact sum and count of the non-null values of one metric."""

    __slots__ = ("n", "total")

    def __init__(self) -> None:
        self.total = _ExactSum()
        self.n = 0

    def add(self, value: float | None) -> None:
        if value is None:
            return
        self.total.add(value)
        self.n += 1

    def result(self) -> float | None:
        return self.total.value() / self.n if self.n else None


def _outcome(record: Mapping[str, Any]) -> str:
    outcome = record.get("outcome")
    # anything unknown is treated as an error: it is not a result we can score
    return outcome if outcome in _OUTCOMES else "error"


def _answerable(record: Mapping[str, Any]) -> bool:
    value = record.get("answerable")
    return True if value is None else bool(value)


#: a scored record's values: (aggregate key, value) of every aggregate the record counts in
_Values = tuple[tuple[str, float], ...]


def _values(answerable: bool, metrics: Mapping[str, Any], means: Mapping[str, CaseMean]) -> _Values:
    """The per-case values the groups average (registry.case_means), computed once per record."""
    out = []
    for key, mean in means.items():
        value = mean.run_value(answerable, metrics)
        if value is not None:
            out.append((key, value))
    return tuple(out)


def _tags(record: Mapping[str, Any]) -> list[str]:
    tags = record.get("tags") or []
    return [tags] if isinstance(tags, str) else [str(tag) for tag in tags]


def xfail_counts(metrics: Mapping[str, Any]) -> str:
    """``", 4 xfailed, 1 xpassed"`` (the nonzero ones, in pytest's words), to follow a passed/failed count."""
    return "".join(
        f", {metrics[name]} {name}"
        for name in ("xfailed", "xpassed")
        if isinstance(metrics.get(name), int) and metrics[name]
    )


class _Group:
    """The scalar metrics and counts of one group of records (or of the whole run)."""

    def __init__(self, keys: Iterable[str]) -> None:
        self.n = 0
        self.passed = 0
        self.failed = 0
        self.errors = 0
        self.xfailed = 0
        self.xpassed = 0
        self.means: dict[str, _Mean] = {key: _Mean() for key in keys}

    def add(self, outcome: str, values: _Values | None) -> None:
        """Add one non-invalid, non-skipped record; ``values`` is None for an unscored one."""
        self.n += 1
        if outcome == "passed":
            self.passed += 1
        elif outcome == "failed":
            self.failed += 1
        elif outcome == "xfailed":
            self.xfailed += 1
        elif outcome == "xpassed":
            self.xpassed += 1
        else:
            self.errors += 1
        if values is None:
            return
        for key, value in values:
            self.means[key].add(value)

    def scalars(self) -> dict[str, float | None]:
        """Every metric aggregate (``*_avg``, ``*_rate``, the abstention ones), in metrics.json order."""
        return {key: mean.result() for key, mean in self.means.items()}

    def summary(self) -> dict[str, Any]:
        """A by_tag / by_category / by_answerable entry."""
        out: dict[str, Any] = dict(self.scalars())
        out.update(n=self.n, passed=self.passed, failed=self.failed, errors=self.errors)
        out.update((name, count) for name, count in (("xfailed", self.xfailed), ("xpassed", self.xpassed)) if count)
        return out


#: A row of :class:`CaseTable`: outcome, metric names (shared), metric values, category, tags (shared), answerable,
#: test case id, definition (None: absent), and the optional fields after it ((name, value) pairs, or None).
_Row = tuple[str, tuple[str, ...], tuple[Any, ...], Any, tuple[str, ...], bool, Any, Any, Any]
_OUTCOME_NAMES = {name: name for name in _OUTCOMES}


class CaseTable(Mapping[str, dict[str, Any]]):
    """metrics.json's ``cases``: per case key the small entry the gate pairs cases with (outcome, metrics,
    category, tags, answerable, test case id, and definition, error kind, empty response, config id when set).

    Kept as one tuple per case, its metric names, tags and category shared with the cases that have the same
    (a run of 100,000 cases would otherwise keep 100,000 dicts of dicts); each read makes the case's dict anew,
    as metrics.json holds it, so a reader may change what it gets without changing the table.
    """

    __slots__ = ("_rows", "_shared")

    def __init__(self, rows: dict[str, _Row] | None = None, shared: dict[Any, Any] | None = None) -> None:
        self._rows: dict[str, _Row] = {} if rows is None else rows
        self._shared: dict[Any, Any] = {} if shared is None else shared

    def add(self, key: str, record: Mapping[str, Any], outcome: str, metrics: Mapping[str, Any]) -> None:
        """The entry of ``record`` (one CaseRecord) under ``key``, replacing the one there."""
        definition = record.get("definition")
        extras: list[tuple[str, Any]] = []
        error = record.get("error")
        if outcome == "error" and isinstance(error, Mapping) and error.get("kind"):
            extras.append(("error_kind", str(error["kind"])))  # the gate pairs timeout rates per case
        if record.get("empty_response"):
            extras.append(("empty_response", True))
        if record.get("config_id"):
            extras.append(("config_id", str(record["config_id"])))  # the config matrix: by_config, its ranking and gate
        extras.extend(_baseline_extras(record, outcome))
        turns = _turn_entries(record)
        category = record.get("category")
        self._rows[key] = (
            _OUTCOME_NAMES[outcome],
            self._share(tuple(metrics)),
            tuple(metrics.values()),
            self._share(category) if isinstance(category, str) else category,
            self._share(tuple(_tags(record))),
            _answerable(record),
            record.get("test_case_id"),
            definition
            if isinstance(definition, str)
            else None,  # the gate compares a case only while its definition holds
            self._share(tuple(extras)) if extras else None,
        )
        if turns is not None:  # (dicts: kept apart, not shared)
            row = self._rows[key]
            self._rows[key] = (*row[:-1], (*(row[-1] or ()), ("turns", turns)))

    def _share(self, value: Any) -> Any:
        """An equal value seen before (names, tags, texts repeat from case to case), else ``value``, kept for the next."""
        return self._shared.setdefault(value, value)

    def sorted(self) -> CaseTable:
        """The same entries in key order."""
        return CaseTable({key: self._rows[key] for key in sorted(self._rows)}, self._shared)

    def __getitem__(self, key: str) -> dict[str, Any]:
        outcome, names, values, category, tags, answerable, test_case_id, definition, extras = self._rows[key]
        case: dict[str, Any] = {
            "outcome": outcome,
            "metrics": dict(zip(names, values)),
            "category": category,
            "tags": list(tags),
            "answerable": answerable,
            "test_case_id": test_case_id,
        }
        if definition is not None:
            case["definition"] = definition
        if extras:
            case.update((name, list(value) if isinstance(value, tuple) else value) for name, value in extras)
        return case

    def __iter__(self) -> Iterator[str]:
        return iter(self._rows)

    def __len__(self) -> int:
        return len(self._rows)

    def __contains__(self, key: object) -> bool:
        return key in self._rows

    def __repr__(self) -> str:
        return f"CaseTable({len(self._rows)} cases)"


class Aggregator:
    """Accumulates CaseRecords (docs/internals.md) into metrics.json aggregates.

    Memory: running sums per group and metric; per case only a compact row of
    ``cases`` (:class:`CaseTable`) and one latency value are kept. ``keep_cases``:
    False for an aggregator whose ``cases`` nobody reads (a config's, in ``by_config``).
    """

    def __init__(self, *, keep_cases: bool = True) -> None:
        self._case_means = registry.case_means()  # the registry as it is when aggregation starts
        self._all = self._new_group()
        self._by_tag: dict[str, _Group] = {}
        self._by_category: dict[str, _Group] = {}
        self._by_answerable = {"answerable": self._new_group(), "unanswerable": self._new_group()}
        self._counts = {name: 0 for name in _OUTCOMES}
        self._invalid_lines = 0
        self._known = 0  # known failures: failed in the baseline the same way, xfailed now (gate/known.py)
        self._fixed = 0  # failed in the baseline, passing now
        self._answerable = 0
        self._unanswerable = 0
        self._flaky = 0
        self._repeats = RepeatTally()  # metrics.json "repeats": classes, flake rate, spread (stability.py)
        self._timeouts = 0
        self._empty = 0
        self._latencies: list[float] = []
        self._ttfts: list[float] = []  # time to first token of the streamed answers
        self._latency_total = _ExactSum()
        self._judge_tokens = 0
        self._judge_usd = _ExactSum()
        self._cache_hits = 0
        self._cache_misses = 0
        self._coverage: dict[str, list[int]] = {}  # metric -> [scored, attempted]
        self._keep_cases = keep_cases
        self._cases = CaseTable()
        self._by_config: dict[
            str, tuple[dict[str, Any], Aggregator]
        ] = {}  # config id -> (params, its records' aggregator)
        self._by_turn: dict[str, _Group] = {}  # conversations: "1", "2", "3+" -> that turn's values and outcomes

    def add(self, record: Mapping[str, Any]) -> None:
        """Add one CaseRecord."""
        if record.get("invalid_line"):
            self._invalid_lines += 1
            return
        self._add_config(record)
        outcome = _outcome(record)
        metrics = record.get("metrics") or {}
        self._counts[outcome] += 1
        kind = since_baseline(record)
        if kind == "known" and outcome == "xfailed":
            self._known += 1
        elif kind == "fixed" and outcome in _PASSING:
            self._fixed += 1
        error = record.get("error")
        if self._keep_cases:
            self._cases.add(_record_key(record), record, outcome, metrics)
        if record.get("flaky"):
            self._flaky += 1
        self._repeats.add(_record_key(record), record, outcome)
        self._add_cost(record)
        if outcome == "skipped":
            return

        answerable = _answerable(record)
        if answerable:
            self._answerable += 1
        else:
            self._unanswerable += 1
        if isinstance(error, Mapping) and error.get("kind") == "timeout":
            self._timeouts += 1
        if record.get("empty_response"):
            self._empty += 1

        turns = _turns(record)
        if turns is not None:
            values = None if outcome in _UNSCORED else self._add_turns(turns, outcome)
        else:
            values = None if outcome in _UNSCORED else _values(answerable, metrics, self._case_means)
        groups = [self._all, self._by_answerable["answerable" if answerable else "unanswerable"]]
        groups.append(self._group(self._by_category, record.get("category") or _NO_CATEGORY))
        for tag in dict.fromkeys(_tags(record)):  # a tag listed twice counts once
            groups.append(self._group(self._by_tag, tag))
        for group in groups:
            group.add(outcome, values)

        if turns is not None:
            for turn in turns:
                self._add_judge_coverage(turn, _turn_outcome(turn), turn.get("metrics") or {})
            return
        self._add_judge_coverage(record, outcome, metrics)
        if outcome not in _UNSCORED:
            latency = as_number(metrics.get("latency_ms"))
            if latency is None:
                latency_block = record.get("latency")
                if isinstance(latency_block, Mapping):
                    latency = as_number(latency_block.get("total_ms"))
            if latency is not None:
                self._latencies.append(latency)
                self._latency_total.add(latency)
            ttft = as_number(metrics.get("ttft_ms"))
            if ttft is not None:
                self._ttfts.append(ttft)

    def _add_turns(self, turns: list[Mapping[str, Any]], outcome: str) -> _Values:
        """A conversation's turns: each scored turn's values (what the run's and its groups' averages take in,
        so every turn counts as a case does), its latency, and its entry in ``by_turn``."""
        values: list[tuple[str, float]] = []
        for turn in turns:
            turn_outcome = _turn_outcome(turn)
            scored = None
            if turn_outcome not in _UNSCORED:
                scored = _values(_answerable(turn), turn.get("metrics") or {}, self._case_means)
                values.extend(scored)
                latency = as_number((turn.get("metrics") or {}).get("latency_ms"))
                if latency is not None:
                    self._latencies.append(latency)
                    self._latency_total.add(latency)
            index = as_number(turn.get("turn")) or 0
            self._group(self._by_turn, str(int(index)) if index < 3 else "3+").add(turn_outcome, scored)
        return tuple(values)

    def _add_config(self, record: Mapping[str, Any]) -> None:
        """A record of a config of the matrix also counts in that config's own aggregates (``by_config``)."""
        config_id = record.get("config_id")
        if not config_id:
            return
        params = record.get("matrix")
        entry = self._by_config.get(str(config_id))
        if entry is None:
            entry = self._by_config[str(config_id)] = (
                dict(params) if isinstance(params, Mapping) else {},
                Aggregator(keep_cases=False),
            )
        entry[1].add({k: v for k, v in record.items() if k != "config_id"})

    def _config_results(self) -> dict[str, Any]:
        """``by_config``: per config id its params, counts and aggregate metrics (present only with a matrix)."""
        out: dict[str, Any] = {}
        for config_id, (params, agg) in sorted(self._by_config.items()):
            result = agg.result()
            out[config_id] = {
                "params": params,
                **{
                    name: result[name]
                    for name in ("total_tests", "passed", "failed", "errors", "skipped", "xfailed", "xpassed")
                },
                "aggregate_metrics": result["aggregate_metrics"],
            }
        return {"by_config": out} if out else {}

    def _new_group(self) -> _Group:
        return _Group(self._case_means)

    def _group(self, groups: dict[str, _Group], name: Any) -> _Group:
        name = str(name)
        group = groups.get(name)
        if group is None:
            group = groups[name] = self._new_group()
        return group

    def _add_cost(self, record: Mapping[str, Any]) -> None:
        cost = record.get("cost")
        if isinstance(cost, Mapping):
            tokens = as_number(cost.get("judge_tokens"))
            if tokens is not None:
                self._judge_tokens += int(tokens)
            usd = as_number(cost.get("judge_cost_usd"))
            if usd is not None:
                self._judge_usd.add(usd)
        cache = record.get("judge_cache")
        if isinstance(cache, Mapping):
            self._cache_hits += int(as_number(cache.get("hits")) or 0)
            self._cache_misses += int(as_number(cache.get("misses")) or 0)

    def _add_judge_coverage(self, record: Mapping[str, Any], outcome: str, metrics: Mapping[str, Any]) -> None:
        """Count each verdict attempted for this case once, under the metric it feeds.

        ``judge_attempted`` lists verdict names. A record without it (one cut
        short before the list was written) counts the verdicts it holds
        (``judge``, by verdict name) and the judge metrics it scored; every name
        goes through the registry to the metric it feeds.
        """
        attempted = record.get("judge_attempted")
        if not isinstance(attempted, list):
            held = record.get("judge")
            attempted = [
                *(held if isinstance(held, Mapping) else {}),
                *(m for m in registry.metric_names("judge") if as_number(metrics.get(m)) is not None),
            ]
        for metric in dict.fromkeys(registry.coverage_metric(str(verdict)) for verdict in attempted):
            entry = self._coverage.setdefault(metric, [0, 0])
            entry[1] += 1
            if outcome != "error" and as_number(metrics.get(metric)) is not None:
                entry[0] += 1

    def result(self) -> dict[str, Any]:
        """The aggregate part of metrics.json (floats unrounded)."""
        # xfailed and xpassed are their own counts, as in pytest's summary line: never passed or failed
        passed, failed, errors = self._counts["passed"], self._counts["failed"], self._counts["error"]
        total = passed + failed + errors
        ran = total + self._counts["xfailed"] + self._counts["xpassed"]

        def rate(count: int) -> float | None:
            return count / ran if ran else None

        latencies = sorted(self._latencies)
        aggregate_metrics: dict[str, Any] = dict(self._all.scalars())
        aggregate_metrics["latency"] = {
            "p50_ms": percentile(latencies, 50),
            "p95_ms": percentile(latencies, 95),
            "total_ms": self._latency_total.value() if latencies else None,
        }
        if self._ttfts:  # some answer was streamed
            ttfts = sorted(self._ttfts)
            aggregate_metrics["latency"].update(ttft_p50_ms=percentile(ttfts, 50), ttft_p95_ms=percentile(ttfts, 95))
        aggregate_metrics["cost"] = {
            "judge_total_tokens": self._judge_tokens,
            "judge_total_usd": self._judge_usd.value(),
        }
        aggregate_metrics["operational_metrics"] = {
            "error_rate": rate(errors),
            "timeout_rate": rate(self._timeouts),
            "empty_response_rate": rate(self._empty),
        }
        aggregate_metrics["judge_cache"] = {"hits": self._cache_hits, "misses": self._cache_misses}
        aggregate_metrics["judge_coverage"] = {
            metric: {
                "scored": scored,
                "attempted": attempted,
                "coverage": scored / attempted if attempted else None,
            }
            for metric, (scored, attempted) in sorted(self._coverage.items())
        }
        return {
            "aggregate_metrics": aggregate_metrics,
            "by_tag": {tag: group.summary() for tag, group in sorted(self._by_tag.items())},
            "by_category": {cat: group.summary() for cat, group in sorted(self._by_category.items())},
            "by_answerable": {name: group.summary() for name, group in self._by_answerable.items()},
            "total_tests": total,
            "passed": passed,
            "failed": failed,
            "errors": errors,
            "skipped": self._counts["skipped"],
            "xfailed": self._counts["xfailed"],
            "xpassed": self._counts["xpassed"],
            "invalid_lines": self._invalid_lines,
            "known_failures": self._known,
            "fixed_since_baseline": self._fixed,
            "answerable_tests": self._answerable,
            "unanswerable_tests": self._unanswerable,
            "flaky": self._flaky,
            "repeats": self._repeats.result(),
            "judge_coverage": aggregate_metrics["judge_coverage"],  # documented at the top level too
            "cases": self._cases.sorted(),
            **self._config_results(),
            **self._turn_results(),
        }

    def _turn_results(self) -> dict[str, Any]:
        """``by_turn``: per turn of the conversations ("1", "2", "3+") its counts and aggregates (with conversations)."""
        order = sorted(self._by_turn, key=lambda name: (name == "3+", name))
        return {"by_turn": {name: self._by_turn[name].summary() for name in order}} if order else {}


def _turns(record: Mapping[str, Any]) -> list[Mapping[str, Any]] | None:
    """A conversation's turns (each a mapping), or None for a one-question record."""
    turns = record.get("turns")
    if not isinstance(turns, list):
        return None
    return [turn for turn in turns if isinstance(turn, Mapping)]


def _turn_outcome(turn: Mapping[str, Any]) -> str:
    outcome = turn.get("outcome")
    return outcome if outcome in ("passed", "failed") else "error"


def _turn_entries(record: Mapping[str, Any]) -> tuple[dict[str, Any], ...] | None:
    """A conversation's ``turns`` in metrics.json's ``cases``: each turn's outcome, metrics and answerable, which
    the gate pairs by case and turn index."""
    turns = _turns(record)
    if turns is None:
        return None
    return tuple(
        {"outcome": _turn_outcome(t), "metrics": dict(t.get("metrics") or {}), "answerable": _answerable(t)}
        for t in turns
    )


def since_baseline(record: Mapping[str, Any]) -> str | None:
    """``known`` (a known failure, xfailed), ``worse``, ``fixed`` or None: how a record stands against the baseline."""
    verdict = record.get("since_baseline")
    kind = verdict.get("kind") if isinstance(verdict, Mapping) else None
    return kind if kind in ("known", "worse", "fixed") else None


def _baseline_extras(record: Mapping[str, Any], outcome: str) -> list[tuple[str, Any]]:
    """A case entry's ``missed`` (the metrics it missed: a later run tells a known failure by them), and
    ``known_failure`` / ``fixed_since_baseline`` when so."""
    extras: list[tuple[str, Any]] = []
    misses = record.get("misses")
    if isinstance(misses, list) and misses and outcome in ("failed", "xfailed"):
        extras.append(("missed", tuple(sorted({miss_name(m) for m in misses if isinstance(m, Mapping)}))))
    kind = since_baseline(record)
    if kind == "known" and outcome == "xfailed":
        extras.append(("known_failure", True))
    elif kind == "fixed" and outcome in _PASSING:
        extras.append(("fixed_since_baseline", True))
    return extras


def _record_key(record: Mapping[str, Any]) -> str:
    key = record.get("key")
    if key:
        return str(key)
    case_id = record.get("test_case_id")
    file = record.get("file")
    return f"{file}::{case_id}" if file else str(case_id)


def aggregate(records: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """Aggregate CaseRecords in one call."""
    agg = Aggregator()
    for record in records:
        agg.add(record)
    return agg.result()
