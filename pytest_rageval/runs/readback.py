"""What the plugin reads back (baselines, older runs, run folders), checked before any of it is used.

metrics.json, config.json and results.jsonl are written by the plugin, but an older version, a hand edit or
a hostile file may hold anything. Their JSON syntax is read strictly elsewhere (:func:`safejson.read_file`,
:func:`.folder.load_record_line`); here their values are: every number finite and within float range,
every string valid Unicode (no lone surrogate), and each field of the type it must be, by the shapes below
(:data:`METRICS`, :data:`RECORD`, :data:`CONFIG`, :data:`CHUNK`, :data:`HISTORY_ENTRY`, :data:`CALIBRATION`). The shapes are the one
declaration of these files: they name every field the plugin writes (:func:`undeclared` finds a written field
they lack; the tests run real runs through it) and the reference page of the run artifacts is generated from
them (:func:`fields`). Reading, unknown fields are allowed, and any field may be missing or null. Each problem is one
line naming the field path and what is wrong (``cases["s.jsonl::a"].metrics.mrr: expected a number, got
'abc'``), so a damaged file is one message naming file, field and problem, never a traceback.

Pure apart from :func:`read_json`, which reads one file.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, get_type_hints

from pytest_rageval import safejson
from pytest_rageval.errors import DataError
from pytest_rageval.evaluation.schema import HeadingPath
from pytest_rageval.evaluation.stored_chunk import StoredChunk

__all__ = [
    "CALIBRATION",
    "CHUNK",
    "CONFIG",
    "FORMAT_VERSION",
    "HISTORY_ENTRY",
    "METRICS",
    "RECORD",
    "ReadbackError",
    "fields",
    "file_problem",
    "problems",
    "read_json",
    "undeclared",
]


@dataclass(frozen=True)
class Kind:
    """A leaf of a shape: what a value must be (``name``, as a message says it) and the test of it."""

    name: str
    test: Callable[[Any], bool]


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


NUMBER = Kind("a number", _is_number)
INTEGER = Kind("an integer", lambda v: isinstance(v, int) and not isinstance(v, bool))
TEXT = Kind("a string", lambda v: isinstance(v, str))
FLAG = Kind("true or false", lambda v: isinstance(v, bool))
#: a metric's value: a number, or true/false (counted as 1/0)
SCORE = Kind("a number or true/false", lambda v: isinstance(v, (int, float)))
OBJECT = Kind("an object", lambda v: isinstance(v, dict))
LIST = Kind("a list", lambda v: isinstance(v, list))
#: a value the readers take as it comes (free-form, or shown as unknown when it is not what they expect)
ANY = Kind("any value", lambda v: True)
#: a heading path in either form: ``"# Setup > ## Embeddings"`` or ``["Setup", "Embeddings"]``
HEADING = Kind(
    "a heading path (a string or a list of strings)",
    lambda v: isinstance(v, str) or (isinstance(v, list) and all(isinstance(p, str) for p in v)),
)

#: The format of metrics.json and config.json (and of the results.jsonl beside that config.json) this version
#: writes: ``format_version``, their first field. A file without one is of format 1 (written before the field
#: existed); one of a higher format was written by a newer pytest-rageval and is refused, naming the field.
FORMAT_VERSION = 1
FORMAT = Kind(
    f"a format this pytest-rageval reads (1 to {FORMAT_VERSION}; a newer pytest-rageval wrote this file: upgrade to read it)",
    lambda v: isinstance(v, int) and not isinstance(v, bool) and 1 <= v <= FORMAT_VERSION,
)

#: A leaf (:class:`Kind`), an object (field -> shape; :data:`EACH` for every field not named) or a list
#: (``[item shape]``).
Shape = Kind | Mapping[str, Any] | list[Any]
#: The key of an object shape that applies to every field it does not name (cases by key, metrics by name).
EACH = "*"
#: Most problems one check reports (a file of 10,000 bad values gets a count, not 10,000 lines).
MAX_PROBLEMS = 20


class ReadbackError(DataError, ValueError):
    """A file read back holds a value the code cannot use; ``str()`` is one line naming file, field and problem."""


# --------------------------------------------------------------------------- the shapes

_KIND_OF_TYPE: dict[Any, Kind] = {str: TEXT, float: NUMBER, int: INTEGER, bool: FLAG, HeadingPath: HEADING}


def _shape_of(typed: type) -> dict[str, Kind]:
    """The shape of a TypedDict whose fields are plain values: the reader checks what the writer's type says."""
    return {name: _KIND_OF_TYPE[hint] for name, hint in get_type_hints(typed).items()}


