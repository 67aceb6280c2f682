"""Every setting of the plugin, declared once: its command-line option, ini key, type, default and help.

The pytest options and ini keys (``pytest_addoption``), the sources ``build_settings`` reads each value from,
and the reference pages of options and ini keys are all derived from :data:`SETTINGS`. Foundations: this module
imports nothing but ``defaults`` and ``typing``, so every pytest run (which imports the plugin's entry point)
can register the options without loading anything else.

A setting is read from the first of these that sets it: its option, its ini key (``[pytest]`` or
``[tool.pytest.ini_options]``), its ``[tool.rageval]`` key, its environment variable, else its default.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Literal

from pytest_rageval import defaults

__all__ = ["GROUPS", "SETTINGS", "Kind", "Setting", "by_ini", "by_name", "ini_keys", "path_options"]

#: what a value is: a ``flag`` (an option without value), ``bool`` (an ini true/false), ``lines`` (an ini key of
#: one value a line), ``int``/``float`` (an option that takes a number), ``path`` or ``text``
Kind = Literal["flag", "bool", "lines", "int", "float", "path", "text"]
IniType = Literal["string", "linelist", "bool"]

#: the docs groups, in page order
GROUPS = (
    "Run",
    "System under test",
    "Retrieval",
    "Judge",
    "Judge cache",
    "Baseline gate",
    "Output",
    "Speed",
    "Config matrix",
    "Size caps",
)


@dataclass(frozen=True)
class Setting:
    """One setting: where a user sets it and what it means.

    ``field`` is the ``Settings`` attribute it feeds (None: read by the pytest surface itself); ``default`` is
    shown in ``--help`` and the reference pages ("" for none), the value itself lives in ``defaults``.
    """

    name: str
    help: str
    group: str
    field: str | None
    option: str | None = None
    ini: str | None = None
    kind: Kind = "text"
    default: str = ""
    metavar: str | None = None
    choices: tuple[str, ...] = ()
    env: str | None = None
    table: tuple[str, ...] = ()  # key path below [tool.rageval]
    repeatable: bool = False
    unset: Any = None  # what pytest hands over when nobody set the option or ini key (None: its "not set")

    @property
    def dest(self) -> str | None:
        """The attribute of pytest's ``config.option`` that holds the option's value."""
        return self.option.lstrip("-").replace("-", "_") if self.option else None

    @property
    def ini_type(self) -> IniType:
        return "linelist" if self.kind == "lines" else "bool" if self.kind == "bool" else "string"

    @property
    def ini_default(self) -> Any:
        """What pytest returns for an ini key nobody set: "not set" unless told, so the later sources and the
        default apply."""
        if self.unset is not None:
            return self.unset
        return [] if self.kind == "lines" else False if self.kind == "bool" else ""

    @property
    def table_key(self) -> str | None:
        """``[tool.rageval.judge] model``: the ``[tool.rageval]`` key, as a reader writes it."""
        if not self.table:
            return None
        return f"[{'.'.join(('tool', 'rageval', *self.table[:-1]))}] {self.table[-1]}"

    def sources(self, *, skip: str = "") -> str:
        """``ini rageval_k, env X, default 5``: where else the setting is set (leaving out ``skip``)."""
        parts = []
        if self.option and skip != "option":
            parts.append(self.option)
        if self.ini and skip != "ini":
            parts.append(f"ini {self.ini}")
        if self.table_key:
            parts.append(self.table_key)
        if self.env:
            parts.append(f"env {self.env}")
        if self.default:
            parts.append(f"default {self.default}")
        return ", ".join(parts)

    def option_help(self) -> str:
        """The option's ``--help`` line (``%`` doubled: argparse formats it)."""
        more = self.sources(skip="option")
        return (self.help + (f" ({more})" if more else "")).replace("%", "%%")

    def ini_help(self) -> str:
        more = self.sources(skip="ini")
        return self.help + (f" ({more})" if more else "")

    def option_attrs(self) -> dict[str, Any]:
        """Keyword arguments of ``parser.addoption``."""
        attrs: dict[str, Any] = {"help": self.option_help()}
        if self.kind == "flag":
            return {**attrs, "action": "store_true", "default": False}
        attrs["default"] = [] if self.repeatable else self.unset
        if self.repeatable:
            attrs["action"] = "append"
        if self.kind in ("int", "float"):
            attrs["type"] = int if self.kind == "int" else float
        if self.choices:
            attrs["choices"] = self.choices
        else:
            attrs["metavar"] = self.metavar or self.name.upper()
        return attrs


