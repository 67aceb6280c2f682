"""Each setting is declared once, in the settings table, and everything else is derived from it.

The options and ini keys pytest registers, the sources ``build_settings`` reads each ``Settings`` field from,
and the reference pages of options and ini keys: each test below fails when one of them names a setting the
table does not declare, or leaves out one it does.
"""

from __future__ import annotations

import dataclasses
import re
from collections import Counter
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from _pytest.config.argparsing import Parser

from pytest_rageval.config.pyproject import RagevalConfig
from pytest_rageval.config.settings import Settings, build_settings
from pytest_rageval.config.table import SETTINGS, Setting
from pytest_rageval.plugin import pytest_addoption

ROOT = Path(__file__).resolve().parents[3]

#: the Settings fields no option or ini key sets: the root folder, what is derived from other settings, the
#: ``[tool.rageval]`` tables, and the CI's step-summary file
NOT_FROM_THE_TABLE = {"rootdir", "adaptive", "gate", "judge_metrics", "judge_prices", "marks", "step_summary"}

#: a value for each setting that is not its default (with the other values it needs), by setting name
EXAMPLES: dict[str, tuple[Any, dict[str, Any]]] = {
    "eval_set_globs": (["x/*.jsonl"], {}),
    "repeat": ("3", {}),
    "shard": ("1/2", {}),
    "resume": ("run", {}),
    "dry_run": (True, {}),
    "target": ("http://target.example/ask", {}),
    "headers_text": (["X-Team: a"], {}),
    "request_map_text": (["question = query"], {}),
    "response_map_text": (["answer = data.answer"], {}),
    "stream_format": ("json:delta.text", {}),
    "timeout": ("7", {}),
    "params_hook": ("team.hooks:params", {}),
    "k": ("3", {}),
    "require_snippets": (True, {}),
    "docs_root": ("docs", {}),
    "threshold": (["mrr=0.5"], {}),
    "judge": ("none", {}),
    "retrieval_only": (True, {}),
    "judge_model": ("m1", {}),
    "judge_base_url": ("http://judge.example/v1", {}),
    "judge_json_mode": ("text", {}),
    "citation_patterns": ([r"\[\d+\]"], {}),
    "judge_check": (True, {}),
    "max_judge_cost": (1.5, {}),
    "spot_check": (2, {"spot_check_model": "m2"}),
    "spot_check_model": ("m2", {}),
    "min_judge_agreement": ("0.7", {}),
    "judge_canary": ("2", {}),
    "calibration_set": ("labelled.jsonl", {}),
    "cache_dir": ("cache", {}),
    "no_cache": (True, {}),
    "clear_cache": (True, {}),
    "baseline": ("base", {}),
    "update_baseline": (True, {}),
    "allow_regressions": (True, {}),
    "ignore_invariants": (True, {}),
    "gate_significance": (True, {}),
    "min_shared_cases": ("3", {}),
    "known_failures": ("fail", {}),
    "output_dir": ("out", {}),
    "store_full_text": (True, {}),
    "summary_md": ("summary.md", {}),
    "concurrency": (4, {}),
    "max_concurrency": ("5", {}),
    "target_concurrency": ("2", {}),
    "judge_rate": ("10/s", {}),
    "target_rate": ("10/s", {}),
    "matrix": ("top_k=3,5", {}),
    "slice_k": ("true", {"matrix": "top_k=3,5"}),
    "rank_by": ("mrr", {}),
    "max_answer_chars": ("500", {}),
    "max_chunk_chars": ("500", {}),
    "max_reasoning_chars": ("500", {}),
    "max_error_chars": ("500", {}),
    "max_response_bytes": ("2048", {}),
}


def _registered() -> Parser:
    parser = Parser(_ispytest=True)
    pytest_addoption(parser)
    return parser


def _options(**values: Any) -> SimpleNamespace:
    """pytest's ``config.option`` with every option of the table at its registered default, then ``values``."""
    attrs = {s.dest: s.option_attrs()["default"] for s in SETTINGS if s.dest}
    return SimpleNamespace(**{**attrs, **values})


def _built(tmp_path: Path, *, option: SimpleNamespace | None = None, ini: dict[str, Any] | None = None) -> Settings:
    return build_settings(
        rootdir=tmp_path,
        invocation_dir=tmp_path,
        option=option or _options(),
        ini=ini or {},
        pyproject=RagevalConfig(),
        environ={},
    )


