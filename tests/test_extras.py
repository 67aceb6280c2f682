"""The framework extras install versions the project tests: each lower bound is the version .ci/run's framework venv
pins (the oldest tested), and each package the examples import comes with an extra."""

from __future__ import annotations

import re
import sys
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]
EXTRAS = ("llamaindex", "langchain", "langgraph", "haystack")


def _extras() -> dict[str, list[str]]:
    extras: dict[str, list[str]] = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]
    return extras


def test_every_framework_extra_has_its_floor_pinned_in_ci() -> None:
    pins = dict(
        re.findall(
            r"'([A-Za-z0-9_.-]+)==([0-9][^']*)'", (ROOT / ".ci" / "run").read_text().split("frameworks=$(mktemp -d)")[1]
        )
    )
    extras = _extras()
    assert set(EXTRAS) <= set(extras), sorted(extras)
    for extra in EXTRAS:
        for requirement in extras[extra]:
            name, floor = re.fullmatch(r"([A-Za-z0-9_.-]+)>=([0-9][^,;<]*)(?:,<[0-9.]+)?", requirement).groups()  # type: ignore[union-attr]
            assert pins.get(name) == floor, (
                f"[{extra}] {requirement}: .ci/run's framework venv pins {name}=={pins.get(name)}"
            )


def test_the_extras_bring_what_the_examples_import() -> None:
    extras = _extras()
    wanted = {
        "llamaindex": {"llama-index-core", "llama-index-retrievers-bm25"},
        "langchain": {"langchain-core", "langchain-community", "langchain-text-splitters", "rank-bm25"},
        "langgraph": {"langgraph", "langchain-core"},
        "haystack": {"haystack-ai"},
    }
    for extra, names in wanted.items():
        assert names <= {re.split(r"[<>=]", requirement)[0] for requirement in extras[extra]}, extra
    dev = {re.split(r"[<>=]", requirement)[0] for requirement in extras["dev"]}
    assert set().union(*wanted.values()) <= dev  # the suite's own environment runs every example