def _s(name: str, help: str, group: str, field: str | None = "", **more: Any) -> Setting:
    """A setting whose Settings field is its name unless told."""
    return Setting(name, help, group, name if field == "" else field, **more)


_CAPS = (
    (
        "max_answer_chars",
        "longest answer (and abstain reason) kept; longer is cut with a note",
        defaults.MAX_ANSWER_CHARS,
    ),
    ("max_chunk_chars", "longest text of a retrieved chunk or reference field kept", defaults.MAX_CHUNK_CHARS),
    ("max_reasoning_chars", "longest judge reasoning, claim or raw answer kept", defaults.MAX_REASONING_CHARS),
    ("max_error_chars", "longest error message kept", defaults.MAX_ERROR_CHARS),
)

#: Every setting, in the order ``--help`` and the reference pages list them.
SETTINGS: tuple[Setting, ...] = (
    # Run
    _s(
        "enabled",
        "collect eval sets (*.jsonl) as tests and write run artifacts",
        "Run",
        None,
        option="--rageval",
        kind="flag",
    ),
    _s(
        "eval_set_globs",
        "eval-set files (globs relative to rootdir) run by `pytest --rageval` without paths",
        "Run",
        ini="rageval_eval_sets",
        kind="lines",
        default=", ".join(defaults.EVAL_SET_GLOBS),
        unset=list(defaults.EVAL_SET_GLOBS),
    ),
    _s(
        "repeat",
        "run each judge-dependent case N times (every case without a judge), pass on majority, class it "
        "stable_pass/flaky/stable_fail; a case's own repeat wins",
        "Run",
        option="--rageval-repeat",
        ini="rageval_repeat",
        metavar="N",
    ),
    _s(
        "shard",
        "run share I of N of the cases (by a hash of file and id), for CI matrix jobs",
        "Run",
        option="--rageval-shard",
        metavar="I/N",
    ),
    _s(
        "resume",
        "finish an interrupted run folder: run only the cases it lacks",
        "Run",
        option="--rageval-resume",
        kind="path",
        metavar="RUN",
    ),
    _s(
        "dry_run",
        "print the planned RAG and judge requests, tokens and cost; send none",
        "Run",
        option="--rageval-dry-run",
        kind="flag",
    ),
    # System under test
    _s(
        "target",
        "system under test: an http(s):// URL or package.module:callable",
        "System under test",
        option="--rageval-target",
        ini="rageval_target",
        env="RAGEVAL_TARGET",
        metavar="URL|MODULE:CALLABLE",
    ),
    _s(
        "headers_text",
        "HTTP headers for the target, lines `Name: value`, ${ENV_VAR} interpolated",
        "System under test",
        ini="rageval_headers",
        kind="lines",
    ),
    _s(
        "request_map_text",
        "request body key renames, lines `question = query`, `k = topK`",
        "System under test",
        ini="rageval_request_map",
        kind="lines",
    ),
    _s(
        "response_map_text",
        "response mapping, lines `target = source.path`",
        "System under test",
        ini="rageval_response_map",
        kind="lines",
    ),
    _s(
        "stream_format",
        "where a streamed answer's text is in each event: `openai` (`choices[0].delta.content`), `text` (the event's "
        "data) or `json:<dotted.path>`",
        "System under test",
        ini="rageval_stream_format",
        default="openai",
    ),
    _s(
        "timeout",
        "seconds before a RAG call times out",
        "System under test",
        ini="rageval_timeout",
        default=f"{defaults.TIMEOUT:g}",
        unset=f"{defaults.TIMEOUT:g}",
    ),
    _s(
        "params_hook",
        "package.module:function(target, params) returning the framework object to ask for a call's params",
        "System under test",
        ini="rageval_params_hook",
    ),
    # Retrieval
    _s(
        "k",
        "how many retrieved chunks count",
        "Retrieval",
        option="--rageval-k",
        ini="rageval_k",
        kind="int",
        metavar="K",
        default=str(defaults.K),
    ),
    _s(
        "require_snippets",
        "gold supports with snippets also need one snippet in the chunk text",
        "Retrieval",
        ini="rageval_require_snippets",
        kind="bool",
    ),
    _s(
        "docs_root",
        "the folder gold rel_paths are relative to: absolute chunk paths under it are made relative to it",
        "Retrieval",
        ini="rageval_docs_root",
        table=("docs_root",),
        default="rootdir",
    ),
    _s(
        "threshold",
        "override a threshold for every case (repeatable)",
        "Retrieval",
        "thresholds",
        option="--rageval-threshold",
        metavar="METRIC=VALUE",
        repeatable=True,
    ),
    # Judge
    _s(
        "judge",
        "judge in use: auto (openai when a judge model is configured, else lexical), openai, lexical, none, "
        "or the name of a judge of the pytest_rageval_judges hook",
        "Judge",
        option="--rageval-judge",
        ini="rageval_judge",
        metavar="NAME",
        default=defaults.JUDGE,
    ),
    _s("retrieval_only", "run without judge metrics", "Judge", option="--rageval-retrieval-only", kind="flag"),
    _s(
        "judge_model",
        "model of the OpenAI-compatible judge",
        "Judge",
        option="--rageval-judge-model",
        ini="rageval_judge_model",
        table=("judge", "model"),
        metavar="MODEL",
    ),
    _s(
        "judge_base_url",
        "base URL of the OpenAI-compatible judge",
        "Judge",
        option="--rageval-judge-base-url",
        ini="rageval_judge_base_url",
        table=("judge", "base_url"),
        env="OPENAI_BASE_URL",
        metavar="URL",
    ),
    _s(
        "judge_json_mode",
        f"how the judge is asked for JSON: {', '.join(defaults.JUDGE_JSON_MODES)}",
        "Judge",
        ini="rageval_judge_json_mode",
        table=("judge", "json_mode"),
        default=defaults.JUDGE_JSON_MODE,
    ),
    _s(
        "citation_patterns",
        "extra citation markers the lexical judge removes from answers, one regex a line",
        "Judge",
        ini="rageval_citation_patterns",
        kind="lines",
    ),
    _s(
        "judge_check",
        "first check that the judge tells a faithful from a hallucinated answer",
        "Judge",
        option="--rageval-judge-check",
        kind="flag",
    ),
    _s(
        "max_judge_cost",
        "stop judging once this much is spent (per process)",
        "Judge",
        option="--rageval-max-judge-cost",
        kind="float",
        metavar="USD",
    ),
    _s(
        "spot_check",
        "re-judge N random cases with --rageval-spot-check-model",
        "Judge",
        option="--rageval-spot-check",
        kind="int",
        metavar="N",
        default="0",
        unset=0,
    ),
    _s(
        "spot_check_model",
        "second judge model for the spot check",
        "Judge",
        option="--rageval-spot-check-model",
        metavar="MODEL",
    ),
    _s(
        "min_judge_agreement",
        "refuse a run with a judge unless a stored calibration of that judge (rageval calibrate) reaches this "
        "balanced accuracy, 0 to 1, on every judge metric",
        "Judge",
        ini="rageval_min_judge_agreement",
    ),
    _s(
        "judge_canary",
        "re-judge this many labelled answers of rageval_calibration_set in every judged run, without the judge "
        "cache; the baseline gate fails when their verdicts changed",
        "Judge",
        ini="rageval_judge_canary",
        default="0",
    ),
    _s(
        "calibration_set",
        "the labelled set the judge canary takes its answers from",
        "Judge",
        ini="rageval_calibration_set",
        default="the one shipped with the package",
    ),
    # Judge cache
    _s(
        "cache_dir",
        "judge cache folder",
        "Judge cache",
        option="--rageval-cache-dir",
        ini="rageval_cache_dir",
        kind="path",
        metavar="DIR",
        default=defaults.CACHE_DIR,
    ),
    _s("no_cache", "neither read nor write the judge cache", "Judge cache", option="--rageval-no-cache", kind="flag"),
    _s(
        "clear_cache",
        "empty the judge cache before the run",
        "Judge cache",
        option="--rageval-clear-cache",
        kind="flag",
    ),
    # Baseline gate
    _s(
        "baseline",
        "baseline metrics.json or run folder to compare with",
        "Baseline gate",
        option="--rageval-baseline",
        ini="rageval_baseline",
        kind="path",
        metavar="PATH",
    ),
    _s(
        "update_baseline",
        "write this run's metrics.json to the baseline path instead of gating",
        "Baseline gate",
        option="--rageval-update-baseline",
        kind="flag",
    ),
    _s(
        "allow_regressions",
        "report baseline regressions without failing the session",
        "Baseline gate",
        option="--rageval-allow-regressions",
        kind="flag",
    ),
    _s(
        "ignore_invariants",
        "compare with a baseline even if its eval set or judge differ",
        "Baseline gate",
        option="--rageval-ignore-invariants",
        kind="flag",
    ),
    _s(
        "gate_significance",
        "fail only drops whose 95% paired-bootstrap interval excludes zero",
        "Baseline gate",
        option="--rageval-gate-significance",
        kind="flag",
    ),
    _s(
        "min_shared_cases",
        "the gate refuses a baseline that shares fewer unchanged cases with the run (or every case when a side has "
        "fewer); with a point, a share of the baseline's cases (0.5: half of them)",
        "Baseline gate",
        ini="rageval_min_shared_cases",
        default=str(defaults.MIN_SHARED_CASES),
    ),
    _s(
        "known_failures",
        "allow: with a baseline, a case that failed there and fails now the same way, none of its missed metrics "
        "worse, is an xfail (a known failure); fail: every threshold miss fails",
        "Baseline gate",
        ini="rageval_known_failures",
        default="allow",
    ),
    # Output
    _s(
        "output_dir",
        "folder of run artifacts",
        "Output",
        option="--rageval-output",
        ini="rageval_output",
        kind="path",
        metavar="DIR",
        default=defaults.OUTPUT_DIR,
    ),
    _s(
        "store_full_text",
        "store full chunk text in results.jsonl (default: first 200 characters)",
        "Output",
        option="--rageval-store-full-text",
        kind="flag",
    ),
    _s(
        "summary_md",
        "write a short Markdown summary of the run for CI (also appended to $GITHUB_STEP_SUMMARY when set)",
        "Output",
        option="--rageval-summary-md",
        kind="path",
        metavar="PATH",
    ),
    # Speed
    _s(
        "concurrency",
        "cases in flight at once in this process, RAG and judge requests included",
        "Speed",
        option="--rageval-concurrency",
        kind="int",
        metavar="N",
        default=f"adaptive per endpoint, from {defaults.CONCURRENCY} up to rageval_max_concurrency",
    ),
    _s(
        "max_concurrency",
        "the most requests in flight to one endpoint an adaptive limit rises to, and the cases in flight at once",
        "Speed",
        "concurrency",
        ini="rageval_max_concurrency",
        default=str(defaults.MAX_CONCURRENCY),
    ),
    _s(
        "target_concurrency",
        "calls of the target in flight at once, for a target that is not thread-safe",
        "Speed",
        ini="rageval_target_concurrency",
        default="the run's concurrency",
    ),
    _s(
        "judge_rate",
        "judge requests started at most this fast, e.g. 10/min, 2/s, 500/h; one budget for all xdist workers",
        "Speed",
        ini="rageval_judge_rate",
    ),
    _s(
        "target_rate",
        "target calls started at most this fast, e.g. 60/min; one budget for all xdist workers",
        "Speed",
        ini="rageval_target_rate",
    ),
    # Config matrix
    _s(
        "matrix",
        "run every case under every config, e.g. 'top_k=5,10;alpha=0.0,0.5' (wins over [tool.rageval.matrix])",
        "Config matrix",
        option="--rageval-matrix",
        metavar="AXES",
    ),
    _s(
        "slice_k",
        "ask once at the largest k and slice the chunks for smaller k",
        "Config matrix",
        "matrix",
        ini="rageval_slice_k",
        table=("matrix", "slice_k"),
        default="true in a run without a judge, false with one, whose answer depends on k",
    ),
    _s(
        "rank_by",
        "the aggregate the matrix's configs are ranked by",
        "Config matrix",
        option="--rageval-rank-by",
        ini="rageval_rank_by",
        metavar="METRIC",
        default="correctness_avg when judged, else recall_at_k_avg",
    ),
    # Size caps
    *(_s(name, text, "Size caps", "limits", ini=f"rageval_{name}", default=str(value)) for name, text, value in _CAPS),
    _s(
        "max_response_bytes",
        "most bytes of a RAG or judge response body read, after decompression; a longer body is that call's error",
        "Size caps",
        ini="rageval_max_response_bytes",
        default=f"{defaults.MAX_RESPONSE_BYTES} (10 MiB)",
    ),
)


def by_name() -> dict[str, Setting]:
    return {s.name: s for s in SETTINGS}


def by_ini() -> dict[str, Setting]:
    """The settings that have an ini key, by that key."""
    return {s.ini: s for s in SETTINGS if s.ini}


def ini_keys() -> tuple[str, ...]:
    """Every ini key of the plugin, in table order."""
    return tuple(s.ini for s in SETTINGS if s.ini)


def path_options() -> tuple[str, ...]:
    """The options that take a path (pytest may read their space-separated value as a test path)."""
    return tuple(s.option for s in SETTINGS if s.option and s.kind == "path")


def options() -> Iterator[Setting]:
    """The settings that have a command-line option, in table order."""
    return (s for s in SETTINGS if s.option)
