"""The docs job's own parts: the markers read from a page, shown output compared with what ran, a page that fails.

The docs job itself (``tests/docs_run/check_pages.py``, run by ``.ci/run``) runs every page; these tests keep it
honest: every fenced block of a page is a step, a block nothing runs (or one marked to be skipped) is refused, an
output that differs, a command whose option is gone, a block that drifted from what CI runs, a JSON fragment the run
did not write and a workflow whose job fails each fail their page.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from docs_run import ci_script, json_subset, workflow
from docs_run.pages import PageError, fenced_blocks, parse
from docs_run.run import Workspace, execute, mismatch, shims

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", ROOT / "docs" / "tutorial.md", *sorted((ROOT / "docs" / "how-to").glob("*.md"))]


@pytest.mark.parametrize("page", PAGES, ids=lambda page: page.relative_to(ROOT).as_posix())
def test_every_fenced_block_of_a_page_is_a_step(page: Path) -> None:
    blocks = parse(page, ROOT)
    assert len(blocks) == fenced_blocks(page.read_text(encoding="utf-8"))
    assert all(block.kind for block in blocks)


def test_every_block_of_the_pages_runs_or_is_checked() -> None:
    blocks = [block for page in PAGES for block in parse(page, ROOT)]
    kinds = {block.kind for block in blocks}
    assert len(blocks) >= 80 and {"ci", "workflow", "subset"} <= kinds, sorted(kinds)


def _page(tmp_path: Path, text: str) -> Path:
    page = tmp_path / "page.md"
    page.write_text(text, encoding="utf-8")
    return page


def test_a_block_nothing_runs_is_refused_naming_its_line(tmp_path: Path) -> None:
    page = _page(tmp_path, "# T\n\nSome toml:\n\n```toml\n[tool.x]\n```\n")
    with pytest.raises(PageError, match=r"^page.md:5: a toml block that nothing runs: mark it <!-- file: PATH -->"):
        parse(page, tmp_path)


def test_markers_give_blocks_their_kind_path_exit_and_setup(tmp_path: Path) -> None:
    (tmp_path / "examples").mkdir()
    text = (
        "Write it: <!-- folder: /home/me clone --><!-- file: a/b.toml -->\n\n```toml\nx = 1\n```\n\n"
        "1. In a list: <!-- exit: 3 --><!-- needs: llama_cpp uvicorn -->\n\n   ```bash\n   false\n   ```\n\n"
        "```text\n$ echo a \\\n  b\na b\n$ true\n```\n\n"
        "<!-- copy: examples app --><!-- touch: requirements.txt --><!-- replace: <URL> => file://{repository} -->"
        "<!-- workflow: missing=shard-2 -->\n```yaml\nrun: pip install git+<URL>\n```\n"
        "<!-- ci: .ci/run -->\n```bash\npip install -e .\n```\n<!-- subset: results/<latest>/metrics.json -->\n"
        '```json\n"k": 1\n```\n'
    )
    blocks = parse(_page(tmp_path, text), tmp_path)
    assert [(block.kind, block.line) for block in blocks] == [
        ("file", 3),
        ("run", 9),
        ("commands", 13),
        ("workflow", 21),
        ("ci", 25),
        ("subset", 29),
    ]
    assert blocks[0].path == "a/b.toml" and blocks[0].folder == ("/home/me", frozenset({"clone"}))
    assert blocks[1].exit_code == 3 and blocks[1].source == "false\n" and blocks[1].needs == ["llama_cpp", "uvicorn"]
    assert [(command.command, command.shown) for command in blocks[2].commands] == [("echo a b", "a b"), ("true", "")]
    assert blocks[3].copies == [("examples", "app")] and blocks[3].touches == ["requirements.txt"]
    assert blocks[3].source == f"run: pip install git+file://{tmp_path}\n" and blocks[3].missing_artifact == "shard-2"
    assert (blocks[4].path, blocks[5].path, blocks[5].test_id) == (
        ".ci/run",
        "results/<latest>/metrics.json",
        "page.md:29:subset",
    )


@pytest.mark.parametrize(
    ("markers", "error"),
    [
        ("<!-- skip: a CI workflow -->", r"page.md:2: a skip marker \(a CI workflow\): every block runs"),
        ("<!-- replace: <URL> => x -->", r"page.md:2: replace marker: the block has no '<URL>'"),
        ("<!-- copy: no/such/folder -->", r"page.md:2: copy marker: expected 'SOURCE \[DEST\]' of a repository path"),
        ("<!-- workflow: missing -->", r"page.md:2: workflow marker: expected nothing or 'missing=ARTIFACT'"),
        ("<!-- ci -->", r"page.md:2: ci marker without a script"),
    ],
    ids=["skip", "replace", "copy", "workflow", "ci"],
)
def test_a_marker_that_cannot_be_followed_is_refused_naming_its_line(tmp_path: Path, markers: str, error: str) -> None:
    with pytest.raises(PageError, match=error):
        parse(_page(tmp_path, f"{markers}\n```yaml\non: push\n```\n"), tmp_path)


CI_SCRIPT = """set -euo pipefail
py=${1:-python}
flags="-DGGML_NATIVE=OFF"
python -m pip install --disable-pip-version-check -q -e '.[dev]'
CMAKE_ARGS="$flags" "$py" -m pip wheel -q --no-cache-dir -w "$building" "llama-cpp-python${version:+==$version}"
python -m pytest --rageval -p no:cacheprovider   # the main job
"""


def test_a_block_of_what_ci_runs_matches_its_commands_word_for_word() -> None:
    page = (
        "pip install -e '.[dev]' && pytest --rageval   # the main job\n"
        "CMAKE_ARGS=\"-DGGML_NATIVE=OFF\" python -m pip wheel --no-cache-dir -w wheels 'llama-cpp-python'\n"
    )
    assert ci_script.missing(page, CI_SCRIPT) == []
    drifted = (
        "pip install -e . && pytest --rageval --rageval-k 3\nCMAKE_ARGS=-DGGML_NATIVE=ON pip wheel llama-cpp-python\n"
    )
    assert ci_script.missing(drifted, CI_SCRIPT) == [
        "pip install -e .",
        "pytest --rageval --rageval-k 3",
        "CMAKE_ARGS=-DGGML_NATIVE=ON pip wheel llama-cpp-python",
    ]
    assert ci_script.missing("mypy --rageval", CI_SCRIPT) == ["mypy --rageval"]  # another program, the same words


def test_a_json_fragment_matches_the_file_with_cut_lists_and_rounded_numbers() -> None:
    shown = json_subset.read_fragment(
        '"repeats": {"flake_rate": 0.333, "ranked": [{"id": "a", "params": {...}}, ...], "spread": {"mrr": 0.5, ...}},\n'
        '"run_id": "..."'
    )
    actual = {
        "repeats": {
            "flake_rate": 1 / 3,
            "ranked": [{"id": "a", "params": {"k": 5}}, {"id": "b"}],
            "spread": {"mrr": 0.5, "x": 1},
        },
        "run_id": "20261127-101010-abcdef",
    }
    assert json_subset.differences(shown, actual) == []
    actual["repeats"] = {"flake_rate": 0.34, "ranked": [{"id": "b"}], "spread": {}}
    assert json_subset.differences(shown, actual) == [
        "repeats.flake_rate: 0.333 is shown, the file has 0.34",
        'repeats.ranked[0].id: "a" is shown, the file has "b"',
        "repeats.ranked[0].params: not in the file",
        "repeats.spread.mrr: not in the file",
    ]


def _bash(script: str, folder: Path, env: dict[str, str]) -> tuple[int, str]:
    return execute(["bash", "-e", "-s"], folder, env, script)


SHARDED = """
jobs:
  gate:
    needs: [eval]
    steps:
      - uses: actions/checkout@v4
      - uses: actions/download-artifact@v4
        with: { path: shards }
      - run: |
          test "$(ls -d shards/*/ | wc -l)" = 2 || { echo "a shard is missing"; exit 1; }
          cat shards/*/part | sort | tr '\\n' ' '
  eval:
    strategy:
      matrix: { shard: [1, 2] }
    env: { WHO: shard }
    steps:
      - uses: actions/setup-python@v5
      - run: mkdir out && echo "$WHO ${{ matrix.shard }} of $(cat project.txt)" > out/part
      - uses: actions/upload-artifact@v4
        with: { name: "shard-${{ matrix.shard }}", path: out }
"""


def test_a_workflow_runs_its_jobs_in_needs_order_once_per_matrix_value(tmp_path: Path) -> None:
    (tmp_path / "project").mkdir()
    (tmp_path / "project" / "project.txt").write_text("the page's project\n")
    runs = workflow.run(SHARDED, tmp_path / "project", tmp_path / "work", {"PATH": "/usr/bin:/bin"}, _bash, "shard-2")
    assert [run.name for run in runs] == ["eval (shard=1)", "eval (shard=2)", "gate", "gate"]
    assert "shard 1 of the page's project shard 2 of the page's project" in runs[2].output
    assert runs[3].failed and "a shard is missing" in runs[3].output


@pytest.mark.parametrize(
    ("change", "error"),
    [
        (("= 2 ||", "= 3 ||"), r"(?s)job gate failed:.*a shard is missing.*\(exit 1\)"),
        (("actions/setup-python@v5", "actions/cache@v4"), r"job eval \(shard=1\): an action this runner does not know"),
        (
            ("${{ matrix.shard }} of", "${{ github.sha }} of"),
            r"an expression this runner does not know: \$\{\{ github.sha \}\}",
        ),
    ],
    ids=["a failed job", "an unknown action", "an unknown expression"],
)
def test_a_workflow_whose_job_fails_or_that_cannot_run_here_fails_its_page(
    tmp_path: Path, change: tuple[str, str], error: str
) -> None:
    (tmp_path / "project").mkdir()
    (tmp_path / "project" / "project.txt").write_text("x\n")
    with pytest.raises(workflow.WorkflowError, match=error):
        workflow.run(
            SHARDED.replace(*change), tmp_path / "project", tmp_path / "work", {"PATH": "/usr/bin:/bin"}, _bash
        )


def test_a_workflow_whose_missing_artifact_does_not_fail_its_gate_fails_its_page(tmp_path: Path) -> None:
    (tmp_path / "project").mkdir()
    (tmp_path / "project" / "project.txt").write_text("x\n")
    lenient = SHARDED.replace('test "$(ls -d shards/*/ | wc -l)" = 2 || { echo "a shard is missing"; exit 1; }', "true")
    with pytest.raises(workflow.WorkflowError, match="job gate passed without the artifact shard-1"):
        workflow.run(lenient, tmp_path / "project", tmp_path / "work", {"PATH": "/usr/bin:/bin"}, _bash, "shard-1")