#: A stored chunk (evaluation/stored_chunk.py, the one owner of its shape).
CHUNK = _shape_of(StoredChunk)
_VERDICT = {
    "metric": TEXT,
    "score": SCORE,
    "label": FLAG,
    "reasoning": TEXT,
    "supported_claims": [TEXT],
    "unsupported_claims": [TEXT],
    "raw": TEXT,
    "attempts": INTEGER,
    "cached": FLAG,
    "prompt_tokens": INTEGER,
    "completion_tokens": INTEGER,
    "cost_usd": NUMBER,
}
_JUDGE_INFO = {
    "name": TEXT,
    "model": TEXT,
    "prompt_version": TEXT,
    "prompt_versions": {EACH: TEXT},
    "base_url": TEXT,
    "json_mode": TEXT,
    "temperature": NUMBER,
    "seed": INTEGER,
    "heuristic": FLAG,
}

_ERROR = dict.fromkeys(("kind", "message"), TEXT)  # record.CaseError's fields, both text

_MISS = {"metric": TEXT, "op": TEXT, "threshold": SCORE, "value": SCORE, "turn": INTEGER}
_JUDGE_INPUT = {
    "question": TEXT,
    "answer": TEXT,
    "contexts": [TEXT],
    "context_chunks_truncated": [TEXT],
    "context_chunk_ids": LIST,
}
_TRACE = {"k": INTEGER, "case": OBJECT, "require_snippets": FLAG, "rag_abstained": FLAG}
_REPEAT = {"passed": FLAG, "metrics": {EACH: SCORE}, "trace": OBJECT}
#: One turn of a conversation (record.TurnRecord).
TURN: dict[str, Any] = {
    "turn": INTEGER,
    "history": [{"role": TEXT, "content": TEXT}],
    "question": TEXT,
    "answerable": FLAG,
    "reference_answer": TEXT,
    "expected_key_facts": [TEXT],
    "outcome": TEXT,
    "error": _ERROR,
    "metrics": {EACH: SCORE},
    "thresholds": OBJECT,
    "misses": [_MISS],
    "answer": TEXT,
    "abstained": FLAG,
    "abstain_reason": TEXT,
    "empty_response": FLAG,
    "selected_folders": [TEXT],
    "retrieved_chunks": [CHUNK],
    "references": [CHUNK],
    "expected_gold": [OBJECT],
    "latency": {EACH: NUMBER},
    "judge": {EACH: _VERDICT},
    "judge_input": _JUDGE_INPUT,
    "judge_attempted": [TEXT],
    "notes": [TEXT],
    "warnings": [TEXT],
    "trace": _TRACE,
    "runs": INTEGER,
    "stability": TEXT,
    "repeats": [_REPEAT],
    "shown_run": INTEGER,
}

#: A results.jsonl line: every key of record.CaseRecord, the type the record is built as (but ``spot_input``, never
#: written), with what each holds.
RECORD: dict[str, Any] = {
    "key": TEXT,
    "test_case_id": TEXT,
    "definition": TEXT,
    "file": TEXT,
    "line": INTEGER,
    "category": TEXT,
    "difficulty": TEXT,
    "tags": [TEXT],
    "answerable": FLAG,
    "question": TEXT,
    "reference_answer": TEXT,
    "expected_key_facts": [TEXT],
    "expected_gold": [OBJECT],
    "recency_conflict_rule": TEXT,
    "selected_folders": [TEXT],
    "params": OBJECT,
    "metadata": OBJECT,
    "invalid_line": FLAG,
    "matrix": OBJECT,
    "config_id": TEXT,
    "outcome": TEXT,
    "error": _ERROR,
    "metrics": {EACH: SCORE},
    "retrieval_metrics": {EACH: SCORE},
    "groundedness": {"score": SCORE, "reasoning": TEXT, "unsupported_claims": [TEXT], "supported_claims": [TEXT]},
    "correctness": {"score": SCORE, "reasoning": TEXT},
    "abstention": {"abstained": FLAG, "hallucinated": FLAG},
    "thresholds": OBJECT,
    "misses": [_MISS],
    "history": TEXT,
    "turns": [TURN],
    "since_baseline": {"kind": TEXT, "text": TEXT},
    "warnings": [TEXT],
    "notes": [TEXT],
    "answer": TEXT,
    "abstained": FLAG,
    "abstain_reason": TEXT,
    "empty_response": FLAG,
    "retrieved_chunks": [CHUNK],
    "references": [CHUNK],
    "latency": {EACH: NUMBER},
    "judge": {EACH: _VERDICT},
    "judge_input": _JUDGE_INPUT,
    "judge_attempted": [TEXT],
    "spot_check": OBJECT,
    "judge_cache": {"hits": INTEGER, "misses": INTEGER},
    "cost": {"judge_tokens": INTEGER, "judge_cost_usd": NUMBER},
    "trace": _TRACE,
    "runs": INTEGER,
    "flaky": FLAG,
    "stability": TEXT,
    "shown_run": INTEGER,
    "repeats": [_REPEAT],
    "config": {
        "k": INTEGER,
        "config_hash": TEXT,
        "judge": TEXT,
        "judge_model": TEXT,
        "judge_prompt_version": TEXT,
        "judge_temperature": NUMBER,
    },
}

