"""What a test that runs ``pytest --rageval`` checks of the run as a whole, besides its outcomes: the exit status
and every artifact of the run folder (a run that ends without its report is a broken run, whatever its cases did)."""

from __future__ import annotations

from pathlib import Path

ARTIFACTS = ("metrics.json", "results.jsonl", "config.json", "report.html")


def newest(output: Path) -> Path:
    """The run folder ``latest`` in ``output`` names."""
    return output / (output / "latest").read_text(encoding="utf-8").strip()


def assert_run_whole(
    output: Path, status: int, *, expected_status: int | tuple[int, ...] = 0, out: str = "", latest: bool = True
) -> Path:
    """The run ended with ``expected_status`` and wrote every artifact; its folder (``latest`` in ``output``).

    ``latest=False``: a run whose every case errored, which leaves ``latest`` where it was (the newest run folder
    is then checked). ``out`` (the run's output) is shown when a check fails."""
    expected = (expected_status,) if isinstance(expected_status, int) else expected_status
    assert status in expected, f"exit status {status}, expected {' or '.join(map(str, expected))}\n{out[-3000:]}"
    if latest:
        assert (output / "latest").is_file(), f"no {output / 'latest'}\n{out[-3000:]}"
        run_dir = newest(output)
    else:
        assert not (output / "latest").exists(), f"{output / 'latest'} was moved\n{out[-3000:]}"
        folders = sorted(path for path in output.iterdir() if path.is_dir())
        assert folders, f"no run folder in {output}\n{out[-3000:]}"
        run_dir = folders[-1]
    missing = [name for name in ARTIFACTS if not (run_dir / name).is_file()]
    assert not missing, f"{run_dir} lacks {', '.join(missing)}\n{out[-3000:]}"
    return run_dir
