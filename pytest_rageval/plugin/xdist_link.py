"""The xdist controller's link to its workers: the stop file they watch (SIGTERM reaches the controller only),
the run-scoped temp folder that holds it and the config matrix's retrieval cache, and what each worker reports
beyond its test reports (``pytest_testnodedown``).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from pytest_rageval.evaluation.selection import Selection

if TYPE_CHECKING:
    from .controller import RunController

#: the run-scoped temp folder of an xdist session (the stop file, the retrieval cache), removed at its end
TEMP_PREFIX = "rageval-stop-"


class XdistControllerLink:
    """On the xdist controller: the stop file the workers watch, and what they report beyond test reports."""

    def __init__(self, controller: RunController) -> None:
        self.controller = controller
        self._stop_dir: Path | None = None
        controller.stop_workers = self._stop_workers

    def _stop_file_path(self) -> Path:
        if self._stop_dir is None:
            import tempfile

            remove_orphaned_temp_folders(Path(tempfile.gettempdir()))
            self._stop_dir = Path(tempfile.mkdtemp(prefix=TEMP_PREFIX))
            (self._stop_dir / "owner").write_text(str(os.getpid()))
        return self._stop_dir / "stop"

    def _stop_workers(self) -> None:
        """SIGTERM reaches the controller only: tell the xdist workers to stop too (they watch this file)."""
        if self._stop_dir is not None:
            try:
                self._stop_file_path().touch()
            except OSError:
                pass

    def pytest_configure_node(self, node: Any) -> None:
        """Name the file whose appearance stops a worker waiting for a case."""
        node.workerinput["rageval_stop_file"] = str(self._stop_file_path())
        # the config matrix's retrieval cache, shared by the workers for this run only (removed with the stop file)
        node.workerinput["rageval_retrieval_dir"] = str(self._stop_file_path().parent / "retrieval")

    def pytest_testnodedown(self, node: Any, error: Any) -> None:
        """What a worker reports beyond its test reports."""
        controller = self.controller
        output = getattr(node, "workeroutput", {})
        if output.get("rageval_stop"):  # it stopped the session (a refused judge key)
            controller.stop_message = output["rageval_stop"]
        controller.in_order_elsewhere += output.get("rageval_in_order", 0)
        controller.first_calls.extend((str(name), float(ms)) for name, ms in output.get("rageval_first_calls") or ())
        collection = controller.collection
        if output.get("rageval_selection") and not collection.selection.collected:  # every worker collects the same items
            collection.selection = Selection.from_dict(output["rageval_selection"])

    def pytest_unconfigure(self, config: pytest.Config) -> None:
        if self._stop_dir is not None:
            import shutil

            shutil.rmtree(self._stop_dir, ignore_errors=True)


def remove_orphaned_temp_folders(tmp: Path) -> None:
    """Remove the temp folders of sessions whose process is gone (killed with SIGKILL, so never cleaned up)."""
    import shutil

    for folder in tmp.glob(f"{TEMP_PREFIX}*"):
        try:
            pid = int((folder / "owner").read_text())
        except (OSError, ValueError):
            continue  # not ours, or still being made
        if not _alive(pid):
            shutil.rmtree(folder, ignore_errors=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # another user's process: alive
        return True
    return True
