"""The bundled demo RAG: chunking, BM25, abstention, the HTTP server and its eval set.

The last part re-implements SPEC section 4's checks in a few lines (on purpose
independent of ``pytest_rageval.evaluation.metrics``) and asserts that every line of
``eval_sets/demo.jsonl`` passes them with K=5, so the eval set and the demo
cannot drift apart.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest

from pytest_rageval.demo import ask
from pytest_rageval.demo.__main__ import main as demo_main
from pytest_rageval.demo.bm25 import K1, B, BM25Index, tokenize
from pytest_rageval.demo.chunker import chunk_note
from pytest_rageval.demo.notes import load_chunks
from pytest_rageval.demo.retrieval import retrieve
from pytest_rageval.engine.conversation import history_after
from pytest_rageval.evaluation.schema import EvalCase

EVAL_SET = Path(__file__).resolve().parents[3] / "eval_sets" / "demo.jsonl"
K = 5
CHUNK_KEYS = {
    "chunk_id",
    "doc_id",
    "rel_path",
    "heading_path",
    "score_vector",
    "score_lexical",
    "score_final",
    "text",
    "rank",
}

NOTE = """---
id: sample-note
date: 2024-01-01
---
# Sample Proposal

Intro paragraph about the sample proposal.

## Budget

The budget is 10 ARB.

### Tranches

Two tranches of 5 ARB.

```
# not a heading inside a fence
```

## Vote