_CASE = {
    "outcome": TEXT,
    "metrics": {EACH: SCORE},
    "answerable": FLAG,
    "definition": TEXT,
    "test_case_id": TEXT,
    "category": TEXT,
    "tags": [TEXT],
    "config_id": TEXT,
    "error_kind": TEXT,
    "empty_response": FLAG,
    "missed": [TEXT],
    "turns": [{"outcome": TEXT, "metrics": {EACH: SCORE}, "answerable": FLAG}],
}
_AGGREGATES = {  # (an aggregate that is no number is shown as unknown; a gated one is refused by gate.non_numbers)
    "latency": {"p50_ms": NUMBER, "p95_ms": NUMBER, "total_ms": NUMBER},
    "operational_metrics": {EACH: NUMBER},
    "judge_coverage": {EACH: {"coverage": NUMBER, "attempted": INTEGER, "scored": INTEGER}},
    "cost": OBJECT,
    "judge_cache": OBJECT,
    "judge_reliability": OBJECT,
    EACH: ANY,  # an average or rate by name (recall_at_k_avg, a plugin metric's ...)
}
_DELTA = {
    "name": TEXT,
    "old": NUMBER,
    "new": NUMBER,
    "delta": NUMBER,
    "tolerance": NUMBER,
    "regressed": FLAG,
    "ci_low": NUMBER,
    "ci_high": NUMBER,
    "n_shared": INTEGER,
    "lower_is_better": FLAG,
    "whole_old": NUMBER,
    "whole_new": NUMBER,
    "largest_drops": LIST,
}

#: The fields of metrics.json that the history, the trend charts and `rageval history` read of an older run.
HISTORY_ENTRY: dict[str, Any] = {
    "format_version": FORMAT,
    "run_id": TEXT,
    "timestamp": TEXT,
    "git_commit": TEXT,
    "git_dirty": FLAG,
    "eval_set_hash": TEXT,
    "eval_set_files": OBJECT,
    "complete": FLAG,
    "partial": FLAG,
    "all_error": FLAG,
    "shard": TEXT,
    "cases_selected": INTEGER,
    "cases_in_eval_set": INTEGER,
    "passed": INTEGER,
    "total_tests": INTEGER,
    "target": {"name": TEXT, "kind": TEXT},
    "matrix": OBJECT,
    "aggregate_metrics": OBJECT,
}

_COUNTS = {name: INTEGER for name in ("total_tests", "passed", "failed", "errors", "skipped", "xfailed", "xpassed")}
_CONFIG_GATE = {"status": TEXT, "failed": FLAG, "reason": TEXT, "regressed_metrics": [TEXT], "shared_cases": INTEGER}

