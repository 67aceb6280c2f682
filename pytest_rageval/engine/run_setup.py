"""What one process of a ``--rageval`` session is set up with: settings, the judges, the target's client.

Built once per process by ``plugin.pytest_configure`` and shared by the case runner (which asks and
judges with it) and the run controller (which describes it in config.json, checks the judge and
re-judges the spot-check sample with it). Knows nothing of pytest.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_rageval.config.settings import Settings
from pytest_rageval.evaluation.registry import Threshold
from pytest_rageval.evaluation.schema import EvalCase
from pytest_rageval.evaluation.thresholds import resolve_thresholds
from pytest_rageval.judges.judging import JudgeSetup
from pytest_rageval.targets.headers import parse_headers
from pytest_rageval.targets.maps import check_maps, parse_request_map, parse_response_map
from pytest_rageval.targets.protocol import RagClient, RagConfigError
from pytest_rageval.targets.resolve import client_of, load_target

from .endpoint_limits import EndpointLimits
from .flow_share import FlowAddress
from .judge_factory import build_judge, judge_info

if TYPE_CHECKING:
    from pytest_rageval.config.settings import Settings


@dataclass
class RunSetup:
    """The settings, the judge (and spot-check judge) setups, and the target's client once made."""

    settings: Settings
    judge_setup: JudgeSetup | None
    spot_setup: JudgeSetup | None
    _target_client: RagClient | None = field(default=None, repr=False)
    _axis_clients: dict[str, RagClient] = field(default_factory=dict, repr=False)  # the matrix's target axis
    calibration: dict[str, Any] | None = None  # the stored calibration rageval_min_judge_agreement found
    canary_items: list[Any] = field(default_factory=list)  # the judge canary's labelled answers (check_canary)
    _limits: EndpointLimits | None = field(default=None, repr=False)

    @property
    def limits(self) -> EndpointLimits:
        """This process's endpoint limiters (the judge's and the target's)."""
        if self._limits is None:
            self._limits = EndpointLimits(self.settings)
        return self._limits

    def check_calibration(self) -> None:
        """With ``rageval_min_judge_agreement`` and a judge: find a sufficient calibration of that judge
        (``calibration_store.CalibrationRefused`` saying what is missing otherwise), before any request."""
        s = self.settings
        if s.min_judge_agreement is None or self.judge_setup is None:
            return
        from pytest_rageval.judges.calibration_store import judge_identity, required_calibration

        identity = judge_identity(self.judge_setup.judge.describe(), self.judge_info())
        self.calibration = required_calibration(
            s.output_dir, identity, self.judge_setup.metrics, s.min_judge_agreement, s.rootdir
        )

    @property
    def canary_path(self) -> Path:
        """The labelled set the judge canary takes its answers from."""
        from pytest_rageval.judges.calibration_measure import SHIPPED_SET

        return self.settings.calibration_set or SHIPPED_SET

    def check_canary(self) -> None:
        """With ``rageval_judge_canary`` and a judge: read the canary's labelled answers now, before any case
        (``calibration_measure.CalibrationError`` naming the file, line and field of a bad one)."""
        if self.settings.judge_canary <= 0 or self.judge_setup is None:
            return
        from pytest_rageval.judges.calibration_measure import load_set
        from pytest_rageval.judges.canary import canary_items

        self.canary_items = canary_items(load_set(self.canary_path), self.settings.judge_canary)

    @classmethod
    def build(
        cls, settings: Settings, *, shared_limits: FlowAddress | None = None, spot_judge: bool = True
    ) -> RunSetup:
        """``shared_limits``: the socket (and key) of the xdist controller's shared endpoint limits (on a worker);
        ``spot_judge``: build the spot check's judge (False where cases only run: the spot check re-judges after
        the run, where results are kept)."""
        limits = EndpointLimits(settings, shared=shared_limits)
        judge_setup = build_judge(settings, os.environ, limits=limits)
        spot_setup = (
            build_judge(settings, os.environ, model=settings.spot_check_model, limits=limits)
            if spot_judge and settings.spot_check and judge_setup is not None
            else None
        )
        return cls(settings, judge_setup, spot_setup, _limits=limits)

    @property
    def spot_checked(self) -> bool:
        """Whether the run spot-checks its judge (its judged cases keep what the spot check re-judges)."""
        return bool(self.settings.spot_check) and self.judge_setup is not None

    def target_client(self) -> RagClient:
        """The client for the configured target (made once); ``RagConfigError`` when there is none."""
        if self._target_client is None:
            s = self.settings
            axis = dict(s.matrix.axes).get("target") if s.matrix is not None else None
            if not s.target and axis:  # the matrix names the targets: the fixture's client is the first one
                return self.client_for(str(axis[0]))
            if not s.target:
                raise RagConfigError(
                    "no system under test: set --rageval-target, ini rageval_target or env RAGEVAL_TARGET, "
                    "or override the rageval_client fixture in conftest.py"
                )
            self._target_client = self._load(s.target)
        return self._target_client

    def _load(self, spec: str) -> RagClient:
        s = self.settings
        return load_target(
            spec,
            folders=[os.getcwd(), str(s.rootdir)],
            concurrency=s.concurrency,
            params_hook=s.params_hook,
            max_answer_chars=s.limits.answer,
            docs_root=s.docs_root_or_rootdir,
            headers=parse_headers(s.headers_text, os.environ),
            timeout=s.timeout,
            max_response_bytes=s.max_response_bytes,
            stream_format=s.stream_format,
            request_map=parse_request_map(s.request_map_text),
            response_map=parse_response_map(s.response_map_text),
        )

    def fixture_target_client(self, value: Any) -> RagClient:
        """The client of what a conftest ``rageval_client`` fixture returned: a URL or ``module:name`` as the target
        setting takes, a client, a framework object or a callable (made once per object by the caller)."""
        if isinstance(value, str):
            return self._load(value)
        s = self.settings
        return client_of(
            value,
            name="the rageval_client fixture",
            concurrency=s.concurrency,
            max_answer_chars=s.limits.answer,
            timeout=s.timeout,
            docs_root=s.docs_root_or_rootdir,
            response_map=parse_response_map(s.response_map_text),
        )

    def client_for(self, spec: str) -> RagClient:
        """The client of one value of the matrix's ``target`` axis (made once; same headers, maps and timeout)."""
        if spec not in self._axis_clients:
            self._axis_clients[spec] = self._load(spec)
        return self._axis_clients[spec]

    @property
    def made_clients(self) -> list[RagClient]:
        """Every target client made in this process (the configured target's, then the target axis's)."""
        made = [self._target_client] if self._target_client is not None else []
        return made + list(self._axis_clients.values())

    @property
    def made_target_client(self) -> RagClient | None:
        """The target's client if it was made in this process, else None."""
        return self._target_client

    def check_target(self) -> None:
        """Import the target and parse its URL, headers and maps now (``RagConfigError`` on a mistake).

        Without a target (a conftest ``rageval_client`` fixture serves the cases) the header and map
        lines are still checked, for syntax only.
        """
        s = self.settings
        if s.target:
            self.target_client()
        else:
            check_maps(s.headers_text, s.request_map_text, s.response_map_text)
        for name, values in s.matrix.axes if s.matrix is not None else ():
            for value in values if name == "target" else ():
                self.client_for(str(value))

    def judge_info(self) -> dict[str, Any]:
        """Name, model and kind of the judge in use (``none`` without one)."""
        return judge_info(self.judge_setup.judge if self.judge_setup else None)

    def thresholds_for(self, case: EvalCase) -> dict[str, Threshold]:
        """The thresholds that apply to ``case`` (its own over the configured ones)."""
        return resolve_thresholds(
            case, self.settings.thresholds, judge=self.settings.judge_enabled and case.judge is not False
        )
