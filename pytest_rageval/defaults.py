"""Every default of the configuration, written once.

Foundations (layer 0): imports nothing, so the settings table (config/table.py), which every pytest run
imports to register the options and ini keys, loads nothing else. ``config.settings.Settings``,
``sanitize.Limits`` and the settings table read these names.
"""

from __future__ import annotations

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
