"""One frozen ``Settings`` resolved from CLI > ini > pyproject > env > defaults.

Which option, ini key, ``[tool.rageval]`` key and variable set each value is the settings table's (table.py).
The ``[tool.rageval]`` table arrives checked (pyproject.py: ``RagevalConfig``,
with the value checks below joined to its messages); the defaults are
defaults.py's. Paths given on the command line are relative to the current
directory; paths from ini/pyproject are relative to rootdir.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from pytest_rageval import defaults
from pytest_rageval.errors import ConfigError
from pytest_rageval.evaluation import registry
from pytest_rageval.evaluation.matrix import Matrix, MatrixError, matrix_from_table, parse_matrix_option
from pytest_rageval.evaluation.stability import RepeatError, parse_repeat
from pytest_rageval.evaluation.thresholds import (
    ThresholdConfig,
    ThresholdError,
    finite_number,
    number_text,
    parse_cli_thresholds,
    parse_threshold_table,
)
from pytest_rageval.flow import parse_rate
from pytest_rageval.judges.external_judges import names as external_judge_names
from pytest_rageval.redact import Redactor, environment_secrets, header_secrets, public_url, url_secrets
from pytest_rageval.sanitize import Limits
from pytest_rageval.suggest import did_you_mean
from pytest_rageval.targets.stream import StreamFormat, parse_stream_format

from .pyproject import Problem, RagevalConfig, read_config
from .table import by_name

#: each setting of the table by name
SETTING = by_name()
#: the field of ``Limits`` each size cap of the table sets
LIMIT_SETTINGS = {
    "answer": SETTING["max_answer_chars"],
    "chunk_text": SETTING["max_chunk_chars"],
    "reasoning": SETTING["max_reasoning_chars"],
    "error": SETTING["max_error_chars"],
}

#: A configuration value is wrong; the message names the setting (one error type for every configuration mistake).
SettingsError = ConfigError

JUDGE_CHOICES = defaults.JUDGE_CHOICES
#: the most requests in flight a concurrency setting may ask for (six digits, for the option as for the ini keys)
MAX_CONCURRENCY_SETTING = 999_999


@dataclass(frozen=True)
class Settings:
    """Everything the plugin needs to know about this run's configuration."""

    rootdir: Path
    eval_set_globs: tuple[str, ...] = defaults.EVAL_SET_GLOBS
    target: str | None = None
    headers_text: str = ""
    request_map_text: str = ""
    response_map_text: str = ""
    stream_format: StreamFormat = field(
        default_factory=StreamFormat
    )  # rageval_stream_format: a streamed answer's deltas
    timeout: float = defaults.TIMEOUT
    k: int = defaults.K
    require_snippets: bool = False
    judge: str = "none"  # resolved ("auto" is gone by now); a bare Settings judges nothing
    output_dir: Path = Path(defaults.OUTPUT_DIR)
    baseline: Path | None = None
    update_baseline: bool = False
    allow_regressions: bool = False
    ignore_invariants: bool = False
    min_shared_cases: int | float = defaults.MIN_SHARED_CASES  # rageval_min_shared_cases: a count, or a share (float)
    known_failures: str = "allow"  # rageval_known_failures: allow (a baseline's failure repeated is an xfail) or fail
    gate_significance: bool = False
    store_full_text: bool = False
    limits: Limits = field(default_factory=Limits)  # size caps of text from outside (rageval_max_*_chars)
    max_response_bytes: int = defaults.MAX_RESPONSE_BYTES  # most bytes of a RAG or judge response body read
    retrieval_only: bool = False
    thresholds: ThresholdConfig = field(default_factory=ThresholdConfig.empty)
    gate: Mapping[str, float] = field(default_factory=dict)
    judge_model: str | None = None
    judge_base_url: str | None = None
    judge_json_mode: str = defaults.JUDGE_JSON_MODE
    judge_metrics: tuple[str, ...] = registry.default_judge_metrics()  # the registry's default-on judge metrics
    judge_prices: Mapping[str, tuple[float, float]] = field(default_factory=dict)
    citation_patterns: tuple[str, ...] = ()  # extra citation regexes of the lexical judge
    cache_dir: Path = Path(defaults.CACHE_DIR)
    no_cache: bool = False
    clear_cache: bool = False
    judge_check: bool = False
    dry_run: bool = False
    max_judge_cost: float | None = None
    spot_check: int = 0
    spot_check_model: str | None = None
    concurrency: int = defaults.CONCURRENCY  # cases in flight at once in this process
    adaptive: bool = False  # no --rageval-concurrency: each endpoint's limit adapts (flow.Aimd) up to concurrency
    target_concurrency: int = defaults.CONCURRENCY  # rageval_target_concurrency: the target's calls in flight at once
    judge_rate: float | None = None  # rageval_judge_rate: judge requests a second at most, across xdist workers
    target_rate: float | None = None  # rageval_target_rate: target calls a second at most, across xdist workers
    repeat: int | None = None  # --rageval-repeat / rageval_repeat: runs of each judge-dependent case (stability.py)
    shard: tuple[int, int] | None = None  # (index from 1, count); not part of the run's identity
    resume: Path | None = None
    summary_md: Path | None = None  # --rageval-summary-md: the CI summary (report/markdown.py), written anew
    step_summary: Path | None = None  # $GITHUB_STEP_SUMMARY: the same summary, appended
    matrix: Matrix | None = None  # --rageval-matrix or [tool.rageval.matrix] (matrix.py)
    rank_by: str | None = None  # --rageval-rank-by / ini rageval_rank_by: the aggregate configs are ranked by
    docs_root: Path | None = None  # ini rageval_docs_root / [tool.rageval] docs_root (rootdir when unset)
    min_judge_agreement: float | None = None  # ini rageval_min_judge_agreement (calibrations.py)
    judge_canary: int = 0  # ini rageval_judge_canary: labelled answers re-judged in every judged run (judges/canary.py)
    calibration_set: Path | None = (
        None  # ini rageval_calibration_set: the canary's labelled set (None: the shipped one)
    )
    params_hook: str = (
        ""  # ini rageval_params_hook: package.module:function giving a framework object each call's params
    )
    marks: tuple[tuple[str, frozenset[str]], ...] = ()  # [tool.rageval.marks]: marker, the tags/categories it marks

    @property
    def docs_root_or_rootdir(self) -> Path:
        """The folder gold rel_paths are relative to."""
        return self.docs_root or self.rootdir

    @property
    def judge_enabled(self) -> bool:
        return self.judge != "none" and not self.retrieval_only

    def redactor(self, environ: Mapping[str, str]) -> Redactor:
        """Every secret this configuration knows: header values (``${VAR}`` expanded from ``environ``),
        credentials in the target and judge URLs, and the judge key."""
        from pytest_rageval.targets.headers import parse_headers
        from pytest_rageval.targets.protocol import RagConfigError

        try:
            headers = parse_headers(self.headers_text, environ)
        except RagConfigError:  # an unset ${VAR}: the run stops on it anyway; keep what the lines say
            headers = {str(i): line.partition(":")[2] for i, line in enumerate(self.headers_text.splitlines())}
        axis = dict(self.matrix.axes).get("target", ()) if self.matrix is not None else ()
        urls = [url for url in (self.target, self.judge_base_url, *(str(v) for v in axis)) if url]
        return Redactor(
            [*header_secrets(headers), *environment_secrets(environ), *(s for u in urls for s in url_secrets(u))]
        )

    @property
    def k_shown(self) -> str:
        """The run's k for a summary line: ``5``, or the matrix's depth values (``3,5 (matrix top_k)``)."""
        from pytest_rageval.evaluation.matrix import DEPTH_AXES

        for name, values in self.matrix.axes if self.matrix is not None else ():
            if name in DEPTH_AXES:
                return f"{','.join(str(v) for v in values)} (matrix {name})"
        return str(self.k)

    def snapshot(self) -> dict[str, Any]:
        """The configuration that defines a run, for config.json and its hash.

        Header values are secrets: only their names are kept. URLs are kept without
        credentials and with secret-looking query values masked (redact.public_url).
        """
        header_names = sorted(line.split(":", 1)[0].strip() for line in self.headers_text.splitlines() if ":" in line)
        return {
            "target": public_url(self.target) if self.target else self.target,
            "header_names": header_names,
            "request_map": self.request_map_text,
            "response_map": self.response_map_text,
            "timeout": self.timeout,
            "k": self.k,
            "require_snippets": self.require_snippets,
            "judge": self.judge,
            "judge_model": self.judge_model,
            "judge_base_url": public_url(self.judge_base_url) if self.judge_base_url else self.judge_base_url,
            "judge_metrics": list(self.judge_metrics),
            "retrieval_only": self.retrieval_only,
            "store_full_text": self.store_full_text,
            # only when changed: the default caps keep the hash of runs made before they existed
            **({"limits": dataclasses.asdict(self.limits)} if self.limits != Limits() else {}),
            "thresholds": {
                "global": dict(self.thresholds.global_),
                "by_category": {c: dict(t) for c, t in self.thresholds.by_category.items()},
                "cli": dict(self.thresholds.cli),
            },
            "gate": dict(self.gate),
            # only when not the default: the hash of runs made before the option existed stays as it was
            **({"known_failures": self.known_failures} if self.known_failures != "allow" else {}),
            # only when it repeats: the hash of a run without it (or with 1, the same runs) stays as it was
            **({"repeat": self.repeat} if self.repeat is not None and self.repeat > 1 else {}),
            # only with a matrix: runs without one keep their hash
            **({"matrix": self.matrix.snapshot()} if self.matrix is not None else {}),
            # only when set (relative to rootdir where it lies below it): runs without one keep their hash
            **({"docs_root": _below(self.docs_root, self.rootdir)} if self.docs_root is not None else {}),
        }


