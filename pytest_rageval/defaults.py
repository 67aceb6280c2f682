"""Every default of the configuration, written once, and the ini keys that carry it.

Foundations (layer 0): imports nothing but ``typing``, so the pytest surface
(plugin/__init__.py, imported by every pytest run) can register the ini keys from here
without loading anything else. ``settings.Settings``, ``sanitize.Limits``, the
``[tool.rageval]`` model (config.py) and ``pytest_addoption`` read these names.
"""

from __future__ import annotations

from typing import Any, Literal

EVAL_SET_GLOBS: tuple[str, ...] = ("eval_sets/**/*.jsonl",)  # relative to rootdir
TIMEOUT = 60.0  # seconds before a RAG call times out
K = 5  # retrieved chunks that count
JUDGE = "auto"  # openai with a judge model, else lexical
JUDGE_CHOICES = ("auto", "openai", "lexical", "none")
JUDGE_JSON_MODE = "json_schema"
JUDGE_JSON_MODES = ("json_schema", "json_object", "text")
OUTPUT_DIR = "results"  # relative to rootdir
CACHE_DIR = ".rageval_cache"  # relative to rootdir
#: the fewest unchanged cases a baseline must share with a run to be gated on (rageval_min_shared_cases)
MIN_SHARED_CASES = 10
#: requests in flight to each endpoint (the RAG target, a judge) at the start of an adaptive run; with
#: --rageval-concurrency N, the fixed number of cases in flight at once in one process instead
CONCURRENCY = 8
MAX_CONCURRENCY = 64  # rageval_max_concurrency: the most an adaptive limit rises to, and the cases in flight at once
MAX_ANSWER_CHARS = 20_000  # answer and abstain reason (sanitize.Limits)
MAX_CHUNK_CHARS = 20_000  # text of a retrieved chunk or reference field
MAX_REASONING_CHARS = 4_000  # judge reasoning, claim or raw answer
MAX_ERROR_CHARS = 2_000  # error message
MAX_CLAIMS_KEPT = 20  # claims of each list of a judge verdict kept in results (more are cut, with a note)
MAX_RESPONSE_BYTES = 10_485_760  # 10 MiB: most bytes of a RAG or judge response body read, after decompression