def test_a_block_that_leaves_a_server_running_ends_with_it(tmp_path: Path) -> None:
    started = time.monotonic()
    code, output = execute(["bash", "-c", "sleep 300 & echo started"], tmp_path, {"PATH": "/usr/bin:/bin"})
    assert (code, output) == (0, "started\n") and time.monotonic() - started < 30


def test_fenced_blocks_are_counted_without_sybil() -> None:
    assert fenced_blocks("```bash\nx\n```\n\n  - item\n\n    ```toml\n    y\n    ```\n````md\n```\n````\n") == 3


def test_shown_output_matches_with_cut_lines_and_variable_parts() -> None:
    actual = (
        "==================== test session starts ====================\nplatform linux\ncollected 4 items\n\n"
        "run: /tmp/x/results/20261127-101010-abcdef (metrics.json)\n========== 4 passed in 0.91s ==========\n"
    )
    assert (
        mismatch(
            "collected 4 items\n...\nrun: /tmp/x/results/20261126-163504-c062a1 (...)\n=== 4 passed in 0.5s ===", actual
        )
        is None
    )
    problem = mismatch("collected 4 items\nrun: /tmp/x/results/20261126-163504-c062a1 (metrics.json)", actual)
    assert problem is not None and "the first that differs: 'run: /tmp/x/results/<run_id> (metrics.json)'" in problem
    assert mismatch("collected 5 items", actual) is not None