def _below(path: Path, root: Path) -> str:
    """``path`` relative to ``root`` when it lies below it, else as it is."""
    try:
        return path.relative_to(root).as_posix() or "."
    except ValueError:
        return str(path)


def read_pyproject_table(path: Path | None) -> RagevalConfig:
    """The checked ``[tool.rageval]`` table of a pyproject.toml (config.read_config, with the value checks
    below); the empty table when there is none. SettingsError names file, line, key and problem of each mistake."""
    return read_config(path, _value_problems)


def _value_problems(table: Mapping[str, Any]) -> Iterator[Problem]:
    """(key path, problem) of each wrong value, worded by the code that reads it."""
    for path, check in _value_checks(table):
        try:
            check()
        except (SettingsError, ThresholdError) as exc:
            yield path, str(exc)


def _value_checks(table: Mapping[str, Any]) -> Iterator[tuple[tuple[str, ...], Callable[[], Any]]]:
    """(key path, check) for each value of a structurally valid table, checked by the code that reads it."""
    where = "[tool.rageval.thresholds]"
    for name, value in _table(table, "thresholds").items():
        if isinstance(value, Mapping):
            for metric, threshold in value.items():
                yield ("thresholds", name, metric), partial(parse_threshold_table, {name: {metric: threshold}}, where)
        else:
            yield ("thresholds", name), partial(parse_threshold_table, {name: value}, where)
    for name, value in _table(table, "gate").items():
        yield ("gate", name), partial(parse_gate, {name: value}, "[tool.rageval.gate]")
    judge = _table(table, "judge")
    if "metrics" in judge:
        yield ("judge", "metrics"), partial(_judge_metrics, judge["metrics"])
    for model, pair in _table(judge, "prices").items():
        yield ("judge", "prices", model), partial(_prices, {model: pair})
    if _table(table, "matrix"):
        yield ("matrix",), partial(_matrix_table, _table(table, "matrix"), None)
    for name, value in _table(table, "marks").items():
        yield ("marks", name), partial(_marks, {name: value})