#: metrics.json (a run's, a baseline's): what the gate, the reports and the commands read.
METRICS: dict[str, Any] = {
    **HISTORY_ENTRY,
    **_COUNTS,
    "config_hash": TEXT,
    "k": INTEGER,
    "judge": _JUDGE_INFO,
    "eval_set_files": {EACH: TEXT},
    "eval_set_commit_hash": TEXT,
    "aggregate_metrics": _AGGREGATES,
    "invalid_lines": INTEGER,
    "answerable_tests": INTEGER,
    "unanswerable_tests": INTEGER,
    "flaky": INTEGER,
    "known_failures": INTEGER,
    "fixed_since_baseline": INTEGER,
    "by_tag": {EACH: OBJECT},
    "by_category": {EACH: OBJECT},
    "by_answerable": {EACH: OBJECT},
    "judge_coverage": {EACH: {"coverage": NUMBER, "attempted": INTEGER, "scored": INTEGER}},
    "judge_canary": OBJECT,
    "session": {"exit_status": INTEGER, "parts": [TEXT], "verdict": TEXT},
    "cases": {EACH: _CASE},
    "repeats": {
        "repeated_cases": INTEGER,
        "stable_pass": INTEGER,
        "flaky": INTEGER,
        "stable_fail": INTEGER,
        "flake_rate": NUMBER,
        "spread": {EACH: NUMBER},
        "spread_measure": TEXT,
        "flaky_cases": [{"key": TEXT, "passed_runs": INTEGER, "runs": INTEGER}],
    },
    "by_config": {EACH: {**_COUNTS, "aggregate_metrics": _AGGREGATES, "params": OBJECT}},
    "by_turn": {EACH: OBJECT},
    "config_ranking": {
        "metric": TEXT,
        "lower_is_better": FLAG,
        "best": TEXT,
        "ranked": [
            {
                "config_id": TEXT,
                "params": OBJECT,
                "value": NUMBER,
                "ci_low": NUMBER,
                "ci_high": NUMBER,
                "n": INTEGER,
                "pass_rate": NUMBER,
            }
        ],
    },
    "comparison": {
        "deltas": [_DELTA],
        "status": TEXT,
        "baseline": TEXT,
        "baseline_run_id": TEXT,
        "shared_cases": INTEGER,
        "baseline_cases": INTEGER,
        "current_cases": INTEGER,
        "not_compared": TEXT,
        "scope": TEXT,
        "gate": {"failed": FLAG, "reason": TEXT, "refused": FLAG},
        **{
            name: [TEXT]
            for name in (
                "flipped_to_fail",
                "flipped_to_pass",
                "invariant_differences",
                "coverage_failures",
                "added_cases",
                "removed_cases",
                "changed_cases",
                "regressed_metrics",
            )
        },
        "by_config": {"configs": {EACH: _CONFIG_GATE}, "only_in_run": [TEXT], "only_in_baseline": [TEXT]},
    },
}

#: config.json: what `rageval rescore`, `rageval judge`, `rageval merge` and the report read.
CONFIG: dict[str, Any] = {
    "format_version": FORMAT,
    "run_id": TEXT,
    "config_hash": TEXT,
    "eval_set_hash": TEXT,
    "eval_set_files": {EACH: TEXT},
    "git_commit": TEXT,
    "plugin_version": TEXT,
    "python": TEXT,
    "pytest": TEXT,
    "args": [TEXT],
    "selection": {"paths": [TEXT], "keyword": TEXT, "markexpr": TEXT, "deselect": [TEXT], "shard": TEXT},
    "client": OBJECT,
    "merged_from": [TEXT],
    "judge": _JUDGE_INFO,
    "config": {
        "target": TEXT,
        "header_names": [TEXT],
        "request_map": TEXT,
        "response_map": TEXT,
        "timeout": NUMBER,
        "k": INTEGER,
        "require_snippets": FLAG,
        "judge": TEXT,
        "judge_model": TEXT,
        "judge_base_url": TEXT,
        "judge_metrics": [TEXT],
        "retrieval_only": FLAG,
        "store_full_text": FLAG,
        "limits": {EACH: INTEGER},
        "thresholds": {"global": OBJECT, "by_category": OBJECT, "cli": OBJECT},
        "gate": OBJECT,
        "known_failures": TEXT,
        "repeat": INTEGER,
        "matrix": OBJECT,
        "docs_root": TEXT,
    },
}


_FIGURES = {  # a judge metric's agreement with the labels (judges/calibrate.py)
    **{name: INTEGER for name in ("n", "tp", "fp", "tn", "fn", "errors", "requests")},
    **{name: NUMBER for name in ("accuracy", "balanced_accuracy", "kappa", "cost_usd")},
    **{name: [NUMBER] for name in ("accuracy_ci", "balanced_accuracy_ci", "kappa_ci")},
    "disagreements": [TEXT],  # the labelled answers the judge got wrong, by id
}
_CHANGE = {  # one change of the invariance check (judges/invariance.py)
    "kind": TEXT,
    "description": TEXT,
    "metrics": {
        EACH: {
            **{name: INTEGER for name in ("n", "errors", "flips", "detected")},
            "flip_rate": NUMBER,
            "detection_rate": NUMBER,
            "flipped": [TEXT],
            "missed": [TEXT],
        }
    },
}