@pytest.mark.e2e
def test_a_command_whose_option_is_gone_fails_its_page(tmp_path: Path) -> None:
    text = (
        "<!-- folder: <clone> clone -->\n```text\n$ pytest --rageval --rageval-k=3 --rageval-no-such-option -q\n```\n"
    )
    workspace = Workspace(tmp_path / "work", ROOT, shims(tmp_path / "bin"))
    (block,) = parse(_page(tmp_path, text), tmp_path)
    with pytest.raises(
        AssertionError,
        match=r"(?s)page.md:2: pytest --rageval .* exited 4, the page expects 0.*--rageval-no-such-option",
    ):
        workspace.run(block)


@pytest.mark.e2e
def test_a_configuration_pytest_does_not_take_fails_its_page(tmp_path: Path) -> None:
    text = "<!-- folder: <clone> clone --><!-- alt: pytest.ini -->\n```ini\n[pytest]\nrageval_tagret = pytest_rageval.demo:ask\n```\n"
    workspace = Workspace(tmp_path / "work", ROOT, shims(tmp_path / "bin"))
    (block,) = parse(_page(tmp_path, text), tmp_path)
    with pytest.raises(AssertionError, match=r"(?s)page.md:2: pytest does not take pytest.ini.*rageval_tagret"):
        workspace.run(block)