def _table(table: Mapping[str, Any], name: str) -> Mapping[str, Any]:
    """A sub-table, or {} when it is missing or no table (a problem table_problems reports)."""
    value = table.get(name, {})
    return value if isinstance(value, Mapping) else {}


def parse_gate(table: Mapping[str, Any], where: str) -> dict[str, float]:
    """``[tool.rageval.gate]``: tolerances by aggregate metric, plus min_judge_coverage."""
    from pytest_rageval.gate.gated_values import gate_name

    out: dict[str, float] = {}
    for name, value in table.items():
        try:
            gate_name(name)
        except ValueError as exc:
            raise SettingsError(f"{where}.{name}: {exc}") from None
        number = finite_number(value) if isinstance(value, (int, float)) else None
        if number is None:
            raise SettingsError(f"{where}.{name}: must be a finite number, got {number_text(value)}")
        if number < 0:
            raise SettingsError(f"{where}.{name}: must not be negative, got {value!r}")
        if name == "min_judge_coverage" and number > 1:
            raise SettingsError(f"{where}.{name}: must be a share from 0 to 1, got {value!r}")
        out[name] = number
    return out


def _first(*values: Any) -> Any:
    for value in values:
        if value not in (None, "", []):
            return value
    return None


def _lines(value: Any) -> str:
    if isinstance(value, (list, tuple)):
        return "\n".join(str(v) for v in value)
    return str(value or "")


