"""The config matrix (issue 10 item 1): axes, node ids, -k, params and k reaching the target, the retrieval
cache (one request per case per non-depth config, serially and under xdist), by_config, its ranking, the
per-config gate and a target axis. Real loopback ask servers count the requests."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, cast

import pytest
from ask_server import AskServer, answer, chunk

from pytest_rageval.evaluation.matrix import (
    MatrixError,
    matrix_from_table,
    parse_matrix_option,
    rewrite_keyword_expression,
)

GOLD = {"rel_path": "docs/a.md", "heading_path": "# A"}
N = 3


class System:
    """Gold at rank 1 when alpha=0.5, at rank 3 otherwise (``worse``: at rank 7 for alpha=0.5); k chunks."""

    def __init__(self) -> None:
        self.worse = False

    def __call__(self, body: dict[str, Any]) -> Any:
        k = int(body.get("k", 5))
        alpha = body.get("alpha", 0.0)
        gold_rank = (7 if self.worse else 1) if alpha == 0.5 else 3
        chunks = [
            chunk("docs/a.md" if rank == gold_rank else f"docs/x{rank}.md", "# A", rank) for rank in range(1, k + 1)
        ]
        return answer(f"answer from {body.get('strategy', 'none')}", chunks)


def eval_set(pytester: pytest.Pytester, n: int = N) -> None:
    cases = [
        {"id": f"q{i}", "question": f"question {i}", "gold_supports": [GOLD], "params": {"tenant": "t"}}
        for i in range(1, n + 1)
    ]
    pytester.makefile(".jsonl", **{"eval_sets/s": "\n".join(json.dumps(c) for c in cases) + "\n"})


def args(url: str, *extra: str) -> list[str]:
    return ["--rageval", "--rageval-judge=none", f"--rageval-target={url}", "-p", "no:cacheprovider", *extra]


def metrics(pytester: pytest.Pytester) -> dict[str, Any]:
    latest = (pytester.path / "results" / "latest").read_text().strip()
    return cast("dict[str, Any]", json.loads((pytester.path / "results" / latest / "metrics.json").read_text()))


def run_dir(pytester: pytest.Pytester) -> Path:
    return pytester.path / "results" / (pytester.path / "results" / "latest").read_text().strip()


CONFIGS = ["alpha=0.0-top_k=5", "alpha=0.0-top_k=10", "alpha=0.5-top_k=5", "alpha=0.5-top_k=10"]


# --------------------------------------------------------------------------- pure: matrix.py


def test_configs_ids_and_depth() -> None:
    matrix = parse_matrix_option('top_k=10,20; alpha=0.0,0.5,1.0; strategy=none,hyde; flag=true,null; tag="10"')
    configs = matrix.configs()
    assert len(configs) == 2 * 3 * 2 * 2 * 1
    assert configs[0].id == "alpha=0.0-flag=true-strategy=none-tag=10-top_k=10"  # params sorted by name
    assert configs[0].as_dict() == {"alpha": 0.0, "flag": True, "strategy": "none", "tag": "10", "top_k": 10}
    assert [c.id for c in configs][:2] == [
        "alpha=0.0-flag=true-strategy=none-tag=10-top_k=10",
        "alpha=0.0-flag=true-strategy=none-tag=10-top_k=20",
    ]
    assert {matrix.ask_depth(c, 5) for c in configs} == {20}
    table = matrix_from_table(
        {"top_k": [5, 10], "strategy": ["none", "hyde"], "exclude": [{"strategy": "hyde", "top_k": 10}]}
    )
    assert table is not None
    assert [c.id for c in table.configs()] == [
        "strategy=none-top_k=5",
        "strategy=none-top_k=10",
        "strategy=hyde-top_k=5",
    ]
    depth = {c.id: table.ask_depth(c, 5) for c in table.configs()}
    assert depth == {"strategy=none-top_k=5": 10, "strategy=none-top_k=10": 10, "strategy=hyde-top_k=5": 5}
    no_slice = matrix_from_table({"top_k": [5, 10], "slice_k": False})
    assert no_slice is not None and [no_slice.ask_depth(c, 5) for c in no_slice.configs()] == [5, 10]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("top_k=", "--rageval-matrix: axis 'top_k' is empty"),
        ("top_k=5;top_k=10", "--rageval-matrix: axis 'top_k' is given twice"),
        ("top_k", "--rageval-matrix: expected NAME=V1,V2 in 'top_k'"),
        ("top_k=5,,10", "--rageval-matrix: axis 'top_k': an empty value"),
        (
            "top_k=5,x",
            "--rageval-matrix: axis 'top_k' is the retrieval depth: every value must be a whole number >= 1, got 'x'",
        ),
        ("alpha=0.5,0.50", "--rageval-matrix: axis 'alpha': the value '0.5' is given twice"),
        ("k=5;top_k=10", "'k' and 'top_k' both set the retrieval depth"),
        ("exclude=1", "'exclude' is no axis name"),
    ],
)
def test_bad_option(text: str, message: str) -> None:
    with pytest.raises(MatrixError) as info:
        parse_matrix_option(text)
    assert message in str(info.value)


@pytest.mark.parametrize(
    ("table", "message"),
    [
        ({"top_k": []}, "[tool.rageval.matrix]: axis 'top_k' is empty"),
        ({"top_k": 5}, "[tool.rageval.matrix] top_k: must be a list of values"),
        (
            {"top_k": [5], "exclude": [{"topk": 5}]},
            "[tool.rageval.matrix] exclude[0]: unknown axis 'topk' (did you mean 'top_k'?)",
        ),
        ({"top_k": [5], "exclude": [{"top_k": 6}]}, "exclude[0]: top_k = '6' is not a value of the axis (5)"),
        ({"top_k": [5], "exclude": [{"top_k": 5}]}, "exclude: leaves out every combination"),
    ],
)
def test_bad_table(table: dict[str, Any], message: str) -> None:
    with pytest.raises(MatrixError) as info:
        matrix_from_table(table)
    assert message in str(info.value)


def test_k_expression_rewrite() -> None:
    names = ("alpha", "top_k")
    assert (
        rewrite_keyword_expression("top_k=10 and not alpha=0.50", names) == "matrix[top_k:10] and not matrix[alpha:0.5]"
    )
    assert rewrite_keyword_expression("q1 or other=1", names) == "q1 or other=1"


# --------------------------------------------------------------------------- the retrieval cache


def test_the_cache_asks_once_per_key_under_concurrency_and_across_processes(tmp_path: Path) -> None:
    """Single-flight within a process; a shared folder (each cache here stands for one xdist worker) across them."""
    import asyncio
    import threading
    import time

    from pytest_rageval.targets.callable_client import CallableClient
    from pytest_rageval.targets.retrieval_cache import MatrixAsk, RetrievalCache

    calls: list[dict[str, Any]] = []
    lock = threading.Lock()

    def target(question: str, params: dict[str, Any]) -> dict[str, Any]:
        with lock:
            calls.append(dict(params))
        time.sleep(0.05)  # long enough for every other ask to arrive while this one is in flight
        return answer("a", [chunk("docs/a.md", "# A", rank) for rank in range(1, params["k"] + 1)])

    client = CallableClient(target, timeout=5)
    workers = [RetrievalCache(tmp_path / "shared"), RetrievalCache(tmp_path / "shared")]

    async def ask_all() -> list[int]:
        asks = [
            MatrixAsk(client, workers[i % 2], target="t", depth=10, slice_k=True, depth_name="top_k") for i in range(8)
        ]
        replies = await asyncio.gather(
            *(a.aask("q", k=5 if i % 4 else 10, params={"alpha": 0.5}) for i, a in enumerate(asks))
        )
        return [len(r.response.retrieved_chunks) for r in replies]

    lengths = asyncio.run(ask_all())
    assert calls == [{"k": 10, "alpha": 0.5, "top_k": 10}]  # one request for 8 items in two "processes"
    assert lengths == [10, 5, 5, 5, 10, 5, 5, 5]
    assert workers[0].requests + workers[1].requests == 1

    for damaged in (tmp_path / "shared").glob("*.json"):  # a file changed under the run: asked again, with a note
        damaged.write_text('{"response": ')
    again = RetrievalCache(tmp_path / "shared")
    reply = asyncio.run(
        MatrixAsk(client, again, target="t", depth=10, slice_k=True, depth_name="top_k").aask(
            "q", k=5, params={"alpha": 0.5}
        )
    )
    assert again.requests == 1 and len(reply.response.retrieved_chunks) == 5
    assert reply.notes == (f"the retrieval cache's {damaged} could not be read (JSONDecodeError); asked again",)

    one = RetrievalCache()  # a key that serves two items is let go once both asked: memory stays flat

    async def two_items() -> None:
        for _ in range(2):
            await MatrixAsk(client, one, target="t", depth=10, slice_k=True, users=2).aask("q2", k=5, params={})

    asyncio.run(two_items())
    assert one.requests == 1 and not one._flights and not one._served


# --------------------------------------------------------------------------- sessions


def test_a_callable_target_gets_the_params(pytester: pytest.Pytester) -> None:
    eval_set(pytester, 2)
    pytester.makepyfile(
        mysys="""
        import json
        def ask(question, params):
            with open("calls.jsonl", "a") as fh:
                fh.write(json.dumps(params) + "\\n")
            chunks = [{"rel_path": "docs/a.md", "heading_path": "# A", "text": "t", "rank": r} for r in range(1, params["k"] + 1)]
            return {"answer": "a", "references": chunks[:1], "debug": {"retrieved_chunks": chunks}}
    """
    )
    result = pytester.runpytest(
        "--rageval",
        "--rageval-judge=none",
        "--rageval-target=mysys:ask",
        "-p",
        "no:cacheprovider",
        "--rageval-matrix",
        "k=2,4;strategy=none,hyde",
    )
    assert result.ret == 0, result.stdout.str()
    result.stdout.fnmatch_lines(
        ["rageval: target mysys:ask, k=2,4 (matrix k), judge none, *", "cases: 8 passed*; k=2,4 (matrix k)"]
    )
    calls = [json.loads(line) for line in (pytester.path / "calls.jsonl").read_text().splitlines()]
    assert sorted(json.dumps(c, sort_keys=True) for c in calls) == sorted(
        json.dumps({"k": 4, "strategy": s, "tenant": "t"}, sort_keys=True) for s in ("none", "hyde") for _ in range(2)
    )
    record = next(
        json.loads(line)
        for line in (run_dir(pytester) / "results.jsonl").read_text().splitlines()
        if "[k=2-strategy=hyde]" in line
    )
    assert len(record["retrieved_chunks"]) == 2 and record["params"] == {"tenant": "t"}


def test_a_resumed_matrix_run_keeps_configs_apart(pytester: pytest.Pytester) -> None:
    eval_set(pytester, 2)
    with AskServer(System()) as server:
        matrix = ("--rageval-matrix", "top_k=5,10;alpha=0.0,0.5")
        assert pytester.runpytest(*args(server.url, *matrix)).ret == 0
        folder = run_dir(pytester)
        results = folder / "results.jsonl"
        lines = results.read_text().splitlines(keepends=True)
        results.write_text("".join(lines[:-3]))  # the run "stopped" before its last three items
        server.requests.clear()
        resumed = pytester.runpytest(*args(server.url, *matrix, f"--rageval-resume={folder}"))
        asked = len(server.requests)
    assert resumed.ret == 0, resumed.stdout.str()
    keys = [json.loads(line)["key"] for line in results.read_text().splitlines()]
    assert len(keys) == len(set(keys)) == 8 and sorted(keys) == sorted(json.loads(line)["key"] for line in lines)
    assert asked == 2  # q2 at alpha=0.0 (for top_k=10) and at alpha=0.5 (for 5 and 10)
    assert len(json.loads((folder / "metrics.json").read_text())["by_config"]) == 4


def test_two_by_two_costs_one_request_per_case_per_alpha(pytester: pytest.Pytester, xdist: list[str]) -> None:
    eval_set(pytester)
    with AskServer(System()) as server:
        result = pytester.runpytest(*args(server.url, "--rageval-matrix", "top_k=5,10;alpha=0.0,0.5", "-v", *xdist))
        requests = [r["body"] for r in server.requests]
    assert result.ret == 0, result.stdout.str()
    assert len(requests) == 2 * N  # not 4N: top_k=5 is a slice of the top_k=10 answer
    assert sorted((b["question"], b["alpha"], b["k"], b["top_k"], b["tenant"]) for b in requests) == sorted(
        (f"question {i}", alpha, 10, 10, "t") for i in range(1, N + 1) for alpha in (0.0, 0.5)
    )
    assert "eval_sets/s.jsonl::q1[alpha=0.5-top_k=10]" in result.stdout.str()
    m = metrics(pytester)
    assert sorted(m["by_config"]) == sorted(CONFIGS)
    entry = m["by_config"]["alpha=0.0-top_k=5"]
    assert entry["params"] == {"alpha": 0.0, "top_k": 5} and entry["total_tests"] == N
    assert entry["aggregate_metrics"]["mrr_avg"] == pytest.approx(1 / 3)
    assert m["by_config"]["alpha=0.5-top_k=5"]["aggregate_metrics"]["mrr_avg"] == 1.0
    assert (
        len(m["cases"]) == 4 * N
        and m["cases"]["eval_sets/s.jsonl::q2[alpha=0.5-top_k=5]"]["config_id"] == "alpha=0.5-top_k=5"
    )
    ranking = m["config_ranking"]
    assert ranking["metric"] == "recall_at_k_avg"
    records = [json.loads(line) for line in (run_dir(pytester) / "results.jsonl").read_text().splitlines()]
    assert {r["config_id"] for r in records} == set(CONFIGS)
    by_key = {r["key"]: r for r in records}
    sliced = by_key["eval_sets/s.jsonl::q1[alpha=0.0-top_k=5]"]
    assert sliced["matrix"] == {"alpha": 0.0, "top_k": 5} and len(sliced["retrieved_chunks"]) == 5
    assert len(by_key["eval_sets/s.jsonl::q1[alpha=0.0-top_k=10]"]["retrieved_chunks"]) == 10
    assert sliced["config"]["k"] == 5  # seed 003's per-case config: the k it was scored at
    result.stdout.fnmatch_lines(
        [
            "configs ranked by recall_at_k_avg (higher is better; 95% bootstrap interval*; ties: more cases passed first):",
            "   1. alpha=0.0-top_k=5   1.000  95% CI 1.000..1.000  n=3  passed 3/3",  # ties: smaller params first
            "   2. alpha=0.0-top_k=10  1.000 *",
            "best config: alpha=0.0-top_k=5",
        ]
    )
    page = (run_dir(pytester) / "report.html").read_text()
    assert '<h2 id="configs">Configs</h2>' in page and all(f"<code>{c}</code>" in page for c in CONFIGS)


def test_with_a_judge_each_k_is_asked_unless_slicing_is_asked_for(pytester: pytest.Pytester) -> None:
    eval_set(pytester)
    judged = [a for a in args("URL") if a != "--rageval-judge=none"] + ["--rageval-judge=lexical"]
    with AskServer(System()) as server:
        run = [a.replace("URL", server.url) for a in judged] + ["--rageval-matrix", "top_k=1,4"]
        asked = pytester.runpytest(*run)
        asked_ks = sorted(r["body"]["k"] for r in server.requests)
        server.requests.clear()
        sliced = pytester.runpytest(*run, "-o", "rageval_slice_k=true")
        sliced_ks = sorted(r["body"]["k"] for r in server.requests)
    assert asked_ks == [1] * N + [4] * N  # the top_k=1 answer comes from a request at k=1
    asked.stdout.fnmatch_lines(["rageval matrix: 2 configs over top_k (each k asked: the answer depends on k)"])
    assert sliced_ks == [4] * N
    sliced.stdout.fnmatch_lines(["rageval matrix: 2 configs over top_k (asked once at the largest k, sliced)"])


def test_k_exclude_and_the_slice_opt_out(pytester: pytest.Pytester) -> None:
    eval_set(pytester)
    pytester.makepyprojecttoml(
        "[tool.rageval.matrix]\ntop_k = [5, 10]\nalpha = [0.0, 0.5]\nexclude = [{alpha = 0.5, top_k = 10}]\n"
    )
    with AskServer(System()) as server:
        selected = pytester.runpytest(*args(server.url, "-k", "top_k=10 and alpha=0.0", "--co", "-q"))
        planned = pytester.runpytest(*args(server.url, "--rageval-dry-run"))
        excluded = pytester.runpytest(*args(server.url))
        excluded_configs = sorted(metrics(pytester)["by_config"])
        excluded_bodies = [r["body"] for r in server.requests]
        server.requests.clear()
        pytester.makeini("[pytest]\nrageval_slice_k = false\n")
        opted_out = pytester.runpytest(*args(server.url, "--rageval-matrix", "top_k=5,10;alpha=0.0,0.5"))
        opted_bodies = [r["body"] for r in server.requests]
    selected.stdout.fnmatch_lines(
        [
            "eval_sets/s.jsonl::q1[[]alpha=0.0-top_k=10[]]",
            "eval_sets/s.jsonl::q2*",
            "eval_sets/s.jsonl::q3*",
            "3/9 tests collected (6 deselected)*",
        ]
    )
    planned.stdout.fnmatch_lines(
        ["config matrix: 3 configs; the retrieval cache sends 6 RAG requests (the count above is one per item)"]
    )
    assert excluded.ret == 0, excluded.stdout.str()
    assert excluded_configs == ["alpha=0.0-top_k=10", "alpha=0.0-top_k=5", "alpha=0.5-top_k=5"]
    # alpha=0.5 runs at top_k=5 only: asked at 5; alpha=0.0 at 10 (sliced for 5)
    assert sorted((b["alpha"], b["k"]) for b in excluded_bodies) == [(0.0, 10)] * N + [(0.5, 5)] * N
    assert opted_out.ret == 0, opted_out.stdout.str()
    assert len(opted_bodies) == 4 * N  # ini rageval_slice_k = false: each k is its own request
    assert sorted({(b["alpha"], b["k"]) for b in opted_bodies}) == [(0.0, 5), (0.0, 10), (0.5, 5), (0.5, 10)]


def test_a_re_run_asks_again(pytester: pytest.Pytester) -> None:
    eval_set(pytester, 1)
    with AskServer(System()) as server:
        for _ in range(2):
            assert pytester.runpytest(*args(server.url, "--rageval-matrix", "top_k=5,10")).ret == 0
        assert len(server.requests) == 2  # one per run: the cache lives for one run only


def test_a_target_axis_asks_each_system(pytester: pytest.Pytester) -> None:
    eval_set(pytester)
    with AskServer(System()) as one, AskServer(System()) as two:
        secret = two.url.replace("http://", "http://ci:s3cr3t-pw@")  # credentials in a target: never in an artifact
        result = pytester.runpytest(
            "--rageval",
            "--rageval-judge=none",
            "-p",
            "no:cacheprovider",
            "--rageval-matrix",
            f"target={one.url},{secret};top_k=5,10",
        )
        counts = len(one.requests), len(two.requests)
        assert "target" not in one.requests[0]["body"]
        assert two.requests[0]["headers"].get("Authorization", "").startswith("Basic ")
    assert result.ret == 0, result.stdout.str()
    assert counts == (N, N)
    assert sorted(metrics(pytester)["by_config"]) == sorted(
        f"target={u}-top_k={k}" for u in (one.url, two.url) for k in (5, 10)
    )
    written = [p.read_text() for p in run_dir(pytester).iterdir() if p.is_file()]
    assert "s3cr3t" not in result.stdout.str() and not any("s3cr3t" in text for text in written)


def test_a_baseline_gates_each_config(pytester: pytest.Pytester) -> None:
    eval_set(pytester)
    pytester.makepyprojecttoml("[tool.rageval.gate]\nmrr_avg = 1.0\nndcg_at_k_avg = 1.0\n")  # gate on recall only
    system = System()
    with AskServer(system) as server:
        base = args(
            server.url,
            "--rageval-matrix",
            "top_k=5,10;alpha=0.0,0.5",
            "--rageval-baseline=base.json",
            "--rageval-rank-by=mrr",
        )
        assert pytester.runpytest(*base, "--rageval-update-baseline").ret == 0
        same = pytester.runpytest(*base)
        system.worse = True  # alpha=0.5 puts gold at rank 7: recall@5 drops for alpha=0.5-top_k=5 only
        worse = pytester.runpytest(*base, "--rageval-summary-md=summary.md")
        block = metrics(pytester)["comparison"]["by_config"]
        worse_run = str(run_dir(pytester))
        fewer = pytester.runpytest(
            *args(server.url, "--rageval-matrix", "top_k=5;alpha=0.0", "--rageval-baseline=base.json")
        )
    assert same.ret == 0, same.stdout.str()
    same.stdout.fnmatch_lines(
        [
            "configs ranked by mrr_avg (higher is better; *",
            "   1. alpha=0.5-top_k=5   1.000  95% CI 1.000..1.000  n=3  passed 3/3  baseline: no regression",
            "   2. alpha=0.5-top_k=10 *",
            "   3. alpha=0.0-top_k=5   0.333 *",
            "*",
            "best config: alpha=0.5-top_k=5",
        ]
    )
    assert worse.ret == 1
    worse.stdout.fnmatch_lines(
        [
            "*alpha=0.5-top_k=5 *baseline: REGRESSION",
            "config alpha=0.5-top_k=5: regression: recall_at_k_avg 1.000 → 0.000 (-1.000, tolerance 0.050)",
        ]
    )
    assert "config alpha=0.5-top_k=10: regression" not in worse.stdout.str()
    assert block["configs"]["alpha=0.5-top_k=5"]["failed"] and not block["configs"]["alpha=0.0-top_k=5"]["failed"]
    # the report's verdict block and the CI summary name the config that regressed, and only it
    page = (Path(worse_run) / "report.html").read_text(encoding="utf-8")
    verdict = page[page.index('id="verdict"') : page.index("</section>")]
    assert (
        "<code>alpha=0.5-top_k=5</code>: regression: recall_at_k_avg" in verdict and "alpha=0.0-top_k=5" not in verdict
    )
    summary = (pytester.path / "summary.md").read_text(encoding="utf-8")
    assert (
        "**Configs that regressed**" in summary and "alpha=0.5-top\\_k=5: regression: recall\\_at\\_k\\_avg" in summary
    )
    assert fewer.ret == 0, fewer.stdout.str()  # configs only the baseline has are said, not failed
    fewer.stdout.fnmatch_lines(
        ["configs of the baseline not in this run: alpha=0.0-top_k=10, alpha=0.5-top_k=10, alpha=0.5-top_k=5"]
    )
    compared = subprocess.run(
        [sys.executable, "-m", "pytest_rageval.cli", "compare", "base.json", worse_run],
        capture_output=True,
        text=True,
        cwd=pytester.path,
    )
    assert compared.returncode == 1, compared.stdout + compared.stderr
    assert "config alpha=0.5-top_k=5: regression" in compared.stdout and "best config: " in compared.stdout


def test_node_ids_do_not_depend_on_the_hash_seed(pytester: pytest.Pytester) -> None:
    eval_set(pytester, 2)
    pytester.makepyprojecttoml('[tool.rageval.matrix]\nstrategy = ["none", "hyde", "rerank"]\nalpha = [1.0, 0.0]\n')
    outputs = []
    for seed in ("1", "2"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        done = subprocess.run(
            [sys.executable, "-m", "pytest", *args("http://127.0.0.1:9/ask"), "--co", "-q"],
            capture_output=True,
            text=True,
            cwd=pytester.path,
            env=env,
        )
        outputs.append([line for line in done.stdout.splitlines() if "::" in line])
    assert outputs[0] == outputs[1]
    assert outputs[0][:3] == [
        "eval_sets/s.jsonl::q1[alpha=1.0-strategy=none]",
        "eval_sets/s.jsonl::q1[alpha=1.0-strategy=hyde]",
        "eval_sets/s.jsonl::q1[alpha=1.0-strategy=rerank]",
    ]


@pytest.mark.parametrize(
    ("setting", "message"),
    [
        (
            ("--rageval-matrix", "top_k=5;top_k=10"),
            "ERROR: pytest-rageval: --rageval-matrix: axis 'top_k' is given twice",
        ),
        (
            ("--rageval-matrix", "target=nowhere"),
            "ERROR: pytest-rageval: --rageval-matrix: axis 'target': rageval_target 'nowhere'",
        ),
        (("--rageval-rank-by", "recal"), "ERROR: pytest-rageval: --rageval-rank-by: unknown metric 'recal'"),
    ],
)
def test_a_bad_matrix_is_a_usage_error(pytester: pytest.Pytester, setting: tuple[str, str], message: str) -> None:
    eval_set(pytester, 1)
    result = pytester.runpytest(*args("http://127.0.0.1:9/ask"), *setting)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "Traceback" not in result.stderr.str()
    assert any(line.startswith(message) for line in result.stderr.lines), result.stderr.str()


def test_no_matrix_keeps_ids_and_artifacts(pytester: pytest.Pytester) -> None:
    eval_set(pytester, 1)
    with AskServer(System()) as server:
        result = pytester.runpytest(*args(server.url, "-v"))
    result.stdout.fnmatch_lines(["eval_sets/s.jsonl::q1 PASSED*"])
    m = metrics(pytester)
    assert "by_config" not in m and "config_ranking" not in m and "config_id" not in m["cases"]["eval_sets/s.jsonl::q1"]
    record = json.loads((run_dir(pytester) / "results.jsonl").read_text())
    assert "matrix" not in record and "config_id" not in record
    assert "configs ranked" not in result.stdout.str()


def test_the_ranking_section_escapes_what_the_matrix_names() -> None:
    from pytest_rageval.gate.configs import rank_configs
    from pytest_rageval.report.configs import render_configs

    hostile = "strategy=<script>x</script>"
    metrics = {
        "by_config": {
            hostile: {
                "params": {"strategy": "<script>x</script>"},
                "passed": 1,
                "failed": 0,
                "errors": 0,
                "aggregate_metrics": {"recall_at_k_avg": 1.0},
            }
        },
        "cases": {
            f"s.jsonl::q1[{hostile}]": {"outcome": "passed", "metrics": {"recall_at_k": 1.0}, "config_id": hostile}
        },
    }
    metrics["config_ranking"] = rank_configs(metrics)
    page = str(render_configs(metrics))
    assert "<script>" not in page and "&lt;script&gt;x&lt;/script&gt;" in page


def test_shards_of_a_matrix_run_merge_with_their_ranking(pytester: pytest.Pytester) -> None:
    eval_set(pytester, 4)
    with AskServer(System()) as server:
        for shard in ("1/2", "2/2"):
            assert (
                pytester.runpytest(
                    *args(
                        server.url,
                        "--rageval-matrix",
                        "top_k=5,10;alpha=0.0,0.5",
                        "--rageval-rank-by=mrr",
                        f"--rageval-shard={shard}",
                    )
                ).ret
                == 0
            )
    shards = [str(p) for p in sorted((pytester.path / "results").glob("2*"))]
    merged = subprocess.run(
        [sys.executable, "-m", "pytest_rageval.cli", "merge", *shards, "--output", "merged"],
        capture_output=True,
        text=True,
        cwd=pytester.path,
    )
    assert merged.returncode == 0, merged.stdout + merged.stderr
    m = json.loads(next((pytester.path / "merged").glob("2*/metrics.json")).read_text())
    assert sorted(m["by_config"]) == sorted(CONFIGS) and all(e["total_tests"] == 4 for e in m["by_config"].values())
    assert m["config_ranking"]["metric"] == "mrr_avg" and m["config_ranking"]["best"] == "alpha=0.5-top_k=5"


def test_ties_go_to_more_cases_passed_then_smaller_params() -> None:
    from pytest_rageval.gate.configs import rank_configs

    def entry(k: int, passed: int, value: float) -> dict[str, Any]:
        return {
            "params": {"top_k": k},
            "passed": passed,
            "failed": 4 - passed,
            "errors": 0,
            "aggregate_metrics": {"recall_at_k_avg": value},
        }

    by_config = {
        "top_k=3": entry(3, 3, 1.0),
        "top_k=10": entry(10, 4, 1.0),
        "top_k=5": entry(5, 4, 1.0),
        "top_k=20": entry(20, 4, 0.5),
    }
    ranking = rank_configs({"by_config": by_config, "cases": {}})
    assert ranking is not None
    assert [r["config_id"] for r in ranking["ranked"]] == ["top_k=5", "top_k=10", "top_k=3", "top_k=20"]
    assert ranking["best"] == "top_k=5" and ranking["metric"] == "recall_at_k_avg"
    assert rank_configs({"by_config": by_config, "cases": {}}, "recall_at_k_avg") == ranking  # same input, same ranking