The vote passed.
"""


# --------------------------------------------------------------------------- chunking


def test_chunking_follows_headings() -> None:
    chunks = chunk_note(NOTE, "proposals/sample.md")
    assert [c.heading_path for c in chunks] == [
        "# Sample Proposal",
        "# Sample Proposal > ## Budget",
        "# Sample Proposal > ## Budget > ### Tranches",
        "# Sample Proposal > ## Vote",
    ]
    assert {c.doc_id for c in chunks} == {"sample-note"}
    assert {c.rel_path for c in chunks} == {"proposals/sample.md"}
    assert "# not a heading inside a fence" in chunks[2].text
    assert "id: sample-note" not in chunks[0].text
    assert all(re.fullmatch(r"[0-9a-f]{32}", c.chunk_id) for c in chunks)
    # stable across runs, and different when the text changes
    assert [c.chunk_id for c in chunk_note(NOTE, "proposals/sample.md")] == [c.chunk_id for c in chunks]
    changed = chunk_note(NOTE.replace("10 ARB", "11 ARB"), "proposals/sample.md")
    assert changed[1].chunk_id != chunks[1].chunk_id and changed[0].chunk_id == chunks[0].chunk_id


def test_long_sections_split_between_paragraphs() -> None:
    paragraphs = [f"Paragraph {i} " + "word " * 60 for i in range(6)]
    source = "# Long\n\n## Body\n\n" + "\n\n".join(paragraphs)
    chunks = chunk_note(source, "long.md", max_chars=700)
    assert len(chunks) > 1
    assert {c.heading_path for c in chunks} == {"# Long > ## Body"}
    assert {c.doc_id for c in chunks} == {"long"}  # no front matter: path without .md
    assert "\n\n".join(c.text for c in chunks) == "\n\n".join(p.strip() for p in paragraphs)
    assert len({c.chunk_id for c in chunks}) == len(chunks)


def test_bundled_corpus() -> None:
    chunks = load_chunks()
    notes = {c.rel_path for c in chunks}
    assert 12 <= len(notes) <= 18
    assert {path.split("/")[0] for path in notes} == {"proposals", "forum", "council", "treasury"}
    assert len({c.chunk_id for c in chunks}) == len(chunks)
    doc_ids = {c.rel_path: c.doc_id for c in chunks}
    assert len(set(doc_ids.values())) == len(notes)  # one stable id per note
    assert doc_ids["proposals/stip.md"] == "stip-2023"
    stip = [c.heading_path for c in chunks if c.rel_path == "proposals/stip.md"]
    assert stip[0] == "# Short-Term Incentive Program (STIP)"
    assert "# Short-Term Incentive Program (STIP) > ## Tally Vote" in stip


# --------------------------------------------------------------------------- retrieval


def test_bm25_formula_and_ranking() -> None:
    docs = [tokenize(t) for t in ("the cat sat on the mat", "dogs chase cats", "a treasury report")]
    index = BM25Index.build(docs)
    n, df, tf = 3, 1, 1
    idf = math.log(1 + (n - df + 0.5) / (df + 0.5))
    length, avg = len(docs[2]), sum(map(len, docs)) / 3
    expected = idf * tf * (K1 + 1) / (tf + K1 * (1 - B + B * length / avg))
    assert index.score(["treasury"], 2) == pytest.approx(expected)
    assert max(range(3), key=lambda i: index.score(tokenize("treasury reports"), i)) == 2


def test_bm25_ranks_the_obvious_note_first() -> None:
    result = retrieve("sequencer fee revenue in ETH", K)
    assert result.hits[0].chunk.rel_path == "treasury/sequencer-fees.md"
    assert [h.rank for h in result.hits] == list(range(1, len(result.hits) + 1))
    assert result.selected_folders[0] == "treasury"
    assert all(h.chunk.folder in result.selected_folders for h in result.hits)


def test_ask_default_shape() -> None:
    response = ask("Who proposed the Gaming Catalyst Program?", {"k": 3, "ignored": True})
    assert set(response) == {"answer", "references", "abstained", "abstain_reason", "debug", "timings"}
    assert response["abstained"] is False and response["abstain_reason"] is None
    assert "Tomasz Nowak" in response["answer"]
    retrieved = response["debug"]["retrieved_chunks"]
    assert [c["rank"] for c in retrieved] == [1, 2, 3]
    assert all(set(c) == CHUNK_KEYS and c["score_vector"] is None for c in retrieved)
    assert response["references"] and all(ref in retrieved for ref in response["references"])
    assert isinstance(response["debug"]["folder_selection"]["selected_folders"], list)
    assert set(response["timings"]) == {"retrieval_ms", "generation_ms"}
    assert len(ask("Who proposed the Gaming Catalyst Program?")["debug"]["retrieved_chunks"]) == K
    assert len(ask("Who proposed the Gaming Catalyst Program?", {"k": 5, "top_k": 7})["debug"]["retrieved_chunks"]) == 7
    with pytest.raises(ValueError):
        ask("anything", {"k": 0})


@pytest.mark.parametrize(
    "question",
    ["What is the recipe for a sourdough bread?", "Which rocket did Apollo 11 use to reach the Moon?"],
)
def test_abstains_off_topic(question: str) -> None:
    response = ask(question)
    assert response["abstained"] is True
    assert response["abstain_reason"] == "no_relevant_context"
    assert response["references"] == []
    assert response["answer"] == "I could not find this in the notes."


def test_ask_is_deterministic_across_threads() -> None:
    questions = [case.question for _, line in EVAL_LINES for case in EvalCase.model_validate(line).asked()]

    def strip_timings(response: dict[str, Any]) -> dict[str, Any]:
        return {key: value for key, value in response.items() if key != "timings"}

    expected = [strip_timings(ask(q)) for q in questions]
    with ThreadPoolExecutor(max_workers=8) as pool:
        assert [strip_timings(r) for r in pool.map(ask, questions)] == expected


def test_cli_ask_prints_json(capsys: pytest.CaptureFixture[str]) -> None:
    assert demo_main(["ask", "What is the total budget of the Gaming Catalyst Program?", "--k", "2"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert len(printed["debug"]["retrieved_chunks"]) == 2 and "200,000,000 ARB" in printed["answer"]


# --------------------------------------------------------------------------- HTTP


@pytest.fixture(scope="module")
def http(demo_url: str) -> Iterator[httpx.Client]:
    """A client of the demo server (``demo_url``, the root conftest.py)."""
    with httpx.Client(base_url=demo_url, timeout=10) as client:
        yield client


def test_http_ask(http: httpx.Client) -> None:
    question = "What was the result of the STIP Tally vote?"
    reply = http.post("/api/v1/ask?debug=true", json={"question": question, "k": 4})
    assert reply.status_code == 200 and reply.headers["content-type"].startswith("application/json")
    body = reply.json()
    expected = ask(question, {"k": 4})
    body.pop("timings"), expected.pop("timings")
    assert body == expected
    assert [c["rank"] for c in body["debug"]["retrieved_chunks"]] == [1, 2, 3, 4]

    plain = http.post("/api/v1/ask", json={"question": question}).json()
    assert "debug" not in plain and plain["answer"] == body["answer"]


@pytest.mark.parametrize(
    "content",
    [b"{not json", b"[1, 2]", b'{"k": 5}', b'{"question": "   "}', b'{"question": "STIP", "k": "five"}'],
)
def test_http_bad_body_is_400(http: httpx.Client, content: bytes) -> None:
    reply = http.post("/api/v1/ask?debug=true", content=content)
    assert reply.status_code == 400
    assert reply.json()["error"]


def test_http_unknown_routes_are_404(http: httpx.Client) -> None:
    assert http.get("/api/v1/ask").status_code == 404
    assert http.post("/api/v2/ask", json={"question": "x"}).status_code == 404
    assert http.get("/").json()["error"].startswith("not found")
    assert http.get("/health").json() == {"status": "ok"}
    # the kept-alive connection still answers after a 404 with a body
    assert http.post("/api/v1/ask", json={"question": "STIP budget"}).status_code == 200


# --------------------------------------------------------------------------- the eval set


def _eval_lines() -> list[tuple[int, dict[str, Any]]]:
    lines = []
    for number, raw in enumerate(EVAL_SET.read_text(encoding="utf-8").splitlines(), start=1):
        if raw.strip() and not raw.lstrip().startswith("//"):
            lines.append((number, json.loads(raw)))
    return lines


EVAL_LINES = _eval_lines()


def _segments(path: str | list[str] | None) -> list[str]:
    parts = (path.split(">") if isinstance(path, str) else path) or []
    return [" ".join(p.strip().lstrip("#").split()) for p in parts if p.strip().lstrip("#").strip()]


def _matches_support(chunk: dict[str, Any], support: Any) -> bool:
    gold = _segments(support.heading_path)
    return chunk["rel_path"] == support.rel_path and _segments(chunk["heading_path"])[: len(gold)] == gold


def _matches_gold(chunk: dict[str, Any], case: EvalCase) -> bool:
    return chunk["doc_id"] in case.gold_doc_ids or any(_matches_support(chunk, s) for s in case.gold_supports)


def test_eval_set_covers_every_category() -> None:
    cases = [EvalCase.model_validate(line) for _, line in EVAL_LINES]
    assert len(cases) >= 22 and len({c.id for c in cases}) == len(cases)
    categories = [c.category for c in cases]
    assert categories.count("factual") >= 5
    assert {"multi_hop", "recency/conflict", "reasoning"} <= set(categories)
    assert all(c.required_support_groups for c in cases if c.category == "multi_hop")
    assert {c.recency_conflict_rule for c in cases} >= {"cite_newer", "cite_both"}
    assert {c.category for c in cases if not c.answerable} == {"general", "adversarial"}
    assert sum(bool(c.gold_doc_ids) for c in cases) >= 2
    assert any({"query", "expectedProposalIds", "referenceAnswer"} <= set(line) for _, line in EVAL_LINES)
    answerable = [c for case in cases for c in case.asked() if c.answerable]
    assert all(c.has_gold and c.reference_answer and c.expected_key_facts and c.difficulty for c in answerable)
    conversations = [c for c in cases if c.turns]
    assert len(conversations) >= 3 and {len(c.turns or ()) for c in conversations} == {3}
    assert {c.history for c in conversations} == {"live", "reference"}


def _asked(case: EvalCase) -> list[tuple[EvalCase, dict[str, Any]]]:
    """Each one-question case of a line with the params it is sent: a conversation's turns with the history the
    plugin sends (engine.conversation.history_after over the demo's own earlier answers)."""
    if not case.turns:
        return [(case, {"k": K, **case.params})]
    asked: list[tuple[EvalCase, dict[str, Any]]] = []
    answers: list[Any] = []
    for index in range(len(case.turns)):
        params = {"k": K, **case.params, "history": history_after(case, answers)}
        turn = case.turn_case(index)
        asked.append((turn, params))
        answers.append({"answer": ask(turn.question, params)["answer"]})
    return asked


def test_gold_anchors_exist_and_hold_their_snippets() -> None:
    chunks = [
        {"rel_path": c.rel_path, "heading_path": c.heading_path, "doc_id": c.doc_id, "text": c.text}
        for c in load_chunks()
    ]
    doc_ids = {c["doc_id"] for c in chunks}
    for number, line in EVAL_LINES:
        for case in EvalCase.model_validate(line).asked():
            assert set(case.gold_doc_ids) <= doc_ids, f"line {number}: unknown gold_doc_ids"
            for support in case.gold_supports:
                anchored = [c for c in chunks if _matches_support(c, support)]
                assert anchored, f"line {number}: no chunk at {support.rel_path} {support.heading_path!r}"
                for snippet in support.snippets:  # so rageval_require_snippets = true passes too
                    assert any(snippet.lower() in c["text"].lower() for c in anchored), f"line {number}: {snippet!r}"


@pytest.mark.parametrize(("number", "line"), EVAL_LINES, ids=[line["id"] for _, line in EVAL_LINES])
def test_eval_line_passes(number: int, line: dict[str, Any]) -> None:
    for case, params in _asked(EvalCase.model_validate(line)):
        _one_question_passes(number, case, ask(case.question, params))


def _one_question_passes(number: int, case: EvalCase, response: dict[str, Any]) -> None:
    top = sorted(response["debug"]["retrieved_chunks"], key=lambda c: c["rank"])[:K]
    references = response["references"]

    if not case.answerable:
        assert response["abstained"] is True, f"line {number} should abstain: {response['answer']!r}"
        return
    assert response["abstained"] is False, f"line {number} abstained"
    if case.has_gold:
        ranks = [rank for rank, chunk in enumerate(top, start=1) if _matches_gold(chunk, case)]
        assert ranks, f"line {number}: recall_at_k = 0"
        assert 1 / ranks[0] >= 0.2, f"line {number}: mrr = {1 / ranks[0]}"
        assert any(_matches_gold(ref, case) for ref in references), f"line {number}: attribution_hit = 0"
    if case.required_support_groups:
        hit = [any(_matches_support(c, s) for c in top) for s in case.gold_supports]
        assert any(all(hit[i] for i in group) for group in case.required_support_groups), f"line {number}"
    cited = [any(_matches_support(ref, s) for ref in references) for s in case.gold_supports]
    if case.recency_conflict_rule == "cite_newer":
        assert cited[0], f"line {number}: the newer source is not cited"
    if case.recency_conflict_rule == "cite_both":
        assert all(cited), f"line {number}: not every source is cited"
