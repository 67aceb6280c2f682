"""Secrets never reach an artifact, the judge cache or the terminal, whatever the servers do.

A random canary judge key (env ``RAGEVAL_JUDGE_API_KEY``), a random canary header token
(``-o "rageval_headers=X-Auth: Bearer ..."`` on the command line; not ``Authorization``, which httpx
replaces by Basic auth when the URL has ``user:pass@``) and a random canary in the
target URL (``user:pass@`` and ``?api_key=``) go into one real session (pytester subprocess, serial and
``-n 2``) against a loopback ask server and a loopback OpenAI-compatible judge that misbehave in every
way a probe found a leak: each case below is one such way. Afterwards every byte under the test's
folder (output folder, judge cache, JUnit XML, pytest-html report, captured stdout/stderr) is read and
must hold none of the canaries: not as is, not JSON-escaped, not URL-encoded, not an 8-character prefix.
"""

from __future__ import annotations

import json
import re
import secrets
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote, quote_plus

import pytest
from ask_server import AskServer, answer, chunk
from needs import need_module
from openai_server import OpenAIServer, completion, error, ok, user_text

need_module("pytest_html")
need_module("xdist")

KEY = f"sk-{secrets.token_hex(12)}+{secrets.token_hex(4)}/{secrets.token_hex(4)}="  # base64-ish: '+', '/', '='
TOKEN = f"tk{secrets.token_hex(16)}"
URL_SECRET = f"pw{secrets.token_hex(12)}"
CANARIES = {"judge key": KEY, "header token": TOKEN, "url secret": URL_SECRET}
GOLD = {"rel_path": "docs/a.md", "heading_path": "# A"}
PAD = "x" * 190  # a secret from character 190 of a text that something cuts to 200: 10 characters left


def escaped(text: str) -> str:
    """``text`` with every character as a JSON ``\\uXXXX`` escape (valid inside a JSON string)."""
    return "".join(f"\\u{ord(c):04x}" for c in text)


# --------------------------------------------------------------------------- the judge's misbehaviours


def _refusal(body: dict[str, Any]) -> Any:
    reply = completion(None)
    reply["choices"][0]["message"]["refusal"] = f"I will not judge this; your key {KEY} is logged."
    return 200, {}, reply


def _json_text(fields: str) -> Any:
    """A verdict whose message is raw JSON text ``{fields}`` (escapes survive into the message)."""
    return ok("{" + fields + "}")


JUDGE: dict[str, Callable[[dict[str, Any]], Any]] = {
    # message.refusal echoes the key (content empty): re-asked, then an error naming the refusal
    "j-refusal": _refusal,
    # a 200 whose body is not JSON: the SDK's JSONDecodeError carries the body
    "j-not-json": lambda body: (200, {"Content-Type": "application/json"}, f"<html>upstream said {KEY}</html>"),
    # the key \\u-escaped inside the verdict's JSON: decoded only when the verdict is parsed
    "j-escaped": lambda body: _json_text(
        f'"reasoning": "Supported; see {escaped(KEY)}.", "score": 4, '
        f'"supported_claims": ["{escaped(KEY)}"], "unsupported_claims": ["no {escaped(KEY)}"]'
    ),
    # the key past character 190 of a long reasoning and of its claims
    "j-long": lambda body: ok(
        json.dumps(
            {"reasoning": PAD + KEY + " end.", "score": 4, "supported_claims": [PAD + KEY], "unsupported_claims": []}
        )
    ),
    # an error body that echoes the key past character 190 (400: not retried, not a format refusal)
    "j-error": lambda body: error(400, PAD + KEY, type_="invalid_request_error"),
}


def judge_responder(body: dict[str, Any], headers: dict[str, Any]) -> Any:
    found = re.search(r"<question>\n(.*?)\n</question>", user_text(body), re.DOTALL)
    question = found.group(1) if found else ""
    if question in JUDGE:
        return JUDGE[question](body)
    return ok(json.dumps({"reasoning": "Fine.", "score": 4, "supported_claims": [], "unsupported_claims": []}))


# --------------------------------------------------------------------------- the RAG's misbehaviours


def _good(question: str) -> Any:
    return answer("An answer.", [chunk("docs/a.md", "# A", 1, text="A fact.")])


RAG: dict[str, Callable[[str], Any]] = {
    # a 200 answer, reference and chunk echoing the header token and the judge key (one past character 190)
    "r-echo": lambda q: answer(
        f"The token is {TOKEN} and the key {KEY}.",
        [chunk("docs/a.md", "# A", 1, text=PAD + TOKEN), chunk("docs/b.md", "# B", 2, text=f"key {KEY}")],
        references=[chunk("docs/a.md", "# A", 1, text=f"ref {TOKEN} {URL_SECRET}")],
    ),
    # the same, \\u-escaped in the JSON text (the answer and the chunk text)
    "r-escaped": lambda q: (
        json.dumps(answer("ESC-ANSWER", [chunk("docs/a.md", "# A", 1, text="ESC-CHUNK")]))
        .replace("ESC-ANSWER", f"Token {escaped(TOKEN)}, key {escaped(KEY)}")
        .replace("ESC-CHUNK", PAD + escaped(TOKEN))
    ),
    # error bodies echoing the header token from character 190 (4xx: not retried), or \u-escaped (5xx: retried)
    "r-400": lambda q: (400, PAD + TOKEN),
    "r-503": lambda q: (503, '{"error": "' + escaped(TOKEN) + " " + URL_SECRET + '"}', {"Retry-After": "0"}),
    # a 200 body that is not JSON, echoing the token
    "r-not-json": lambda q: (200, f"<html>{TOKEN} {KEY}</html>"),
}