@dataclass(frozen=True)
class Sources:
    """Where settings are read from, in order: pytest's ``config.option`` (attribute access), the ini keys, the
    checked ``[tool.rageval]`` table, the environment. Each setting's option, key and variable are the table's."""

    option: Any
    ini: Mapping[str, Any]
    pyproject: RagevalConfig
    environ: Mapping[str, str]

    def option_value(self, name: str) -> Any:
        dest = SETTING[name].dest
        return getattr(self.option, dest, None) if dest else None

    def ini_value(self, name: str) -> Any:
        key = SETTING[name].ini
        return self.ini.get(key) if key else None

    def table_value(self, name: str) -> Any:
        value: Any = self.pyproject
        for part in SETTING[name].table or ("",):
            value = (
                getattr(value, part, None)
                if isinstance(value, BaseModel)
                else value.get(part)
                if isinstance(value, Mapping)
                else None
            )
        return value

    def env_value(self, name: str) -> Any:
        env = SETTING[name].env
        return self.environ.get(env) if env else None

    def value(self, name: str) -> Any:
        """The first value set (option, ini key, table key, environment), or None."""
        return _first(self.option_value(name), self.ini_value(name), self.table_value(name), self.env_value(name))

    def flag(self, name: str) -> bool:
        return bool(self.value(name))


