"""Framework objects as targets, against the real frameworks (LlamaIndex, LangChain/LangGraph, Haystack) and
their own offline parts: the demo corpus indexed by each, the demo eval set run through each adapter.

Each run's recall@5 and MRR are checked against an independent recomputation from what the framework's own
retriever returns, read here by this file's own code (not the plugin's)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

import pytest
from needs import need_installed, need_module
from run_checks import assert_run_whole

pytestmark = pytest.mark.e2e  # the tests here run pytest or the rageval command in processes of their own

ROOT = Path(__file__).resolve().parents[3]
APPS = Path(__file__).resolve().parent / "framework_apps"
CORPUS = ROOT / "pytest_rageval" / "demo" / "corpus"
EVAL_SET = ROOT / "eval_sets" / "demo.jsonl"
K = 5

FRAMEWORK_MODULES = ("llama_index", "langchain_core", "langchain_community", "langgraph", "haystack")


def _cases() -> list[dict[str, Any]]:
    """The demo eval set's one-question lines as read by the plugin's loader (aliases resolved), as plain dicts
    (its conversations are left out of these projects: they test follow-ups, not an adapter's normalisation)."""
    from pytest_rageval.evaluation.evalset import load_eval_file

    return [c.case.model_dump(mode="json") for c in load_eval_file(EVAL_SET).cases if c.case.turns is None]


def _segments(heading: Any) -> list[str]:
    if heading is None:
        return []
    parts = heading.split(">") if isinstance(heading, str) else heading
    return [" ".join(str(p).strip().lstrip("#").split()) for p in parts if str(p).strip().lstrip("#").strip()]


def _expected(case: dict[str, Any], anchors: list[tuple[str, list[str], str]]) -> tuple[float, float]:
    """recall@K and MRR of one case from ``(rel_path, heading segments, doc_id)`` in rank order."""

    def hit(anchor: tuple[str, list[str], str]) -> bool:
        path, heading, doc_id = anchor
        if doc_id in case["gold_doc_ids"]:
            return True
        for support in case["gold_supports"]:
            gold = _segments(support.get("heading_path"))
            if path == support["rel_path"] and heading[: len(gold)] == gold:
                return True
        return False

    hits = [hit(anchor) for anchor in anchors[:K]]
    first = next((i for i, h in enumerate(hits, start=1) if h), None)
    return (1.0 if first else 0.0), (1.0 / first if first else 0.0)


def _relative(path: str) -> str:
    return Path(os.path.relpath(path, CORPUS)).as_posix()


def _llamaindex_anchors(question: str) -> list[tuple[str, list[str], str]]:
    from tests_framework_apps_import import llamaindex_app

    out = []
    for item in llamaindex_app.retriever.retrieve(question):
        meta = item.node.metadata
        parents = [p for p in meta["header_path"].split("/") if p]
        first = item.node.get_content().splitlines()[0]
        own = [first.lstrip("#").strip()] if first.startswith("#") else []
        out.append((_relative(meta["file_path"]), parents + own, item.node.ref_doc_id))
    return out


def _langchain_anchors(question: str) -> list[tuple[str, list[str], str]]:
    from tests_framework_apps_import import langchain_app

    out = []
    for document in langchain_app.retriever.invoke(question):
        heading = [document.metadata[f"Header {n}"] for n in (1, 2, 3) if f"Header {n}" in document.metadata]
        out.append((_relative(document.metadata["source"]), heading, document.id or ""))
    return out


def _haystack_anchors(question: str) -> list[tuple[str, list[str], str]]:
    from tests_framework_apps_import import haystack_app

    documents = haystack_app.pipeline.get_component("retriever").run(query=question)["documents"]
    return [
        (
            _relative(d.meta["file_path"]),
            [*d.meta["parent_headers"], *([d.meta["header"]] if d.meta["header"] else [])],
            d.meta.get("source_id") or d.id,
        )
        for d in documents
    ]


# (target, modules it needs, the independent reading of its retriever)
TARGETS: dict[str, tuple[tuple[str, ...], Callable[[str], list[tuple[str, list[str], str]]]]] = {
    "llamaindex_app:query_engine": (("llama_index.core", "llama_index.retrievers.bm25"), _llamaindex_anchors),
    "llamaindex_app:retriever": (("llama_index.core", "llama_index.retrievers.bm25"), _llamaindex_anchors),
    "langchain_app:chain": (
        ("langchain_core", "langchain_community.retrievers", "langchain_text_splitters", "langgraph"),
        _langchain_anchors,
    ),
    "langchain_app:retriever": (
        ("langchain_core", "langchain_community.retrievers", "langchain_text_splitters", "langgraph"),
        _langchain_anchors,
    ),
    "langchain_app:graph": (
        ("langchain_core", "langchain_community.retrievers", "langchain_text_splitters", "langgraph"),
        _langchain_anchors,
    ),
    "haystack_app:pipeline": (("haystack",), _haystack_anchors),
}


@pytest.fixture(scope="module", autouse=True)
def _apps_importable() -> Any:
    """The apps as the package ``tests_framework_apps_import`` for this file's own recomputation."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "tests_framework_apps_import", APPS / "__init__.py", submodule_search_locations=[str(APPS)]
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["tests_framework_apps_import"] = module
    spec.loader.exec_module(module)
    yield
    for name in [
        n for n in sys.modules if n == "tests_framework_apps_import" or n.startswith("tests_framework_apps_import.")
    ]:
        del sys.modules[name]


def _project(tmp_path: Path, target: str, *ini: str) -> Path:
    shutil.copytree(APPS, tmp_path / "apps", ignore=shutil.ignore_patterns("__pycache__"))
    (tmp_path / "eval_sets").mkdir()
    lines = EVAL_SET.read_text(encoding="utf-8").splitlines(keepends=True)
    (tmp_path / "eval_sets" / "demo.jsonl").write_text("".join(line for line in lines if '"turns"' not in line))
    lines = [f'rageval_target = "apps.{target}"', f'rageval_docs_root = "{CORPUS.as_posix()}"', *ini]
    (tmp_path / "pyproject.toml").write_text("[tool.pytest.ini_options]\n" + "\n".join(lines) + "\n")
    return tmp_path


def _run(project: Path, *args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "--rageval",
            "--rageval-judge=none",
            "-p",
            "no:cacheprovider",
            "-p",
            "no:randomly",
            *args,
        ],
        cwd=project,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def _whole(
    project: Path,
    result: subprocess.CompletedProcess[str] | pytest.RunResult,
    expected: int | None = None,
    latest: bool = True,
) -> Path:
    """The run ended as its cases say (0 when every case passed, else 1, unless ``expected``) and wrote every
    artifact; its folder."""
    status = result.returncode if isinstance(result, subprocess.CompletedProcess) else int(result.ret)
    out = result.stdout if isinstance(result, subprocess.CompletedProcess) else result.stdout.str()
    if expected is None:
        newest = sorted((project / "results").glob("*/results.jsonl"))[-1]
        outcomes = {json.loads(line)["outcome"] for line in newest.read_text().splitlines() if line.strip()}
        expected = 0 if outcomes <= {"passed", "skipped", "xfailed", "xpassed"} else 1
    return assert_run_whole(project / "results", status, expected_status=expected, out=out, latest=latest)


def _records(project: Path) -> list[dict[str, Any]]:
    latest = sorted((project / "results").glob("*/results.jsonl"))[-1]
    return [json.loads(line) for line in latest.read_text().splitlines() if line.strip()]


def _metrics(project: Path) -> dict[str, Any]:
    return cast("dict[str, Any]", json.loads(sorted((project / "results").glob("*/metrics.json"))[-1].read_text()))


@pytest.mark.parametrize("target", sorted(TARGETS))
def test_each_framework_scores_what_its_own_retriever_returned(target: str, tmp_path: Path) -> None:
    modules, anchors = TARGETS[target]
    for name in modules:
        need_module(name)
    project = _project(tmp_path, target)
    result = _run(project)
    assert "can never match" not in result.stdout, result.stdout
    _whole(project, result)
    records = {r["test_case_id"]: r for r in _records(project)}
    compared = 0
    for case in _cases():
        record = records[case["id"]]
        assert record["error"] is None, (case["id"], record["error"])
        if not case["answerable"] or not (case["gold_supports"] or case["gold_doc_ids"]):
            assert record["metrics"].get("recall_at_k") is None
            continue
        recall, mrr = _expected(case, anchors(case["question"]))
        assert (record["metrics"]["recall_at_k"], record["metrics"]["mrr"]) == pytest.approx((recall, mrr)), case["id"]
        compared += 1
    assert compared >= 15
    mean = _metrics(project)["aggregate_metrics"]["recall_at_k_avg"]
    assert mean > 0.25, f"{target}: recall@5 {mean}: the headings or paths were not read"


@pytest.mark.slow
def test_the_matrix_top_k_reaches_the_llamaindex_retriever(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    need_module("llama_index.core")
    need_module("llama_index.retrievers.bm25")
    project = _project(tmp_path, "llamaindex_app:logged_query_engine", 'rageval_slice_k = "false"')
    log = tmp_path / "k.log"
    monkeypatch.setenv("RAGEVAL_TEST_K_LOG", str(log))
    result = _run(project, "--rageval-matrix", "top_k=1,5")
    _whole(project, result)
    by_config = _metrics(project)["by_config"]
    recall = {config: values["aggregate_metrics"]["recall_at_k_avg"] for config, values in by_config.items()}
    assert set(recall) == {"top_k=1", "top_k=5"}, (recall, result.stdout[-2000:])
    assert recall["top_k=1"] < recall["top_k=5"], recall
    cases = len(_cases())
    # each case asked once per config, the retriever's own k (3) replaced by the config's for that call
    assert sorted(log.read_text().split()) == ["1"] * cases + ["5"] * cases
    chunks = {
        r["config_id"]: len(r["retrieved_chunks"]) for r in _records(project) if r["test_case_id"] == "fact-gcp-budget"
    }
    assert chunks == {"top_k=1": 1, "top_k=5": 5}
    # without top_k among the params the object answers as configured: 3 chunks
    log.write_text("")
    _whole(project, _run(project, "-k", "fact-gcp-budget"))
    assert log.read_text().split() == ["3"]
    assert [len(r["retrieved_chunks"]) for r in _records(project)] == [3]


def test_gold_that_can_never_match_is_named_by_the_run_and_by_inspect(tmp_path: Path) -> None:
    need_module("llama_index.core")
    need_module("llama_index.retrievers.bm25")
    project = _project(tmp_path, "llamaindex_app:retriever")
    eval_set = project / "eval_sets" / "demo.jsonl"
    text = eval_set.read_text()
    eval_set.write_text(
        text.replace(
            '"heading_path": "# Gaming Catalyst Program (GCP) > ## Budget"', '"heading_path": "## Budget"'
        ).replace('"rel_path": "treasury/sequencer-fees.md"', '"rel_path": "../sequencer-fees.md"')
    )
    result = _run(project)
    _whole(project, result)
    warnings = [line for line in result.stdout.splitlines() if line.startswith("rageval warning:")]
    assert len(warnings) == 2, result.stdout
    assert (
        "[fact-gcp-budget] gold_supports[0] proposals/gaming-catalyst.md > Budget can never match: no heading path"
        in warnings[0]
    )
    assert "[fact-sequencer-revenue-2023] gold_supports[0] ../sequencer-fees.md" in warnings[1]
    assert "leaves docs_root" in warnings[1]
    inspect = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest_rageval.cli",
            "inspect",
            "What was the GCP budget?",
            "--eval-set",
            "eval_sets/demo.jsonl",
        ],
        cwd=project,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert inspect.returncode == 1, inspect.stderr
    for warning in warnings:
        assert warning.removeprefix("rageval warning: ") in inspect.stdout
    assert "proposals/gaming-catalyst.md  heading: Gaming Catalyst Program (GCP) > Budget" in inspect.stdout


def test_plain_pytest_imports_no_framework(pytester: pytest.Pytester) -> None:
    for name in ("llama_index.core", "langchain_core", "haystack"):
        need_installed(name)
    pytester.makepyfile(
        test_modules=f"""
        import sys

        def test_no_framework_was_imported():
            loaded = sorted(n for n in sys.modules if n.split(".")[0] in {FRAMEWORK_MODULES!r})
            assert loaded == []
    """
    )
    pytester.makepyfile(rag="def ask(question, params):\n    return {'answer': 'a'}\n")
    pytester.makefile(".jsonl", **{"eval_sets/s": json.dumps({"id": "c", "question": "q"}) + "\n"})
    pytester.runpytest_subprocess("-p", "no:cacheprovider", "test_modules.py").assert_outcomes(passed=1)
    # a --rageval run with a plain callable target imports none either (the test file runs beside the case)
    result = pytester.runpytest_subprocess(
        "--rageval",
        "--rageval-target=rag:ask",
        "--rageval-judge=none",
        "-p",
        "no:cacheprovider",
        "test_modules.py",
        "eval_sets",
    )
    result.assert_outcomes(passed=2)
    _whole(pytester.path, result, 0)


FAULTY_APP = """
import time

from langchain_core.runnables import RunnableLambda
from llama_index.core.retrievers import BaseRetriever
from llama_index.core.schema import NodeWithScore, TextNode


class Faulty(BaseRetriever):
    def _retrieve(self, query_bundle):
        question = query_bundle.query_str
        if "boom" in question:
            raise RuntimeError("the index is offline")
        if "hang" in question:
            time.sleep(20)
        if "shape" in question:
            return "not nodes"
        node = TextNode(text="## Budget\\nThe budget was 5 ARB.", metadata={"file_path": "/srv/docs/a.md", "header_path": "/Guide/"})
        return [NodeWithScore(node=node, score=1.0)]


retriever = Faulty()
listing = RunnableLambda(lambda question: [1, 2, 3])
"""


def _faulty_project(pytester: pytest.Pytester, target: str) -> pytest.Pytester:
    pytester.makepyfile(faulty=FAULTY_APP)
    questions = {"ok": "fine?", "boom": "boom?", "hang": "hang?", "shape": "shape?", "ok2": "fine again?"}
    lines = [
        json.dumps(
            {
                "id": name,
                "question": question,
                "gold_supports": [{"rel_path": "a.md", "heading_path": "Guide > Budget"}],
            }
        )
        for name, question in questions.items()
    ]
    pytester.makefile(".jsonl", **{"eval_sets/s": "\n".join(lines) + "\n"})
    pytester.makepyprojecttoml(
        f'[tool.pytest.ini_options]\nrageval_target = "faulty:{target}"\nrageval_timeout = "2"\nrageval_docs_root = "/srv/docs"\n'
    )
    return pytester


def test_a_framework_object_that_raises_hangs_or_answers_another_shape_errs_that_case_only(
    pytester: pytest.Pytester,
) -> None:
    need_installed("llama_index.core")
    need_installed("langchain_core")
    project = _faulty_project(pytester, "retriever")
    result = project.runpytest_subprocess("--rageval", "--rageval-judge=none", "-p", "no:cacheprovider", timeout=120)
    result.assert_outcomes(passed=2, errors=3)
    _whole(project.path, result, 1)  # the errors fail the run; its report is written all the same
    out = result.stdout.str()
    assert "[boom] RAG call failed (target): LlamaIndex retriever raised RuntimeError: the index is offline" in out
    assert "[hang] RAG call failed (timeout): faulty:retriever did not return within 2 s" in out
    assert (
        "[shape] RAG call failed (target): LlamaIndex retriever raised AttributeError: 'str' object has no attribute"
        in out
    )
    # the chunk read from the framework's own metadata: the path under docs_root, the parent headings and its own
    record = next(
        json.loads(line)
        for line in next((project.path / "results").glob("*/results.jsonl")).read_text().splitlines()
        if json.loads(line)["test_case_id"] == "ok"
    )
    chunk = record["retrieved_chunks"][0]
    # kept as the adapter wrote it (a list), and read back by the run's own report
    assert (chunk["rel_path"], chunk["heading_path"], record["metrics"]["recall_at_k"]) == (
        "a.md",
        ["Guide", "Budget"],
        1,
    )


def test_a_langchain_runnable_of_another_shape_names_what_it_returned(pytester: pytest.Pytester) -> None:
    need_installed("llama_index.core")
    need_installed("langchain_core")
    project = _faulty_project(pytester, "listing")
    result = project.runpytest_subprocess("--rageval", "--rageval-judge=none", "-p", "no:cacheprovider", timeout=120)
    assert "LangChain runnable: returned list; expected a dict with answer and context, or text" in result.stdout.str()
    _whole(project.path, result, 1, latest=False)  # every case errored: latest stays where it was


def test_label_writes_gold_relative_to_docs_root_from_a_framework_and_over_http(tmp_path: Path) -> None:
    need_module("llama_index.core")
    need_module("llama_index.retrievers.bm25")
    from ask_server import AskServer, answer

    project = _project(tmp_path, "llamaindex_app:retriever")
    eval_set = project / "new.jsonl"
    eval_set.write_text(
        json.dumps({"id": "gcp", "question": "What budget did the Gaming Catalyst Program have?"}) + "\n"
    )
    label = [sys.executable, "-m", "pytest_rageval.cli", "label", "new.jsonl", "--k", "3"]
    run = subprocess.run(label, input="1\n", cwd=project, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    gold = json.loads(eval_set.read_text())["gold_supports"][0]
    assert (gold["rel_path"], gold["heading_path"]) == (
        "proposals/gaming-catalyst.md",
        ["Gaming Catalyst Program (GCP)", "Budget"],
    )

    # an HTTP service on this machine sending LlamaIndex's absolute file_path, read through the response map
    def responder(body: dict[str, Any]) -> Any:
        return answer(
            "200M ARB.", [{"file_path": str(CORPUS / "proposals" / "gaming-catalyst.md"), "heading_path": ["GCP"]}]
        )

    eval_set.write_text(json.dumps({"id": "gcp", "question": "What budget?"}) + "\n")
    with AskServer(responder) as server:
        run = subprocess.run(
            [*label, "--target", server.url, "--response-map", "retrieved_chunks.rel_path = file_path"],
            input="1\n",
            cwd=project,
            capture_output=True,
            text=True,
            timeout=300,
        )
    assert run.returncode == 0, run.stderr
    assert json.loads(eval_set.read_text())["gold_supports"][0]["rel_path"] == "proposals/gaming-catalyst.md"


VECTOR_APP = """
from pathlib import Path

from langchain_core.embeddings import DeterministicFakeEmbedding
from langchain_core.vectorstores import InMemoryVectorStore
from langchain_text_splitters import MarkdownHeaderTextSplitter

splitter = MarkdownHeaderTextSplitter([("#", "Header 1"), ("##", "Header 2")])
documents = []
for path in sorted(Path("docs").rglob("*.md")):
    for document in splitter.split_text(path.read_text()):
        document.metadata["source"] = str(path)  # relative to the working folder, as a loader run there writes it
        documents.append(document)
retriever = InMemoryVectorStore.from_documents(documents, DeterministicFakeEmbedding(size=16)).as_retriever(search_kwargs={"k": 1})
"""


def test_a_vector_store_retriever_gets_k_through_search_kwargs_and_paths_relative_to_the_working_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    need_module("langchain_core")
    need_module("langchain_text_splitters")
    import asyncio

    from pytest_rageval.evaluation.reach import shape_problems
    from pytest_rageval.evaluation.schema import EvalCase
    from pytest_rageval.targets.resolve import load_target

    (tmp_path / "docs" / "hr").mkdir(parents=True)
    (tmp_path / "docs" / "hr" / "leave.md").write_text("# Handbook\n\n## Holidays\n\nEleven.\n\n## Sick days\n\nTen.\n")
    (tmp_path / "docs" / "hr" / "pay.md").write_text("# Pay\n\n## Dates\n\nMonthly.\n")
    (tmp_path / "vector_app.py").write_text(VECTOR_APP)
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))

    def ask(docs_root: Path, params: dict[str, Any]) -> Any:
        client = load_target("vector_app:retriever", docs_root=docs_root, timeout=30)
        return asyncio.run(client.aask("How many sick days?", k=5, params=params)).response.retrieved_chunks

    chunks = ask(tmp_path / "docs", {"top_k": 3})
    assert len(chunks) == 3 and {c.rel_path for c in chunks} <= {"hr/leave.md", "hr/pay.md"}
    assert all(c.heading_path and c.heading_path[0] in ("Handbook", "Pay") for c in chunks)
    assert len(ask(tmp_path / "docs", {})) == 1  # as configured
    case = EvalCase.model_validate({"id": "c", "question": "q", "gold_supports": [{"rel_path": "hr/leave.md"}]})
    wrong_root = ask(tmp_path, {"top_k": 3})
    assert {c.rel_path for c in wrong_root} <= {"docs/hr/leave.md", "docs/hr/pay.md"}
    assert "carry a folder that gold paths do not" in shape_problems([case], wrong_root, tmp_path)[0]
    assert shape_problems([case], chunks, tmp_path / "docs") == []


# --------------------------------------------------------------------------- MkDocs-style attribute lists

MKDOCS_DOCS = {
    "cookies.md": "# Cookies { #cookies }\n\nAbout cookies.\n\n"
    "## Declare Cookie parameters { #declare-cookie-parameters }\n\nDeclare cookie parameters with the Cookie class.\n\n"
    "## Use {braces} here\n\nTemplates put braces around placeholder names.\n",
    "guide/install.md": "# Install {#install .tab}\n\nRun pip to install the package.\n\n"
    "## Upgrade {: #upgrade }\n\nRun pip with the upgrade flag to upgrade.\n",
}
MKDOCS_CASES = [  # gold written as the headings read on the page
    {
        "id": "cookie",
        "question": "How do I declare cookie parameters?",
        "gold": {"rel_path": "cookies.md", "heading_path": "Cookies > Declare Cookie parameters"},
    },
    {
        "id": "braces",
        "question": "Where do templates put braces around placeholder names?",
        "gold": {"rel_path": "cookies.md", "heading_path": ["Cookies", "Use {braces} here"]},
    },
    {
        "id": "upgrade",
        "question": "How do I upgrade with the upgrade flag?",
        "gold": {"rel_path": "guide/install.md", "heading_path": "# Install > ## Upgrade"},
    },
]
MKDOCS_APPS = {
    "llamaindex": """
from pathlib import Path
from llama_index.core import Document
from llama_index.core.node_parser import MarkdownNodeParser
from llama_index.retrievers.bm25 import BM25Retriever

paths = sorted(Path("docs").resolve().rglob("*.md"))
documents = [Document(text=p.read_text(), id_=str(p), metadata={"file_path": str(p)}) for p in paths]
target = BM25Retriever.from_defaults(nodes=MarkdownNodeParser().get_nodes_from_documents(documents), similarity_top_k=2)
""",
    "langchain": """
from pathlib import Path
from langchain_community.retrievers import BM25Retriever
from langchain_text_splitters import MarkdownHeaderTextSplitter

splitter = MarkdownHeaderTextSplitter(headers_to_split_on=[("#", "Header 1"), ("##", "Header 2")])
documents = []
for path in sorted(Path("docs").resolve().rglob("*.md")):
    for document in splitter.split_text(path.read_text()):
        document.metadata["source"] = str(path)
        documents.append(document)
target = BM25Retriever.from_documents(documents, k=2)
""",
    "haystack": """
from pathlib import Path
from haystack import Document, Pipeline
from haystack.components.preprocessors import MarkdownHeaderSplitter
from haystack.components.retrievers.in_memory import InMemoryBM25Retriever
from haystack.document_stores.in_memory import InMemoryDocumentStore

documents = [Document(content=p.read_text(), meta={"file_path": str(p)}) for p in sorted(Path("docs").resolve().rglob("*.md"))]
store = InMemoryDocumentStore()
store.write_documents(MarkdownHeaderSplitter().run(documents=documents)["documents"])
target = Pipeline()
target.add_component("retriever", InMemoryBM25Retriever(document_store=store, top_k=2))
""",
}
MKDOCS_NEEDS = {
    "llamaindex": ("llama_index.core", "llama_index.retrievers.bm25"),
    "langchain": ("langchain_community.retrievers", "langchain_text_splitters"),
    "haystack": ("haystack",),
}


@pytest.mark.parametrize("framework", sorted(MKDOCS_APPS))
def test_gold_written_as_shown_matches_headings_with_attribute_lists(framework: str, tmp_path: Path) -> None:
    """MkDocs Material and Pandoc pages end headings with ``{ #id }``: each framework's own markdown splitter keeps
    it in the heading, and gold written as the heading reads still matches, with no warning that it cannot."""
    for name in MKDOCS_NEEDS[framework]:
        need_module(name)
    for name, text in MKDOCS_DOCS.items():
        (tmp_path / "docs" / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "docs" / name).write_text(text)
    (tmp_path / "mkdocs_app.py").write_text(MKDOCS_APPS[framework])
    lines = [
        {"id": c["id"], "question": c["question"], "gold_supports": [c["gold"]], "thresholds": {"mrr": 1}}
        for c in MKDOCS_CASES
    ]
    (tmp_path / "eval_sets").mkdir()
    (tmp_path / "eval_sets" / "docs.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    (tmp_path / "pyproject.toml").write_text(
        '[tool.pytest.ini_options]\nrageval_target = "mkdocs_app:target"\nrageval_docs_root = "docs"\n'
    )
    result = _run(tmp_path)
    assert "can never match" not in result.stdout and "rageval warning" not in result.stdout, result.stdout
    run_dir = _whole(tmp_path, result, 0)
    records = {r["test_case_id"]: r for r in _records(tmp_path)}
    assert {key: r["metrics"]["mrr"] for key, r in records.items()} == {c["id"]: 1 for c in MKDOCS_CASES}
    stored = " ".join(json.dumps(c["heading_path"]) for c in records["cookie"]["retrieved_chunks"])
    assert "#declare-cookie-parameters" in stored  # the splitter's own heading, kept as it wrote it
    assert "Cookies &gt; Declare Cookie parameters" in (run_dir / "report.html").read_text()
    inspect = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest_rageval.cli",
            "inspect",
            "How do I declare cookie parameters?",
            "--eval-set",
            "eval_sets/docs.jsonl",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert inspect.returncode == 0, inspect.stdout + inspect.stderr
    assert "cookies.md  heading: Cookies > Declare Cookie parameters" in inspect.stdout
