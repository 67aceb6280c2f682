"""A config matrix's depth axis over a framework object: ``k`` as well as ``top_k`` sets its retriever's k for each
config, and the k recorded is the k asked (a real LangChain retriever; run by the framework venvs of .ci/run)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from run_checks import assert_run_whole


def _eval_set(pytester: pytest.Pytester, *cases: dict[str, Any]) -> None:
    lines = [{"question": f"question of {c['id']}", "gold_supports": [{"rel_path": "docs/a.md"}], **c} for c in cases]
    pytester.makefile(".jsonl", **{"eval_sets/s": "\n".join(json.dumps(c) for c in lines) + "\n"})


def _args(url: str, *extra: str) -> list[str]:
    return ["--rageval", "--rageval-judge=none", f"--rageval-target={url}", "-p", "no:cacheprovider", *extra]


def _records(pytester: pytest.Pytester) -> list[dict[str, Any]]:
    run_dir = pytester.path / "results" / (pytester.path / "results" / "latest").read_text().strip()
    return [json.loads(line) for line in (run_dir / "results.jsonl").read_text().splitlines()]


RETRIEVER = """
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever


class Retriever(BaseRetriever):
    k: int = 3

    def _get_relevant_documents(self, query, *, run_manager=None):
        with open("asked.log", "a") as log:
            log.write(f"{self.k}\\n")
        return [Document(page_content=f"text {i}", metadata={"source": "docs/a.md" if i == 0 else f"docs/x{i}.md"})
                for i in range(self.k)]


retriever = Retriever()
"""


@pytest.mark.parametrize("axis", ["k", "top_k"])
def test_a_framework_retriever_is_asked_at_the_k_each_config_records(pytester: pytest.Pytester, axis: str) -> None:
    """A matrix depth axis, ``k`` as well as ``top_k``, sets a framework object's retriever k for each config."""
    _eval_set(pytester, {"id": "c0"})
    pytester.makepyfile(myretriever=RETRIEVER)
    result = pytester.runpytest_subprocess(
        *_args(
            "myretriever:retriever",
            "--rageval-matrix",
            f"{axis}=1,4",
            "-o",
            "rageval_slice_k=false",
            "--rageval-store-full-text",
        )
    )
    assert_run_whole(pytester.path / "results", result.ret, expected_status=0, out=result.stdout.str())
    asked = sorted(int(line) for line in (pytester.path / "asked.log").read_text().split())
    recorded = sorted((r["config"]["k"], r["trace"]["k"], len(r["retrieved_chunks"])) for r in _records(pytester))
    assert asked == [1, 4] and recorded == [(1, 1, 1), (4, 4, 4)], (asked, recorded)