def build_settings(
    *,
    rootdir: Path,
    invocation_dir: Path,
    option: Any,
    ini: Mapping[str, Any],
    pyproject: RagevalConfig,
    environ: Mapping[str, str],
) -> Settings:
    """Resolve settings. ``option`` is pytest's ``config.option`` (attribute access); ``pyproject`` the checked table."""
    src = Sources(option, ini, pyproject, environ)

    def path(name: str) -> Path | None:
        """A path option is relative to the current folder, an ini or table path to rootdir."""
        given = src.option_value(name)
        if given:
            return (invocation_dir / str(given)).resolve()
        given = _first(src.ini_value(name), src.table_value(name))
        return (rootdir / str(given)).resolve() if given else None

    timeout = _timeout(src.ini_value("timeout"))
    judge, judge_model = _judge(src)
    judged = judge != "none" and not src.flag("retrieval_only")
    spot_check = int(src.value("spot_check") or 0)
    if spot_check and not src.value("spot_check_model"):
        raise SettingsError("--rageval-spot-check needs --rageval-spot-check-model (the second judge model)")
    concurrency = _concurrency(src.option_value("concurrency"), src.ini_value("max_concurrency"))
    return Settings(
        rootdir=rootdir,
        eval_set_globs=tuple(src.value("eval_set_globs") or defaults.EVAL_SET_GLOBS),
        target=src.value("target"),
        headers_text=_lines(src.value("headers_text")),
        request_map_text=_lines(src.value("request_map_text")),
        response_map_text=_lines(src.value("response_map_text")),
        stream_format=_stream_format(src.value("stream_format")),
        timeout=timeout,
        k=_k(src.option_value("k"), src.ini_value("k")),
        require_snippets=src.flag("require_snippets"),
        judge=judge,
        output_dir=path("output_dir") or rootdir / defaults.OUTPUT_DIR,
        baseline=path("baseline"),
        update_baseline=src.flag("update_baseline"),
        allow_regressions=src.flag("allow_regressions"),
        ignore_invariants=src.flag("ignore_invariants"),
        min_shared_cases=_min_shared(src.value("min_shared_cases")),
        known_failures=_known_failures(src.value("known_failures")),
        gate_significance=src.flag("gate_significance"),
        store_full_text=src.flag("store_full_text"),
        limits=_limits(src),
        max_response_bytes=_max_response_bytes(src.value("max_response_bytes")),
        retrieval_only=src.flag("retrieval_only"),
        thresholds=_thresholds(src),
        gate=parse_gate(pyproject.gate, "[tool.rageval.gate]"),
        judge_model=judge_model,
        judge_base_url=src.value("judge_base_url"),
        judge_json_mode=_json_mode(src.value("judge_json_mode")),
        judge_metrics=_judge_metrics(pyproject.judge.metrics),
        judge_prices=_prices(pyproject.judge.prices),
        citation_patterns=_citation_patterns(src.value("citation_patterns")),
        cache_dir=path("cache_dir") or rootdir / defaults.CACHE_DIR,
        no_cache=src.flag("no_cache"),
        clear_cache=src.flag("clear_cache"),
        judge_check=src.flag("judge_check"),
        dry_run=src.flag("dry_run"),
        max_judge_cost=_budget(src.value("max_judge_cost")),
        spot_check=spot_check,
        spot_check_model=src.value("spot_check_model"),
        concurrency=concurrency,
        adaptive=src.option_value("concurrency") is None,
        target_concurrency=_target_concurrency(src.value("target_concurrency"), concurrency),
        judge_rate=_rate("rageval_judge_rate", src.value("judge_rate"), timeout),
        target_rate=_rate("rageval_target_rate", src.value("target_rate"), timeout),
        repeat=_repeat(src),
        shard=_shard(src.value("shard")),
        resume=path("resume"),
        summary_md=path("summary_md"),
        step_summary=_step_summary(environ, invocation_dir),
        matrix=_matrix(src, judged=judged),
        rank_by=_rank_by(src.value("rank_by")),
        marks=_marks(pyproject.marks),
        docs_root=path("docs_root"),
        params_hook=str(src.value("params_hook") or "").strip(),
        min_judge_agreement=_agreement(src.value("min_judge_agreement")),
        judge_canary=_canary(src.value("judge_canary")),
        calibration_set=path("calibration_set"),
    )


def _step_summary(environ: Mapping[str, str], invocation_dir: Path) -> Path | None:
    """``$GITHUB_STEP_SUMMARY``: the file GitHub Actions shows under the job (relative to the current folder)."""
    value = environ.get("GITHUB_STEP_SUMMARY")
    return (invocation_dir / value).resolve() if value else None


def _k(cli: int | None, ini_value: Any) -> int:
    try:
        k = int(_first(cli, ini_value, defaults.K))
    except (TypeError, ValueError):
        raise SettingsError(f"rageval_k: must be a whole number, got {ini_value!r}") from None
    if k < 1:
        raise SettingsError(f"--rageval-k: must be at least 1, got {k}")
    return k


def _stream_format(value: Any) -> StreamFormat:
    try:
        return parse_stream_format(str(value or ""))
    except ValueError as exc:
        raise SettingsError(str(exc)) from None


def _timeout(value: Any) -> float:
    try:
        timeout = float(_first(value, defaults.TIMEOUT))
    except (TypeError, ValueError):
        raise SettingsError(f"rageval_timeout: must be a number of seconds, got {value!r}") from None
    if not 0 < timeout < float("inf"):
        raise SettingsError(f"rageval_timeout: must be more than 0 seconds, got {value!r}")
    return timeout


def _judge(src: Sources) -> tuple[str, str | None]:
    """The judge (``auto`` resolved) and its model; ``openai`` needs one."""
    judge_model = src.value("judge_model")
    judge = src.value("judge") or defaults.JUDGE
    if judge not in JUDGE_CHOICES and judge not in external_judge_names():
        raise SettingsError(
            f"rageval_judge: must be one of {', '.join((*JUDGE_CHOICES, *external_judge_names()))}, got {judge!r}"
        )
    if judge == "auto":
        judge = "openai" if judge_model else "lexical"
    if judge == "openai" and not judge_model:
        raise SettingsError(
            "--rageval-judge openai needs a model: --rageval-judge-model, ini rageval_judge_model or [tool.rageval.judge] model"
        )
    return judge, judge_model