def rag_responder(body: dict[str, Any]) -> Any:
    question = body.get("question", "")
    return RAG.get(question, _good)(question)


CASES = [{"id": name, "question": name, "gold_supports": [GOLD]} for name in [*JUDGE, *RAG, "fine"]]
ERRORS = {"j-refusal", "j-not-json", "j-error", "r-400", "r-503", "r-not-json"}


# --------------------------------------------------------------------------- reading every byte


def forms(secret: str) -> dict[str, str]:
    """The ways a secret can be written: as is, JSON-escaped, URL-encoded, and its first 8 characters."""
    out = {
        "as is": secret,
        "json-escaped": escaped(secret),
        "JSON-escaped": escaped(secret).upper().replace("\\U", "\\u"),
        "url-encoded": quote(secret, safe=""),
        "form-encoded": quote_plus(secret),
        "8-char prefix": secret[:8],
        "json-escaped prefix": escaped(secret[:8]),
    }
    return {name: value for name, value in out.items() if value}


def every_file(root: Path) -> Iterator[Path]:
    for path in sorted(root.rglob("*")):
        if path.is_file() and not path.is_symlink():
            yield path


def leaks(root: Path, streams: dict[str, str]) -> list[str]:
    """Every (place, canary, form) where a canary shows up."""
    texts = {str(p.relative_to(root)): p.read_bytes().decode("utf-8", "replace") for p in every_file(root)}
    texts.update(streams)
    found = []
    for place, text in texts.items():
        for label, secret in CANARIES.items():
            for form, value in forms(secret).items():
                if value in text:
                    at = text.index(value)
                    found.append(f"{place}: {label} ({form}) ...{text[max(0, at - 60) : at + 20]!r}")
    return found


def test_no_canary_reaches_any_byte_written(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, xdist: list[str]
) -> None:
    monkeypatch.setenv("RAGEVAL_JUDGE_API_KEY", KEY)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    pytester.makefile(".jsonl", **{"eval_sets/s": "\n".join(json.dumps(c) for c in CASES) + "\n"})
    with AskServer(rag_responder) as rag, OpenAIServer(judge_responder) as judge:
        target = rag.url.replace("http://", f"http://canary:{URL_SECRET}@") + f"?api_key={URL_SECRET}&lang=en"
        result = pytester.runpytest_subprocess(
            "--rageval",
            f"--rageval-target={target}",
            "-o",
            f"rageval_headers=X-Auth: Bearer {TOKEN}",
            "--rageval-judge=openai",
            "--rageval-judge-model=judge-model",
            f"--rageval-judge-base-url={judge.base_url}",
            "--rageval-output=out",
            "--rageval-cache-dir=cache",
            "--junitxml=junit.xml",
            "--html=report.html",
            "--self-contained-html",
            "-p",
            "no:cacheprovider",
            "-rA",
            "-o",
            "log_level=DEBUG",
            *xdist,
        )
    assert len(rag.requests) >= len(CASES)
    assert all(r["headers"].get("X-Auth") == f"Bearer {TOKEN}" for r in rag.requests)  # the header was sent
    assert all(r["headers"].get("authorization") == f"Bearer {KEY}" for r in judge.requests)  # and the key

    result.assert_outcomes(passed=len(CASES) - len(ERRORS), errors=len(ERRORS))
    run_dir = next((pytester.path / "out").glob("*/metrics.json")).parent
    metrics = json.loads((run_dir / "metrics.json").read_text())
    assert metrics["complete"] is True and metrics["total_tests"] == len(CASES)
    records = {r["test_case_id"]: r for r in map(json.loads, (run_dir / "results.jsonl").read_text().splitlines())}
    assert {k for k, r in records.items() if r["outcome"] == "error"} == ERRORS
    assert "***" in records["r-echo"]["answer"] and "***" in records["j-escaped"]["judge"]["groundedness"]["reasoning"]
    assert "model refused" in records["j-refusal"]["error"]["message"]
    # No traceback of the plugin and none that prints a body (the SDK's JSONDecodeError); an SDK's own DEBUG
    # log may hold one of its tracebacks (openai 1.30 logs each 4xx with one), which log_level=DEBUG shows.
    assert "json/decoder.py" not in result.stdout.str()
    assert not re.search(r'File "[^"]*pytest_rageval', result.stdout.str())

    found = leaks(pytester.path, {"stdout": result.stdout.str(), "stderr": result.stderr.str()})
    assert not found, "canaries leaked:\n" + "\n".join(found)
