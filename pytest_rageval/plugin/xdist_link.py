"""The xdist controller's link to its workers: the stop file they watch (SIGTERM reaches the controller only),
the run-scoped temp folder that holds it, the config matrix's retrieval cache and the socket of the endpoint
limits the workers share (flow_share.FlowServer), and what each worker reports beyond its test reports
(``pytest_testnodedown``).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from pytest_rageval.engine.endpoint_limits import combined
from pytest_rageval.engine.flow_share import FlowServer
from pytest_rageval.evaluation.selection import Selection
from pytest_rageval.flow import FlowStats

if TYPE_CHECKING:
    from .controller import RunController

#: the run-scoped temp folder of an xdist session (the stop file, the retrieval cache), removed at its end
TEMP_PREFIX = "rageval-stop-"
#: the longest path a Unix socket may be bound to, with room to spare (sun_path holds 108 bytes on Linux, 104 on macOS)
MAX_SOCKET_PATH = 100
SHORT_TMP = Path("/tmp")


class XdistControllerLink:
    """On the xdist controller: the stop file the workers watch, and what they report beyond test reports."""

    def __init__(self, controller: RunController) -> None:
        self.controller = controller
        self._stop_dir: Path | None = None
        self._flow: FlowServer | None = None
        self._worker_flow: list[tuple[str, FlowStats]] = []  # what each worker's own limiters did
        self._more_dirs: list[Path] = []  # a short folder for the socket, when the temp folder's path is too long
        controller.stop_workers = self._stop_workers
        controller.flow_stats = self._flow_stats

    def _stop_file_path(self) -> Path:
        if self._stop_dir is None:
            for tmp in {Path(tempfile.gettempdir()), SHORT_TMP}:  # (the socket's short folder may be in /tmp)
                remove_orphaned_temp_folders(tmp)
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
        # one limit per endpoint for every worker, served here
        s = self.controller.settings
        if self._flow is None and (s.adaptive or s.judge_rate or s.target_rate):
            self._flow = self._start_flow()
        if self._flow is not None:
            node.workerinput["rageval_flow"] = str(self._flow.path)
            node.workerinput["rageval_flow_key"] = self._flow.key  # the workers' own: only they may use the socket

    def _start_flow(self) -> FlowServer | None:
        """The shared limits' server, its socket in the temp folder (or, when that path is too long for a Unix
        socket, in a short folder of its own); None, with a note, when it cannot start: each worker limits itself."""
        path = self._stop_file_path().parent / "flow.sock"
        if len(os.fsencode(path)) > MAX_SOCKET_PATH:
            short = Path(tempfile.mkdtemp(prefix=TEMP_PREFIX, dir=SHORT_TMP if SHORT_TMP.is_dir() else None))
            (short / "owner").write_text(str(os.getpid()))
            self._more_dirs.append(short)
            path = short / "flow.sock"
        timeout = self.controller.settings.timeout  # a rate slower than one call a timeout, or a place held for
        flow = FlowServer(path, max_spacing=timeout, max_hold=2 * timeout + 60)  # two, is none a worker asks for
        try:
            flow.start()
        except (OSError, RuntimeError) as exc:
            flow.stop()
            self.controller.gate_notes.append(
                f"the workers could not share one limit per endpoint ({exc}): each limited itself"
            )
            return None
        return flow

    def _flow_stats(self) -> list[tuple[str, FlowStats]]:
        """The shared limits' figures, and those of each worker's own limits (a fixed --rageval-concurrency)."""
        return combined((self._flow.stats() if self._flow is not None else []) + self._worker_flow)

    def pytest_testnodedown(self, node: Any, error: Any) -> None:
        """What a worker reports beyond its test reports."""
        controller = self.controller
        output = getattr(node, "workeroutput", {})
        if output.get("rageval_stop"):  # it stopped the session (a refused judge key)
            controller.stop_message = output["rageval_stop"]
        controller.in_order_elsewhere += output.get("rageval_in_order", 0)
        controller.first_calls.extend((str(name), float(ms)) for name, ms in output.get("rageval_first_calls") or ())
        controller.judges_stopped.extend((str(url), int(n)) for url, n in output.get("rageval_judges_stopped") or ())
        self._worker_flow.extend((str(name), FlowStats(**stats)) for name, stats in output.get("rageval_flow") or ())
        collection = controller.collection
        if (
            output.get("rageval_selection") and not collection.selection.collected
        ):  # every worker collects the same items
            collection.selection = Selection.from_dict(output["rageval_selection"])

    def pytest_unconfigure(self, config: pytest.Config) -> None:
        if self._flow is not None:
            self._flow.stop()
        for folder in [*self._more_dirs, *([self._stop_dir] if self._stop_dir is not None else [])]:
            shutil.rmtree(folder, ignore_errors=True)


def remove_orphaned_temp_folders(tmp: Path) -> None:
    """Remove the temp folders of sessions whose process is gone (killed with SIGKILL, so never cleaned up)."""
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