#: calibration.json (``rageval calibrate``, below ``<output>/calibration/<id>/``): what a run's
#: ``rageval_min_judge_agreement`` check reads.
CALIBRATION: dict[str, Any] = {
    "created": TEXT,  # when it was made (ISO 8601 with a zone): the newest is the one a run uses
    "judge": {"kind": TEXT, "model": TEXT, "base_url": TEXT, "prompt_version": TEXT},
    "set": TEXT,
    "set_hash": TEXT,
    "metrics": {EACH: _FIGURES},
    "invariance": {EACH: _CHANGE},
}


# --------------------------------------------------------------------------- the fields of a shape


def fields(shape: Shape, path: str = "") -> Iterator[tuple[str, str]]:
    """(field path, what it must be) of every field of ``shape``, in its order, nested fields after the field
    that holds them: ``judge.*.score`` (``*``: any name), ``misses[].metric`` (each item of a list). A list of
    chunks is one row (:data:`CHUNK` is an artifact of its own)."""
    if isinstance(shape, Kind):
        yield path, shape.name
    elif isinstance(shape, list):
        item = shape[0]
        if item is CHUNK:
            yield path, "a list of chunks"
        elif isinstance(item, Kind):
            yield path, f"a list, each {item.name}"
        else:
            yield path, "a list of objects"
            yield from _nested(fields(item, f"{path}[]"), path + "[]")
    else:
        if path:
            yield path, "an object"
        for name, sub in shape.items():
            yield from fields(sub, f"{path}.{name}" if path else name)


def _nested(rows: Iterator[tuple[str, str]], own: str) -> Iterator[tuple[str, str]]:
    """``rows`` without the row of the list item itself (its object row says nothing the list row did not)."""
    return ((path, kind) for path, kind in rows if path != own)


def undeclared(value: Any, shape: Shape, path: tuple[Any, ...] = ()) -> Iterator[str]:
    """The path of each field of ``value`` that ``shape`` does not declare (what a writer wrote and no reader,
    nor the reference page, knows of)."""
    if isinstance(shape, Kind) or value is None:
        return
    if isinstance(shape, list):
        for index, item in enumerate(value if isinstance(value, list) else ()):
            yield from undeclared(item, shape[0], (*path, index))
        return
    for name, sub in value.items() if isinstance(value, dict) else ():
        if name in shape:
            yield from undeclared(sub, shape[name], (*path, name))
        elif EACH in shape:
            yield from undeclared(sub, shape[EACH], (*path, name))
        else:
            yield path_text((*path, name))


# --------------------------------------------------------------------------- checking


def problems(value: Any, shape: Shape, *, bounds: bool = True) -> list[str]:
    """``<field path>: <problem>`` for each value out of bounds anywhere in ``value`` (unless ``bounds`` is False: the
    caller knows there is none), then each field of the wrong type by ``shape``; at most :data:`MAX_PROBLEMS`, in
    document order within each kind."""
    if value is None:
        return [f"{path_text(())}: expected {_kind_name(shape)}, got null"]
    found: list[str] = []
    for path, problem in _bound_problems(value) if bounds else ():
        found.append(f"{path_text(path)}: {problem}")
        if len(found) >= MAX_PROBLEMS:
            return found
    for path, problem in _shape_problems(value, shape, ()):
        found.append(f"{path_text(path)}: {problem}")
        if len(found) >= MAX_PROBLEMS:
            break
    return found


def file_problem(where: str | Path, found: list[str]) -> str:
    """One line for the problems of a file (or ``file:line``): the first, and how many more."""
    more = len(found) - 1
    suffix = "" if more <= 0 else f" (and {more}{'+' if len(found) >= MAX_PROBLEMS else ''} more)"
    return f"{where}: {found[0]}{suffix}"


def read_json(path: str | Path, shape: Shape) -> Any:
    """The JSON value of the file at ``path``, checked against ``shape``.

    Raises :class:`safejson.JsonFileError` when the file cannot be read or is not JSON, and
    :class:`ReadbackError` (one line: file, field, problem) when a value breaks a bound or the shape.
    """
    text = safejson.read_text(path)
    data = safejson.read_file(path, text=text)
    found = problems(data, shape, bounds=_SUSPECT.search(text) is not None)
    if found:
        raise ReadbackError(file_problem(path, found))
    return data