def _json_mode(value: Any) -> str:
    json_mode = value or defaults.JUDGE_JSON_MODE
    if json_mode not in defaults.JUDGE_JSON_MODES:
        raise SettingsError(f"rageval_judge_json_mode: must be json_schema, json_object or text, got {json_mode!r}")
    return str(json_mode)


def _citation_patterns(value: Any) -> tuple[str, ...]:
    from pytest_rageval.judges.lexical_text import compile_citation_patterns

    patterns = tuple(str(line) for line in value or [])
    try:
        compile_citation_patterns(patterns)
    except ValueError as exc:
        raise SettingsError(str(exc)) from None
    return patterns


def _thresholds(src: Sources) -> ThresholdConfig:
    """``[tool.rageval.thresholds]`` and the ``--rageval-threshold`` overrides."""
    try:
        global_, by_category = parse_threshold_table(src.pyproject.thresholds, "[tool.rageval.thresholds]")
        cli = parse_cli_thresholds(list(src.option_value("threshold") or []))
    except ThresholdError as exc:
        raise SettingsError(str(exc)) from None
    return ThresholdConfig(global_, by_category, cli)


def _matrix_table(table: Mapping[str, Any], slice_k: bool | None) -> Matrix | None:
    try:
        matrix = matrix_from_table(table, slice_k=slice_k)
    except MatrixError as exc:
        raise SettingsError(str(exc)) from None
    _check_targets(matrix)
    return matrix


def _matrix(src: Sources, *, judged: bool) -> Matrix | None:
    """``--rageval-matrix`` (wins: the table's axes and excludes are not used) or ``[tool.rageval.matrix]``;
    ini ``rageval_slice_k`` over the table's ``slice_k`` over the default: slice only a run without a judge (its
    metrics read the chunks alone; an answer built from 10 chunks is not the answer at 5)."""
    table = src.pyproject.matrix
    raw = str(src.ini_value("slice_k") or "").strip().lower()
    if raw not in ("", "true", "false"):
        raise SettingsError(f"rageval_slice_k: must be true or false, got {src.ini_value('slice_k')!r}")
    slice_k = None if not raw else raw == "true"
    if slice_k is None and isinstance(table.get("slice_k"), bool):
        slice_k = table["slice_k"]
    if slice_k is None:
        slice_k = not judged
    text = src.option_value("matrix")
    if text is None:
        return _matrix_table(table, slice_k)
    try:
        matrix = parse_matrix_option(text, slice_k=slice_k)
    except MatrixError as exc:
        raise SettingsError(str(exc)) from None
    _check_targets(matrix)
    return matrix


def _check_targets(matrix: Matrix | None) -> None:
    """A ``target`` axis holds URLs or ``module:callable`` names (imported when the first case asks)."""
    from pytest_rageval.targets.protocol import RagConfigError
    from pytest_rageval.targets.target_import import check_target

    if matrix is None:
        return
    for name, values in matrix.axes:
        for value in values if name == "target" else ():
            try:
                check_target(str(value))
            except RagConfigError as exc:
                raise SettingsError(f"{matrix.source}: axis 'target': {exc}") from None


def _rank_by(value: Any) -> str | None:
    """The aggregate configs are ranked by (``recall_at_k`` means ``recall_at_k_avg``); None: the default."""
    from pytest_rageval.gate.gated_values import gate_name

    if value is None:
        return None
    try:
        return gate_name(str(value))
    except ValueError as exc:
        raise SettingsError(f"--rageval-rank-by: {exc}") from None


def _limits(src: Sources) -> Limits:
    """The ``rageval_max_*_chars`` ini keys: each a whole number of characters, at least 100."""
    values: dict[str, int] = {}
    for name, setting in LIMIT_SETTINGS.items():
        key, raw = setting.ini, src.ini_value(setting.name)
        if raw in (None, ""):
            continue
        try:
            values[name] = int(str(raw).strip())
        except ValueError:
            raise SettingsError(f"{key}: must be a whole number of characters, got {raw!r}") from None
        if values[name] < 100:
            raise SettingsError(f"{key}: must be at least 100 characters, got {raw!r}")
    return Limits(**values)


