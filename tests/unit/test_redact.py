"""redact.py: masking secrets in texts, decoded JSON, URLs and command lines."""

from __future__ import annotations

import base64
import json
from urllib.parse import quote

import pytest

from pytest_rageval.redact import (
    MASK,
    Redactor,
    decode_json_escapes,
    environment_secrets,
    guard_http_logs,
    header_secrets,
    is_secret_name,
    public_args,
    public_url,
    url_secrets,
)

KEY = "sk-live+4f9a/0c1e="
ESCAPED = "".join(f"\\u{ord(c):04x}" for c in KEY)


@pytest.mark.parametrize(
    "text",
    [
        f"the key {KEY} was sent",
        f"the key {quote(KEY, safe='')} was sent",  # URL-encoded
        f"the key {quote(KEY, safe='').lower()} was sent",  # lower-case hex
        f"the key {ESCAPED} was sent",  # JSON escapes, as a JSON text carries them before parsing
        f"the key {ESCAPED[:12]}{KEY[2:]} was sent",  # partly escaped
    ],
    ids=["as-is", "url-encoded", "url-encoded-lower", "json-escaped", "partly-escaped"],
)
def test_every_form_of_a_secret_is_masked(text: str) -> None:
    masked = Redactor([KEY]).mask(text)
    assert masked.startswith("the key ") and MASK in masked
    assert KEY not in decode_json_escapes(masked) and KEY[:8] not in masked


def test_masking_a_json_text_keeps_it_json_that_means_the_same_elsewhere() -> None:
    raw = json.dumps({"reasoning": "see " + "KEYHERE", "quote": '"', "emoji": "\U0001f600", "tab": "\t"})
    raw = raw.replace("KEYHERE", ESCAPED) + " "
    masked = Redactor([KEY]).mask(raw)
    assert json.loads(masked) == {"reasoning": f"see {MASK}", "quote": '"', "emoji": "\U0001f600", "tab": "\t"}


def test_escapes_that_would_change_the_json_stay_escaped() -> None:
    assert (
        decode_json_escapes(r"\u0022 \u005c \u000a \ud800 \\u0073 \u0073 \/")
        == r"\u0022 \u005c \u000a \ud800 \\u0073 s /"
    )


def test_decoded_data_is_masked_at_any_depth_keys_included() -> None:
    deep: object = KEY
    for _ in range(5000):  # deeper than recursion would go
        deep = [deep]
    data = {"answer": f"x {KEY}", f"k{KEY}": 1, "n": 2.5, "deep": deep}
    out = Redactor([KEY]).mask_data(data)
    bottom = out["deep"]
    while isinstance(bottom, list):
        bottom = bottom[0]
    assert bottom == MASK and out["answer"] == f"x {MASK}" and out["n"] == 2.5 and out[f"k{MASK}"] == 1
    assert data["answer"] == f"x {KEY}"  # the input is left as it was


def test_short_values_and_no_secrets_change_nothing() -> None:
    assert Redactor(["abc", ""]).mask("abc abc") == "abc abc"
    assert not Redactor() and Redactor().mask_data({"a": "b"}) == {"a": "b"}
    assert KEY not in repr(Redactor([KEY]))


def test_where_secrets_come_from() -> None:
    assert environment_secrets({"RAGEVAL_JUDGE_API_KEY": " k1 ", "OPENAI_API_KEY": "k2", "OTHER": "x"}) == ["k1", "k2"]
    assert set(header_secrets({"Authorization": "Bearer abcdefgh12", "X-Tenant": "acme"})) == {
        "Bearer abcdefgh12",
        "abcdefgh12",
        "acme",
    }
    found = url_secrets("https://bob:p%40ss@h.example/x?api_key=q1&lang=en#access_token=t1")
    assert {"p@ss", "bob:p%40ss", base64.b64encode(b"bob:p@ss").decode(), "q1", "t1"} <= set(found)
    assert "en" not in found and "bob" not in found


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("http://user:pass@host:8080/ask?api_key=zz&lang=en", "http://host:8080/ask?api_key=***&lang=en"),
        (
            "https://h/x?token=a&X-Amz-Signature=b&sig=c&apiKey=d&debug=true",
            "https://h/x?token=***&X-Amz-Signature=***&sig=***&apiKey=***&debug=true",
        ),
        ("https://h/cb#access_token=t&state=s", "https://h/cb#access_token=***&state=s"),
        ("http://127.0.0.1:1/v1", "http://127.0.0.1:1/v1"),
        ("http://h/x?q=a%20b&keyword=k", "http://h/x?q=a%20b&keyword=k"),
        ("mypkg.rag:ask", "mypkg.rag:ask"),
    ],
)
def test_public_url(url: str, shown: str) -> None:
    assert public_url(url) == shown


@pytest.mark.parametrize(
    ("name", "secret"),
    [
        ("api_key", True),
        ("apikey", True),
        ("api-key", True),
        ("apiKey", True),
        ("key", True),
        ("token", True),
        ("access_token", True),
        ("secret", True),
        ("client_secret", True),
        ("password", True),
        ("passwd", True),
        ("pwd", True),
        ("auth", True),
        ("signature", True),
        ("sig", True),
        ("credential", True),
        ("credentials", True),
        ("lang", False),
        ("keyword", False),
        ("debug", False),
        ("k", False),
        ("design", False),
        ("rageval_target", False),
    ],
)
def test_secret_looking_names(name: str, secret: bool) -> None:
    assert is_secret_name(name) is secret


def test_public_args() -> None:
    args = [
        "--rageval",
        "-o",
        "rageval_headers=Authorization: Bearer tok123456",
        "--override-ini=rageval_headers=X-A: v1v1",
        "-orageval_target=http://u:pw@h/ask?api_key=q",
        "--rageval-target",
        "http://u:pw@h/ask",
        "--api-key",
        "s3cr3t",
        "--token=s3cr3t",
        "-o",
        "my_token=s3cr3t",
        "-k",
        "key and fast",
        "eval_sets",
        "--rageval-k=3",
        "-o",
        "rageval_k=3",
        "--x=leaked-known-value",
    ]
    assert public_args(args, Redactor(["leaked-known-value"])) == [
        "--rageval",
        "-o",
        "rageval_headers=Authorization: ***",
        "--override-ini=rageval_headers=X-A: ***",
        "-orageval_target=http://h/ask?api_key=***",
        "--rageval-target",
        "http://h/ask",
        "--api-key",
        MASK,
        "--token=***",
        "-o",
        "my_token=***",
        "-k",
        "key and fast",
        "eval_sets",
        "--rageval-k=3",
        "-o",
        "rageval_k=3",
        "--x=***",
    ]


def test_http_library_logs_show_public_urls(caplog: pytest.LogCaptureFixture) -> None:
    import logging

    guard_http_logs()
    guard_http_logs()  # once is enough: no second filter
    logger = logging.getLogger("httpx")
    assert sum(type(f).__name__ == "PublicUrlFilter" for f in logger.filters) == 1
    with caplog.at_level(logging.INFO, logger="httpx"):
        logger.info('HTTP Request: %s %s "%s"', "POST", "http://u:pw123456@h/ask?api_key=q1&debug=true", "200 OK")
    assert caplog.messages == ['HTTP Request: POST http://h/ask?api_key=***&debug=true "200 OK"']