def _set_through(setting: Setting, source: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """(options, ini keys) that set ``setting`` to its example through ``source`` (with the values it needs)."""
    value, extra = EXAMPLES[setting.name]
    by_name = {s.name: s for s in SETTINGS}
    options = {str(by_name[name].dest): v for name, v in extra.items() if by_name[name].dest}
    ini = {str(by_name[name].ini): v for name, v in extra.items() if not by_name[name].dest}
    if source == "option":
        options[str(setting.dest)] = [value] if setting.repeatable and not isinstance(value, list) else value
    else:
        ini[str(setting.ini)] = value
    return options, ini


def test_each_setting_option_and_ini_key_is_declared_once() -> None:
    for what in ("name", "option", "ini"):
        counts = Counter(getattr(s, what) for s in SETTINGS if getattr(s, what))
        assert [name for name, n in counts.items() if n > 1] == [], f"a {what} declared twice"
    assert all(s.help.strip() and s.group for s in SETTINGS)


def test_every_option_and_ini_key_pytest_registers_comes_from_the_table() -> None:
    parser = _registered()
    options = parser.getgroup("rageval").options
    assert [o.names()[0] for o in options] == [s.option for s in SETTINGS if s.option]
    assert [o.attrs()["help"] for o in options] == [s.option_help() for s in SETTINGS if s.option]
    assert list(parser._inidict) == [s.ini for s in SETTINGS if s.ini]
    assert [help_text for help_text, _, _ in parser._inidict.values()] == [s.ini_help() for s in SETTINGS if s.ini]


def test_every_settings_field_is_set_by_the_table_or_named_as_not() -> None:
    fields = {f.name for f in dataclasses.fields(Settings)}
    fed = {s.field for s in SETTINGS if s.field}
    assert fed <= fields, f"settings of the table that feed no Settings field: {sorted(fed - fields)}"
    assert fields - fed == NOT_FROM_THE_TABLE


@pytest.mark.parametrize("setting", [s for s in SETTINGS if s.ini], ids=lambda s: str(s.ini))
def test_each_ini_key_reaches_its_settings_field(setting: Setting, tmp_path: Path) -> None:
    options, ini = _set_through(setting, "ini")
    default = getattr(_built(tmp_path, option=_options(**options)), str(setting.field))
    assert getattr(_built(tmp_path, option=_options(**options), ini=ini), str(setting.field)) != default


@pytest.mark.parametrize("setting", [s for s in SETTINGS if s.option and s.field], ids=lambda s: str(s.option))
def test_each_option_reaches_its_settings_field(setting: Setting, tmp_path: Path) -> None:
    options, ini = _set_through(setting, "option")
    extra = {k: v for k, v in options.items() if k != setting.dest}
    default = getattr(_built(tmp_path, option=_options(**extra), ini=ini), str(setting.field))
    assert getattr(_built(tmp_path, option=_options(**options), ini=ini), str(setting.field)) != default


#: a ``[tool.rageval]`` value of each setting that has a key there (TOML types, not the ini's text)
TABLE_EXAMPLES = {
    "judge_model": "m1",
    "judge_base_url": "http://judge.example/v1",
    "judge_json_mode": "text",
    "docs_root": "docs",
    "slice_k": True,
}


def _table_with(keys: tuple[str, ...], value: Any) -> dict[str, Any]:
    return {keys[0]: value} if len(keys) == 1 else {keys[0]: _table_with(keys[1:], value)}


@pytest.mark.parametrize("setting", [s for s in SETTINGS if s.table or s.env], ids=lambda s: s.name)
def test_each_tool_rageval_key_and_variable_reaches_its_settings_field(setting: Setting, tmp_path: Path) -> None:
    options, _ = _set_through(setting, "option" if setting.dest else "ini")
    extra = _options(**{k: v for k, v in options.items() if k != setting.dest})
    default = getattr(_built(tmp_path, option=extra), str(setting.field))
    if setting.table:
        table = RagevalConfig.model_validate(_table_with(setting.table, TABLE_EXAMPLES[setting.name]))
        built = build_settings(
            rootdir=tmp_path, invocation_dir=tmp_path, option=extra, ini={}, pyproject=table, environ={}
        )
        assert getattr(built, str(setting.field)) != default
    if setting.env:
        environ = {setting.env: str(EXAMPLES[setting.name][0])}
        built = build_settings(
            rootdir=tmp_path, invocation_dir=tmp_path, option=extra, ini={}, pyproject=RagevalConfig(), environ=environ
        )
        assert getattr(built, str(setting.field)) != default


def test_every_setting_has_an_example_here() -> None:
    assert sorted(EXAMPLES) == sorted(s.name for s in SETTINGS if s.field)


def _first_cells(page: str) -> list[str]:
    """The first cell of every table row of a reference page (header and rule rows left out)."""
    lines = (ROOT / "docs" / "reference" / page).read_text(encoding="utf-8").splitlines()
    rows = [line for i, line in enumerate(lines) if line.startswith("| `") and not lines[i + 1].startswith("|---")]
    return [re.match(r"\| `([^` ]+)", row).group(1) for row in rows]  # type: ignore[union-attr]


def test_every_setting_appears_once_in_each_generated_page() -> None:
    assert Counter(_first_cells("options.md")) == Counter(s.option for s in SETTINGS if s.option)
    assert Counter(_first_cells("ini.md")) == Counter(s.ini for s in SETTINGS if s.ini)


def test_the_path_options_are_the_tables_path_settings() -> None:
    from pytest_rageval.config.rootdir_check import PATH_OPTIONS

    assert set(PATH_OPTIONS) == {
        "--rageval-output",
        "--rageval-baseline",
        "--rageval-resume",
        "--rageval-summary-md",
        "--rageval-cache-dir",
    }