def _max_response_bytes(raw: Any) -> int:
    """``rageval_max_response_bytes``: a whole number of bytes, at least 1024."""
    if raw in (None, ""):
        return defaults.MAX_RESPONSE_BYTES
    text = str(raw).strip().replace("_", "")
    if not (text.isascii() and text.isdigit()) or len(text) > 15:
        raise SettingsError(f"rageval_max_response_bytes: must be a whole number of bytes, got {number_text(raw)}")
    if int(text) < 1024:
        raise SettingsError(f"rageval_max_response_bytes: must be at least 1024 bytes, got {text}")
    return int(text)


def _shard(value: str | None) -> tuple[int, int] | None:
    """``--rageval-shard I/N``: this job runs share I (1-based) of N."""
    if not value:
        return None
    index, sep, count = value.partition("/")
    try:
        i, n = int(index), int(count)
    except ValueError:
        i = n = 0
    if not sep or not 1 <= i <= n:
        raise SettingsError(f"--rageval-shard: expected I/N with 1 <= I <= N (e.g. 2/4), got {value!r}")
    return i, n


def _repeat(src: Sources) -> int | None:
    """``--rageval-repeat N`` over ini ``rageval_repeat``: runs of each judge-dependent case (stability.runs_for)."""
    cli = src.option_value("repeat")
    where, value = ("--rageval-repeat", cli) if cli is not None else ("rageval_repeat", src.ini_value("repeat"))
    try:
        return parse_repeat(value, where)
    except RepeatError as exc:
        raise SettingsError(str(exc)) from None


def _known_failures(value: Any) -> str:
    text = str(value or "").strip().lower() or "allow"
    if text not in ("allow", "fail"):
        raise SettingsError(f"rageval_known_failures: must be allow or fail, got {str(value).strip()!r}")
    return text


def _min_shared(value: Any) -> int | float:
    """A whole number of cases (an int), or a share of the baseline's cases from 0 to 1 written with a point (a float)."""
    text = str(value or "").strip()
    if not text:
        return defaults.MIN_SHARED_CASES
    if text.isdigit() and len(text) <= 9 and int(text) >= 1:
        return int(text)
    share = float(text) if len(text) <= 12 and text.replace(".", "", 1).isdigit() and "." in text else 0.0
    if not 0.0 < share <= 1.0:
        raise SettingsError(
            "rageval_min_shared_cases: must be a whole number of at least 1, or a share of the baseline's cases "
            f"above 0 and up to 1 such as 0.5, got {text!r}"
        )
    return share


def _budget(value: Any) -> float | None:
    """``--rageval-max-judge-cost USD``: a finite amount of at least 0 (``nan`` or ``-1`` would never or always trip)."""
    if value is None:
        return None
    number = finite_number(value)
    if number is None or number < 0:
        raise SettingsError(f"--rageval-max-judge-cost: must be a finite amount of USD of at least 0, got {value!r}")
    return number


def _agreement(value: Any) -> float | None:
    """ini ``rageval_min_judge_agreement``: a balanced accuracy from 0 to 1, or None when unset."""
    text = str(value or "").strip()
    if not text:
        return None
    try:
        number = float(text)
    except ValueError:
        number = float("nan")
    if not 0.0 <= number <= 1.0:
        raise SettingsError(f"rageval_min_judge_agreement: must be a balanced accuracy from 0 to 1, got {text!r}")
    return number


def _canary(value: Any) -> int:
    """ini ``rageval_judge_canary``: how many labelled answers to re-judge, 0 (the default) for none."""
    text = str(value or "").strip()
    if not text:
        return 0
    if not text.isdigit():
        raise SettingsError(f"rageval_judge_canary: must be a number of labelled answers (0 or more), got {text!r}")
    return int(text)


def _target_concurrency(value: Any, concurrency: int) -> int:
    """ini ``rageval_target_concurrency``: calls of the target in flight at once (default: the run's concurrency)."""
    text = str(value or "").strip()
    if not text:
        return concurrency
    if not text.isdigit() or len(text) > 6 or int(text) < 1:
        raise SettingsError(f"rageval_target_concurrency: must be a whole number of at least 1, got {text!r}")
    return int(text)