_SURROGATE = re.compile("[\ud800-\udfff]")
#: What the text of a JSON file holding a value out of bounds must contain (the fast path of :func:`read_json`
#: walks the values only then): NaN or Infinity, a number of 300 digits or a 3-digit exponent, a surrogate or
#: its escape.
_SUSPECT = re.compile(r"NaN|Infinity|\d{300}|[eE][+-]?\d{3}|[\ud800-\udfff]|\\u[dD][89a-fA-F]")
_NONFINITE = {"nan": "NaN", "inf": "Infinity", "-inf": "-Infinity"}


def _bound_problem(leaf: Any) -> str | None:
    """Why a leaf value cannot be used as read (None when it can)."""
    if isinstance(leaf, str):
        found = _SURROGATE.search(leaf)
        return None if found is None else f"a lone surrogate (\\u{ord(found[0]):04x}) is not valid Unicode text"
    if isinstance(leaf, float) and not math.isfinite(leaf):
        return f"{_NONFINITE[str(leaf)]} is not a number"
    if isinstance(leaf, int) and not isinstance(leaf, bool):
        try:
            float(leaf)
        except OverflowError:
            return "a number beyond float range"
    return None


def _bound_problems(value: Any) -> Iterator[tuple[tuple[Any, ...], str]]:
    """(path, problem) of each string, key or number anywhere in ``value`` that breaks a bound; iterative."""
    stack: list[tuple[Any, tuple[Any, ...]]] = [(value, ())]
    while stack:
        node, path = stack.pop()
        if isinstance(node, dict):
            items: Any = node.items()
        elif isinstance(node, list):
            items = enumerate(node)
        else:
            problem = _bound_problem(node)
            if problem is not None:
                yield path, problem
            continue
        nested = []
        for key, item in items:
            if isinstance(key, str) and _SURROGATE.search(key):
                yield (*path, key), "a lone surrogate in a key is not valid Unicode text"
            nested.append((item, (*path, key)))
        stack.extend(reversed(nested))


def _kind_name(shape: Shape) -> str:
    if isinstance(shape, Kind):
        return shape.name
    return "a list" if isinstance(shape, list) else "an object"


def _shape_problems(value: Any, shape: Shape, path: tuple[Any, ...]) -> Iterator[tuple[tuple[Any, ...], str]]:
    """(path, problem) of each field of ``value`` whose type ``shape`` does not allow (a null field: not recorded)."""
    if value is None:
        return
    if isinstance(shape, Kind):
        if not shape.test(value):
            yield path, f"expected {shape.name}, got {shown(value)}"
        return
    if isinstance(shape, list):
        if not isinstance(value, list):
            yield path, f"expected a list, got {shown(value)}"
            return
        for index, item in enumerate(value):
            if item is None:  # a field may be left out (null), an item of a list may not
                yield (*path, index), f"expected {_kind_name(shape[0])}, got null"
            else:
                yield from _shape_problems(item, shape[0], (*path, index))
        return
    if not isinstance(value, dict):
        yield path, f"expected an object, got {shown(value)}"
        return
    each = shape.get(EACH)
    for key, item in value.items():
        sub = shape.get(key, each)
        if sub is not None:
            yield from _shape_problems(item, sub, (*path, key))


# --------------------------------------------------------------------------- wording

_PLAIN_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


def _visible(text: str) -> str:
    """``text`` with lone surrogates shown as escapes (a message must itself be valid Unicode)."""
    return _SURROGATE.sub(lambda m: f"\\u{ord(m[0]):04x}", text)


def path_text(path: tuple[Any, ...]) -> str:
    """``cases["s.jsonl::a"].metrics.mrr``, ``retrieved_chunks[0].score``; ``(top level)`` for the file itself."""
    text = ""
    for part in path:
        if isinstance(part, int):
            text += f"[{part}]"
        elif _PLAIN_KEY.match(part):
            text += f".{part}" if text else part
        else:
            text += f"[{_visible(json.dumps(part, ensure_ascii=False))}]"
    return text or "(top level)"


def shown(value: Any) -> str:
    """A value as a problem shows it: a string quoted and cut, a number or ``true``, or what it is (a list)."""
    if isinstance(value, str):
        return _visible(repr(value if len(value) <= 40 else value[:40] + "…"))
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        text = repr(value)
        return text if len(text) <= 24 else text[:20] + "…"
    if isinstance(value, (dict, list)):
        return "an object" if isinstance(value, dict) else "a list"
    return type(value).__name__