#: (name, help, pytest ini type, default) of every ini key, for ``parser.addini``. A default of ""
#: means "not set": settings.py then falls back to the constant above (the ini value would win over
#: ``[tool.rageval]`` otherwise).
IniType = Literal["string", "linelist", "bool"]
INI_KEYS: tuple[tuple[str, str, IniType, Any], ...] = (
    ("rageval_eval_sets", "eval-set files (globs relative to rootdir) run by `pytest --rageval` without paths", "linelist", list(EVAL_SET_GLOBS)),
    ("rageval_target", "the system under test: an http(s):// URL or package.module:callable", "string", ""),
    ("rageval_headers", "HTTP headers for the target, lines `Name: value`, ${ENV_VAR} interpolated", "linelist", []),
    ("rageval_request_map", "request body key renames, lines `question = query`, `k = topK`", "linelist", []),
    ("rageval_response_map", "response mapping, lines `target = source.path`", "linelist", []),
    ("rageval_timeout", f"seconds before a RAG call times out (default {TIMEOUT:g})", "string", f"{TIMEOUT:g}"),
    ("rageval_k", f"how many retrieved chunks count (default {K})", "string", ""),
    ("rageval_max_answer_chars", f"longest answer (and abstain reason) kept; longer is cut with a note (default {MAX_ANSWER_CHARS})", "string", ""),
    ("rageval_max_chunk_chars", f"longest text of a retrieved chunk or reference field kept (default {MAX_CHUNK_CHARS})", "string", ""),
    ("rageval_max_reasoning_chars", f"longest judge reasoning, claim or raw answer kept (default {MAX_REASONING_CHARS})", "string", ""),
    ("rageval_max_error_chars", f"longest error message kept (default {MAX_ERROR_CHARS})", "string", ""),
    (
        "rageval_max_response_bytes",
        f"most bytes of a RAG or judge response body read, after decompression; a longer "
        f"body is that call's error (default {MAX_RESPONSE_BYTES}, 10 MiB)",
        "string",
        "",
    ),
    ("rageval_require_snippets", "gold supports with snippets also need one snippet in the chunk text", "bool", False),
    ("rageval_judge", "judge: auto (openai with a model, else lexical), openai, lexical or none", "string", ""),
    ("rageval_judge_model", "model of the OpenAI-compatible judge", "string", ""),
    ("rageval_judge_base_url", "base URL of the OpenAI-compatible judge (env OPENAI_BASE_URL)", "string", ""),
    ("rageval_judge_json_mode", f"{JUDGE_JSON_MODE} (default), json_object or text", "string", ""),
    ("rageval_citation_patterns", "extra citation markers the lexical judge removes from answers, one regex a line", "linelist", []),
    ("rageval_cache_dir", f"judge cache folder (default {CACHE_DIR})", "string", ""),
    ("rageval_output", f"folder of run artifacts (default {OUTPUT_DIR})", "string", ""),
    ("rageval_baseline", "baseline metrics.json or run folder to gate against", "string", ""),
    (
        "rageval_max_concurrency",
        "the most requests in flight to one endpoint an adaptive limit rises to, and the cases in flight at once (default 64)",
        "string",
        "",
    ),
    (
        "rageval_target_concurrency",
        "calls of the target in flight at once, for a target that is not thread-safe (default: the run's concurrency)",
        "string",
        "",
    ),
    ("rageval_judge_rate", "judge requests started at most this fast, e.g. 10/min, 2/s, 500/h; one budget for all xdist workers", "string", ""),
    ("rageval_target_rate", "target calls started at most this fast, e.g. 60/min; one budget for all xdist workers", "string", ""),
    (
        "rageval_min_shared_cases",
        f"the gate refuses a baseline that shares fewer unchanged cases with the run (default "
        f"{MIN_SHARED_CASES}, or every case when a side has fewer)",
        "string",
        "",
    ),
    (
        "rageval_known_failures",
        "allow (default): with a baseline, a case that failed there and fails now the same way, none of its missed "
        "metrics worse, is an xfail (a known failure); fail: every threshold miss fails",
        "string",
        "",
    ),
    (
        "rageval_docs_root",
        "the folder gold rel_paths are relative to: absolute chunk paths under it are made relative "
        "to it (default rootdir; also [tool.rageval] docs_root)",
        "string",
        "",
    ),
    ("rageval_params_hook", "package.module:function(target, params) returning the framework object to ask for a call's params", "string", ""),
    (
        "rageval_min_judge_agreement",
        "refuse a run with a judge unless a stored calibration of that judge (rageval "
        "calibrate) reaches this balanced accuracy, 0 to 1, on every judge metric",
        "string",
        "",
    ),
    ("rageval_repeat", "runs of each judge-dependent case (every case without a judge); a case's own repeat wins", "string", ""),
    (
        "rageval_judge_canary",
        "re-judge this many labelled answers of rageval_calibration_set in every judged run, without the judge "
        "cache; the baseline gate fails when their verdicts changed (default 0: none)",
        "string",
        "",
    ),
    ("rageval_calibration_set", "the labelled set the judge canary takes its answers from (default: the one shipped with the package)", "string", ""),
    (
        "rageval_slice_k",
        "config matrix: ask once at the largest k and slice the chunks for smaller k (default: true "
        "in a run without a judge, false with one, whose answer depends on k)",
        "string",
        "",
    ),
    (
        "rageval_rank_by",
        "config matrix: the aggregate configs are ranked by (default correctness_avg when judged, else recall_at_k_avg)",
        "string",
        "",
    ),
)