def test_a_json_fragment_the_run_did_not_write_fails_its_page(tmp_path: Path) -> None:
    text = (
        "<!-- file: results/latest -->\n```text\nr1\n```\n<!-- file: results/r1/metrics.json -->\n"
        '```json\n{"repeats": {"flaky": 1, "stable_pass": 2}}\n```\n'
        '<!-- subset: results/<latest>/metrics.json -->\n```json\n"repeats": {"stable_pass": 2, ...}\n```\n'
        '<!-- subset: results/<latest>/metrics.json -->\n```json\n"repeats": {"flaky": 2}\n```\n'
    )
    workspace = Workspace(tmp_path / "work", tmp_path, shims(tmp_path / "bin"))
    *setup, shown, wrong = parse(_page(tmp_path, text), tmp_path)
    for block in (*setup, shown):
        workspace.run(block)
    with pytest.raises(
        AssertionError,
        match=r"page.md:14: the JSON shown is not in results/r1/metrics.json:\n  repeats.flaky: 2 is shown, the file has 1$",
    ):
        workspace.run(wrong)


def test_a_block_that_drifted_from_what_ci_runs_fails_its_page(tmp_path: Path) -> None:
    (tmp_path / ".ci").mkdir()
    (tmp_path / ".ci" / "run").write_text(CI_SCRIPT)
    text = "<!-- ci: .ci/run -->\n```bash\npip install -e '.[dev]'\n```\n<!-- ci: .ci/run -->\n```bash\npip install -e '.[docs]'\n```\n"
    workspace = Workspace(tmp_path / "work", tmp_path, shims(tmp_path / "bin"))
    same, drifted = parse(_page(tmp_path, text), tmp_path)
    workspace.run(same)
    with pytest.raises(
        AssertionError, match=r"page.md:6: commands that .ci/run does not run: \[\"pip install -e '.\[docs\]'\"\]"
    ):
        workspace.run(drifted)