def _concurrency(value: int | None, ceiling: Any) -> int:
    """Cases in flight at once: ``--rageval-concurrency N``, else ini ``rageval_max_concurrency`` (default 64), the
    most an adaptive limit may rise to."""
    if value is None:
        text = str(ceiling or "").strip()
        if not text:
            return defaults.MAX_CONCURRENCY
        if not text.isdigit() or len(text) > 6 or int(text) < 1:
            raise SettingsError(f"rageval_max_concurrency: must be a whole number of at least 1, got {text!r}")
        return int(text)
    if value < 1:
        raise SettingsError(f"--rageval-concurrency: must be at least 1, got {value}")
    if value > MAX_CONCURRENCY_SETTING:
        shown = str(value) if value < 10**20 else f"a number of {len(str(value))} digits"
        raise SettingsError(
            f"--rageval-concurrency: must be a whole number from 1 to {MAX_CONCURRENCY_SETTING}, got {shown}"
        )
    return value


def _rate(key: str, value: Any, timeout: float) -> float | None:
    """ini ``rageval_judge_rate`` / ``rageval_target_rate``: requests a second at most (``10/min``); None when unset.
    A rate slower than one request a ``timeout`` is refused: a request waiting its turn would wait past it."""
    text = str(value or "").strip()
    if not text:
        return None
    try:
        rate = parse_rate(text)
    except ValueError as exc:
        raise SettingsError(f"{key}: {exc}") from None
    if 1.0 / rate > timeout:
        spacing = f"{1.0 / rate:.3g} s" if 1.0 / rate < float("inf") else "more than 1e+308 s"
        raise SettingsError(
            f"{key}: {text!r} is one request every {spacing}, longer than rageval_timeout ({timeout:g} s): "
            "a request waiting its turn would never be sent in time; use a faster rate or a longer timeout"
        )
    return rate


def _judge_metrics(value: Any) -> tuple[str, ...]:
    """``[tool.rageval.judge] metrics``: which judge metrics to score (default: the registry's default-on ones)."""
    if value is None:
        return registry.default_judge_metrics()
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise SettingsError("[tool.rageval.judge] metrics: must be a list of metric names")
    judged = registry.metric_names("judge")
    for name in value:
        if name not in judged:
            raise SettingsError(
                f"[tool.rageval.judge] metrics: unknown judge metric {name!r}{did_you_mean(name, judged)} (one of {', '.join(judged)})"
            )
    return tuple(value)


def _prices(table: Any) -> dict[str, tuple[float, float]]:
    """``[tool.rageval.judge.prices]``: model = [USD per 1M prompt tokens, USD per 1M completion tokens]."""
    if not isinstance(table, Mapping):
        raise SettingsError("[tool.rageval.judge.prices] must be a table of model = [prompt, completion]")
    out: dict[str, tuple[float, float]] = {}
    for model, pair in table.items():
        numbers = (
            [finite_number(p) if isinstance(p, (int, float)) else None for p in pair] if isinstance(pair, list) else []
        )
        if len(numbers) != 2 or any(n is None or n < 0 for n in numbers):
            raise SettingsError(
                f"[tool.rageval.judge.prices] {model}: must be [USD per 1M prompt tokens, USD per 1M completion tokens], "
                "two finite numbers of at least 0"
            )
        out[model] = (float(numbers[0] or 0.0), float(numbers[1] or 0.0))
    return out


def _marks(table: Mapping[str, Any]) -> tuple[tuple[str, frozenset[str]], ...]:
    """``[tool.rageval.marks]``: marker = [tags or categories]; a case with one of them gets the marker."""
    from pytest_rageval.evaluation.schema import mark_problem

    out = []
    for name, selectors in sorted(table.items()):
        problem = mark_problem(str(name))
        if problem is not None:
            raise SettingsError(f"[tool.rageval.marks] {problem}")
        if not (isinstance(selectors, list) and selectors and all(isinstance(s, str) and s for s in selectors)):
            raise SettingsError(
                f'[tool.rageval.marks] {name}: must be a list of tags or categories, e.g. ["slow", "multi_hop"]'
            )
        out.append((str(name), frozenset(selectors)))
    return tuple(out)
