"""The configs of a matrix run, ranked and gated.

Pure logic (layer 1) over metrics.json dicts: :func:`rank_configs` orders the
``by_config`` entries by one aggregate, each with a 95% bootstrap interval of
that metric's per-case mean (``gate.bootstrap_interval``, seeded, so the same
run always gives the same interval) and names the best; :func:`gate_configs`
compares each config with the same config of a baseline through
``gate.gate_runs`` and ``gate.gate_verdict`` (the one gate policy), saying
which configs one side lacks.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pytest_rageval.evaluation import registry

from .aggregate import as_number
from .compare import Comparison, GateVerdict, gate_runs, gate_verdict
from .statistics import bootstrap_interval, per_case_getters

__all__ = ["ConfigGate", "add_ranking", "config_view", "default_rank_metric", "gate_configs", "rank_configs"]

#: the ranking's metric when none is chosen: the judge's correctness where every config has it, else recall
_DEFAULTS = ("correctness_avg", "recall_at_k_avg")


def default_rank_metric(by_config: Mapping[str, Any], *, judged: bool = True) -> str:
    """correctness_avg when an LLM judge scored it in every config, else recall_at_k_avg (the offline lexical
    judge's heuristic scores do not rank systems)."""
    for name in _DEFAULTS if judged else _DEFAULTS[-1:]:
        if by_config and all(
            as_number((entry.get("aggregate_metrics") or {}).get(name)) is not None for entry in by_config.values()
        ):
            return name
    return _DEFAULTS[-1]


def _config_cases(metrics_json: Mapping[str, Any], config_id: str) -> dict[str, Mapping[str, Any]]:
    cases = metrics_json.get("cases")
    if not isinstance(cases, Mapping):
        return {}
    return {str(k): v for k, v in cases.items() if isinstance(v, Mapping) and v.get("config_id") == config_id}


def rank_configs(metrics_json: Mapping[str, Any], metric: str | None = None) -> dict[str, Any] | None:
    """``config_ranking`` of metrics.json: ``{metric, lower_is_better, ranked: [{config_id, params, value, ci_low,
    ci_high, n, pass_rate}], best}``, best first; null values last; ties go to the higher share of cases passed,
    then to the smaller params (:func:`_params_order`); None without ``by_config``."""
    by_config = _configs_of(metrics_json)
    if not by_config:
        return None
    judge = metrics_json.get("judge")
    judged = isinstance(judge, Mapping) and judge.get("name") not in (None, "none") and not judge.get("heuristic")
    metric = metric or default_rank_metric(by_config, judged=judged)
    lower = registry.aggregate_direction(metric) == "lower" if metric in _known() else False
    getter = per_case_getters().get(metric)
    rows: list[dict[str, Any]] = []
    for config_id, entry in by_config.items():
        value = as_number((entry.get("aggregate_metrics") or {}).get(metric))
        values = (
            [v for v in (getter(c) for c in _config_cases(metrics_json, config_id).values()) if v is not None]
            if getter is not None
            else []
        )
        interval = bootstrap_interval(values) if values else None
        if interval is None and value is not None and len(values) == 1:
            interval = (value, value)
        ran = sum(int(as_number(entry.get(name)) or 0) for name in ("passed", "failed", "errors"))
        rows.append(
            {
                "config_id": config_id,
                "params": entry.get("params") or {},
                "value": value,
                "ci_low": interval[0] if interval else None,
                "ci_high": interval[1] if interval else None,
                "n": len(values),
                "pass_rate": int(as_number(entry.get("passed")) or 0) / ran if ran else None,
            }
        )
    rows.sort(
        key=lambda r: (
            r["value"] is None,
            0.0 if r["value"] is None else (r["value"] if lower else -r["value"]),
            -(r["pass_rate"] or 0.0),
            _params_order(r["params"]),
            r["config_id"],
        )
    )
    best = rows[0]["config_id"] if rows and rows[0]["value"] is not None else None
    return {"metric": metric, "lower_is_better": lower, "ranked": rows, "best": best}


def add_ranking(metrics_json: dict[str, Any], metric: str | None = None) -> None:
    """Set ``config_ranking`` of a matrix run's metrics.json (by ``metric``, else the one it was ranked by before,
    else the default); nothing without ``by_config``. The session, ``rageval merge`` and ``rageval judge`` call it."""
    previous = metrics_json.get("config_ranking")
    metric = metric or (previous.get("metric") if isinstance(previous, Mapping) else None)
    ranking = rank_configs(metrics_json, metric)
    if ranking is not None:
        metrics_json["config_ranking"] = ranking


def _params_order(params: Mapping[str, Any]) -> tuple[Any, ...]:
    """Ties go to the smaller params, by name (numbers compared as numbers: top_k=5 before top_k=10)."""
    return tuple(
        (name, (0, float(v), "") if isinstance(v, (int, float)) and not isinstance(v, bool) else (1, 0.0, str(v)))
        for name, v in sorted(params.items())
    )


def _known() -> frozenset[str]:
    return frozenset(registry.metric_aggregates())


# --------------------------------------------------------------------------- gate per config

#: metrics.json keys a config's view keeps from its run (what gate.check_invariants and the scope read)
_RUN_KEYS = ("eval_set_hash", "eval_set_files", "judge", "k", "partial")


def config_view(metrics_json: Mapping[str, Any], config_id: str) -> dict[str, Any] | None:
    """One config of a matrix run as a metrics.json of its own (its aggregates and cases), for gate.gate_runs."""
    by_config = metrics_json.get("by_config")
    entry = by_config.get(config_id) if isinstance(by_config, Mapping) else None
    if not isinstance(entry, Mapping):
        return None
    view: dict[str, Any] = {key: metrics_json[key] for key in _RUN_KEYS if key in metrics_json}
    view.update({key: entry.get(key) for key in ("total_tests", "passed", "failed", "errors", "skipped")})
    view["aggregate_metrics"] = entry.get("aggregate_metrics") or {}
    view["cases"] = _config_cases(metrics_json, config_id)
    return view


@dataclass
class ConfigGate:
    """Each config compared with the same config of the baseline; the configs one side lacks."""

    compared: dict[str, tuple[Comparison, GateVerdict]] = field(default_factory=dict)
    only_in_run: list[str] = field(default_factory=list)
    only_in_baseline: list[str] = field(default_factory=list)

    @property
    def failed(self) -> list[str]:
        """The config ids whose own gate failed (a regression, or not comparable)."""
        return [cid for cid, (_, verdict) in self.compared.items() if verdict.failed]

    def reason(self) -> str:
        """One line naming each failed config and why."""
        return "; ".join(f"config {cid}: {self.compared[cid][1].reason}" for cid in self.failed)

    def notes(self) -> list[str]:
        """What is said, not failed: configs one side lacks."""
        out = []
        if self.only_in_run:
            out.append(f"configs not in the baseline (not gated): {', '.join(self.only_in_run)}")
        if self.only_in_baseline:
            out.append(f"configs of the baseline not in this run: {', '.join(self.only_in_baseline)}")
        return out

    def as_dict(self) -> dict[str, Any]:
        """The ``comparison.by_config`` block of metrics.json."""
        return {
            "configs": {
                cid: {
                    "status": comparison.status,
                    "failed": verdict.failed,
                    "reason": verdict.reason,
                    "regressed_metrics": comparison.regressed_metrics,
                    "shared_cases": comparison.shared_cases,
                }
                for cid, (comparison, verdict) in self.compared.items()
            },
            "only_in_run": list(self.only_in_run),
            "only_in_baseline": list(self.only_in_baseline),
        }


def _configs_of(metrics_json: Mapping[str, Any]) -> Mapping[str, Any]:
    """``by_config`` of a metrics.json: config id -> its entry (an entry left out, null, is no config)."""
    by_config = metrics_json.get("by_config")
    return (
        {cid: entry for cid, entry in by_config.items() if isinstance(entry, Mapping)}
        if isinstance(by_config, Mapping)
        else {}
    )


def gate_configs(
    baseline: Mapping[str, Any],
    current: Mapping[str, Any],
    *,
    gate: Mapping[str, Any] | None = None,
    significance: bool = False,
    ignore_invariants: bool = False,
    allow_regressions: bool = False,
) -> ConfigGate | None:
    """Each config of ``current`` gated against the same config of ``baseline`` (gate_runs, gate_verdict);
    None when neither run has configs."""
    new = _configs_of(current)
    old = _configs_of(baseline)
    if not new and not old:
        return None
    result = ConfigGate(only_in_run=sorted(set(new) - set(old)), only_in_baseline=sorted(set(old) - set(new)))
    for config_id in sorted(set(new) & set(old)):
        old_view, new_view = config_view(baseline, config_id), config_view(current, config_id)
        assert old_view is not None and new_view is not None
        comparison = gate_runs(
            old_view, new_view, gate=gate, significance=significance, ignore_invariants=ignore_invariants
        )
        result.compared[config_id] = (comparison, gate_verdict(comparison, allow_regressions=allow_regressions))
    return result
