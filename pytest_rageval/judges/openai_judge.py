"""The LLM judge for any OpenAI-compatible endpoint, through the ``openai`` SDK.

One chat.completions request per metric per case::

    model, temperature, seed, messages (prompts.build_messages), max_tokens (prompts.MAX_TOKENS[metric]),
    + the response format of formats.FORMATS: json_schema with the metric's bounded schema, else
      json_object carrying the schema (response_format.schema, extra_body format and guided_json),
      else text; outside json_schema the prompt states the schema too.

The SDK's own retries are off (``max_retries=0``); this module retries 408/409/
429/5xx answers, timeouts and connection errors itself, with exponential backoff
with full jitter (``backoff`` doubling, capped at ``max_backoff``: ``retry.backoff_delay``)
that honours ``Retry-After`` (seconds or HTTP date) and ``retry-after-ms``. A server that refuses the response
format (formats.next_step: HTTP 400/422/500 naming response_format, json_schema or
a schema keyword, or llama.cpp's 500 "Input should be 'text' or 'json_object'")
gets the same request once more in the next format; the judge keeps that format
for the rest of its life. The first request runs alone (probe.Probe) until it
has decided the format, so such a server refuses one request per judge and
process, not one per case in flight (``format_refusals`` counts them).

Answers are parsed strictly: ``json.loads`` of the message content (a ```json
fence is stripped) validated by the metric's pydantic model. A 0-1 metric's score
in (1, 100] is divided by 100; any score still outside its scale is malformed.
A malformed, non-JSON or truncated (finish_reason "length") answer is re-asked
at most ``max_reasks`` times, then JudgeError; a re-ask appends the unusable answer
and a message naming what was wrong and the form to answer in (prompts.reask_message),
so it is not the identical request again. 401/403 raise JudgeAuthError.
An endpoint that refuses connections after it had answered (its server died mid-run) is given
``GONE_RETRIES`` retries, not ``max_retries``; then the judge says once that it stopped answering
(``stopped_answering``) and every later request fails at once with that message, without a retry storm.
The same happens, whether or not it ever answered, to an endpoint on which ``BREAKER_REQUESTS`` requests in a row
used up their retries on transient failures (a circuit breaker: 429 with a long Retry-After forever, 503 forever).
Under pytest-xdist the workers share that news through ``stopped_flag`` (a file of the run), so a worker whose
own requests never got an answer gives up after ``GONE_RETRIES`` retries instead of waiting out all of them.
The API key never appears in messages, reprs, ``describe()``, logs, verdicts or the
cache: everything the server sends (message content and refusal, error bodies, the
SDK's exception texts) is masked by ``redact.Redactor`` after decoding and before
any cut, a verdict's fields are masked once more after parsing, and an SDK failure
becomes a JudgeError with a short masked message of its own (no chained traceback
that could print the body). The base URL is shown without credentials.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import importlib
import json
import logging
import os
import re
import threading
import time
import urllib.parse
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from pytest_rageval import bounded_http, defaults, safejson
from pytest_rageval.flow import EndpointLimiter, Limiter
from pytest_rageval.redact import MASK, Redactor, environment_secrets, guard_http_logs, public_url, url_secrets
from pytest_rageval.retry import backoff_delay, retry_after_seconds

from . import prompts
from .base import ALL_METRICS, SCALES, Judge, JudgeAuthError, JudgeError, JudgeInput, Verdict
from .formats import FORMATS, Format, first_step, next_step, request_fields
from .probe import Probe

__all__ = ["JSON_MODES", "OpenAIJudge", "parse_answer", "resolve_api_key", "retry_after_seconds"]

log = logging.getLogger(__name__)

JSON_MODES = ("json_schema", "json_object", "text")
PLACEHOLDER_KEY = "no-key"
DEFAULT_BASE_URL = "https://api.openai.com/v1"
_RETRY_STATUSES = frozenset({408, 409, 429})
#: answers that say the endpoint has too much in flight: the adaptive limit falls (flow.Aimd)
OVERLOADED = frozenset({429, 503})
PER_METRIC = "per_metric"
#: retries of a request refused a connection by an endpoint that had answered before: a restart in progress has
#: that long to come back; a server that died does not get a minute of retries per case
GONE_RETRIES = 2
#: requests in a row that used up their retries on transient failures (429, 408, 409, 5xx, timeouts, connection
#: errors) with no answer between them: the endpoint is taken to have stopped answering (the circuit breaker), so a
#: run against one that refuses everything, or answers 429 with a long Retry-After forever, ends in bounded time
BREAKER_REQUESTS = 2


def without_userinfo(url: str) -> str:
    """``url`` without ``user:pass@``: the judge is sent its key as a Bearer token, never the URL's credentials."""
    parts = urllib.parse.urlsplit(url)
    if "@" not in parts.netloc:
        return url
    return urllib.parse.urlunsplit(parts._replace(netloc=parts.netloc.rpartition("@")[2]))


def resolve_api_key(environ: Mapping[str, str]) -> str:
    """RAGEVAL_JUDGE_API_KEY, else OPENAI_API_KEY, else the placeholder ``no-key``."""
    for name in ("RAGEVAL_JUDGE_API_KEY", "OPENAI_API_KEY"):
        value = (environ.get(name) or "").strip()
        if value:
            return value
    return PLACEHOLDER_KEY


def _shorten(text: str, limit: int = 300) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[:limit] + "..."


_FENCE = re.compile(r"^```[ \t]*(?:json)?[ \t]*\n?(.*?)\n?[ \t]*```$", re.DOTALL | re.IGNORECASE)
_THINK = re.compile(r"^<think>.*?</think>", re.DOTALL)


def _strip_fence(text: str) -> str:
    """The text without a leading ``<think>`` block and without a surrounding ```json fence."""
    text = _THINK.sub("", text.strip(), count=1).strip()
    found = _FENCE.match(text)
    return found.group(1).strip() if found else text


def _normalise(metric: str, field: str, value: float, high: float) -> float:
    """A 0-1 value in (1, 100] divided by 100; raise ValueError when outside [0, high] afterwards."""
    if high == 1.0 and 1.0 < value <= 100.0:
        value = value / 100.0
    if not 0.0 <= value <= high:
        raise ValueError(f"{field} {value:g} is outside the {metric} scale 0-{high:g}")
    return value


def parse_answer(metric: str, content: str) -> Verdict:
    """A Verdict from the judge's raw answer text; ValueError saying what is wrong otherwise."""
    text = _strip_fence(content or "")
    if not text:
        raise ValueError("the answer was empty")
    try:
        data, _ = safejson.loads(text, nonfinite="repair")  # bounded; a NaN score becomes null: "score" is then wrong
    except safejson.JsonLimitError as exc:
        raise ValueError(f"the answer is not valid JSON ({exc})") from None
    except json.JSONDecodeError as exc:
        raise ValueError(f"the answer is not valid JSON ({exc.msg} at position {exc.pos})") from None
    if not isinstance(data, dict):
        raise ValueError(f"the answer is JSON {type(data).__name__}, not an object")
    try:
        answer = prompts.ANSWER_MODELS[metric].model_validate(data)
    except ValidationError as exc:
        raise ValueError(f"the JSON does not match the {metric} schema ({_problems(exc)})") from None
    return _verdict(metric, answer, content)


def _problems(exc: ValidationError) -> str:
    """``missing field score; passing: Input should be a valid boolean`` from a pydantic error."""
    out = []
    for error in exc.errors():
        field = ".".join(map(str, error["loc"])) or "answer"
        out.append(f"missing field {field}" if error["type"] == "missing" else f"{field}: {error['msg']}")
    return "; ".join(out)


def _verdict(metric: str, answer: BaseModel, raw: str) -> Verdict:
    """The Verdict an answer gives, read by its answer model's fields (the registry names each verdict's model).

    Told by fields, not by class: a test run that imports the package afresh (pytest's in-process runs) may hold
    answer classes of an earlier import, and an ``isinstance`` against them would silently drop the label."""
    values = answer.model_dump()
    verdict = Verdict(metric=metric, raw=raw, reasoning=str(values.get("reasoning") or ""))
    if "passing" in values:  # PassingAnswer
        verdict.label = bool(values["passing"])
        verdict.score = 1.0 if verdict.label else 0.0
    elif "abstained" in values:  # AbstentionAnswer
        verdict.label = bool(values["abstained"])
        if values.get("confidence") is not None:
            confidence = _normalise(metric, "confidence", float(values["confidence"]), 1.0)
            verdict.reasoning = f"confidence {confidence:g}"
    elif "acknowledges_conflict" in values:  # ConflictAnswer
        verdict.label = bool(values["acknowledges_conflict"])
    elif metric in SCALES:  # a scored answer: GroundednessAnswer, FivePointAnswer, UnitScoreAnswer
        verdict.score = _normalise(metric, "score", float(values["score"]), SCALES[metric][1])
        verdict.supported_claims = list(values.get("supported_claims") or [])
        verdict.unsupported_claims = list(values.get("unsupported_claims") or [])
    return verdict


def _error_text(exc: Any) -> str:
    """The error message a server put in its body (OpenAI or llama.cpp shape), else the SDK's message."""
    body = getattr(exc, "body", None)
    if isinstance(body, Mapping):
        inner = body.get("error", body)
        if isinstance(inner, Mapping) and inner.get("message"):
            return str(inner["message"])
        if isinstance(inner, str):
            return inner
        return json.dumps(body)  # whole: it is masked before it is cut
    if isinstance(body, str):
        return body
    return str(getattr(exc, "message", "") or exc)


class _Attempt:
    """What one ask produced: the message text (masked), whether it was cut off, and its token usage."""

    def __init__(self, completion: Any, redactor: Redactor) -> None:
        choice = completion.choices[0]
        self.content = redactor.mask(str(choice.message.content or ""))
        refusal = getattr(choice.message, "refusal", None)
        self.refusal = redactor.mask(str(refusal)) if refusal else None
        self.truncated = choice.finish_reason == "length"
        usage = getattr(completion, "usage", None)
        self.prompt_tokens = int(getattr(usage, "prompt_tokens", 0) or 0)
        self.completion_tokens = int(getattr(usage, "completion_tokens", 0) or 0)


class OpenAIJudge(Judge):
    """Judge metrics with an OpenAI-compatible chat endpoint (implements ``judges.base.Judge``)."""

    def __init__(
        self,
        *,
        model: str,
        base_url: str | None = None,
        api_key: str | None = None,
        json_mode: str = "json_schema",
        temperature: float = 0.0,
        seed: int = 7,
        timeout: float = 60.0,
        max_retries: int = 5,
        max_reasks: int = 2,
        prices: Mapping[str, tuple[float, float]] | None = None,
        max_tokens: int | str | None = PER_METRIC,
        backoff: float = 0.5,
        max_backoff: float = 30.0,
        max_in_flight: int = 8,
        limiter: Limiter | None = None,
        max_response_bytes: int = defaults.MAX_RESPONSE_BYTES,
    ) -> None:
        super().__init__(name="openai")
        if not model:
            raise ValueError("a judge model is required")
        if json_mode not in JSON_MODES:
            raise ValueError(f"json_mode must be one of {', '.join(JSON_MODES)}, not {json_mode!r}")
        if isinstance(max_tokens, str) and max_tokens != PER_METRIC:
            raise ValueError(f"max_tokens must be a number, None or {PER_METRIC!r}, not {max_tokens!r}")
        if max_retries < 0 or max_reasks < 0 or backoff < 0 or max_backoff < 0:
            raise ValueError("max_retries, max_reasks, backoff and max_backoff must be >= 0")
        self.model = model
        self.base_url = base_url or os.environ.get("OPENAI_BASE_URL") or DEFAULT_BASE_URL
        self.json_mode = json_mode
        self.temperature = float(temperature)
        self.seed = int(seed)
        self.timeout = float(timeout)
        self.max_response_bytes = int(max_response_bytes)
        self.max_retries = int(max_retries)
        self.max_reasks = int(max_reasks)
        self.prices = dict(prices or {})
        self.max_tokens = max_tokens
        self.backoff = float(backoff)
        self.max_backoff = float(max_backoff)
        self.__key = api_key if api_key else resolve_api_key(os.environ)
        key = [self.__key] if self.__key != PLACEHOLDER_KEY else []
        self._redactor = Redactor([*key, *environment_secrets(os.environ), *url_secrets(self.base_url)])
        self._shown_url = public_url(self.base_url)  # for messages, reprs and describe(): no credentials
        guard_http_logs()
        self._step = first_step(json_mode)  # index into formats.FORMATS
        self._probe = Probe()
        self.requests_sent = 0  # chat.completions requests, retries and re-asks included
        self.verdicts_given = 0  # usable answers received
        #: (the endpoint as shown, verdicts it gave) once it refused connections after answering: it stopped answering
        self.stopped_answering: tuple[str, int] | None = None
        self._stop_reason = "connection refused"  # why it stopped answering, as each later case's error says
        self._failing_in_a_row = 0  # requests that used up their retries on transient failures since the last answer
        self.stopped_flag: StoppedFlag | None = None  # other processes of the run that judge with the same endpoint
        self.format_refusals = 0  # of those, refused for their response format
        self._lock = threading.Lock()
        self._client: Any = None
        self._client_loop: asyncio.AbstractEventLoop | None = None
        # Shared by judges of one endpoint (spot checks); keeps what is in flight answerable within the timeout.
        self.limiter: Limiter = limiter or EndpointLimiter(max_in_flight, timeout=self.timeout)

    def __repr__(self) -> str:
        return f"OpenAIJudge(model={self.model!r}, base_url={self._shown_url!r}, json_mode={self.json_mode_in_use!r})"

    @property
    def json_mode_in_use(self) -> str:
        """The response-format mode requests use now (after any fallback)."""
        return FORMATS[self._step].mode

    def max_tokens_for(self, metric: str) -> int | None:
        """``max_tokens`` of a request for ``metric``: room for the longest answer its schema allows."""
        if self.max_tokens == PER_METRIC:
            return prompts.MAX_TOKENS[metric]
        return None if self.max_tokens is None else int(self.max_tokens)

    def describe(self) -> dict[str, Any]:
        """name, model, base_url, prompt versions, temperature, seed, json_mode, heuristic; never the key."""
        return {
            "name": self.name,
            "model": self.model,
            "base_url": self._shown_url,
            "prompt_version": prompts.prompt_version(),
            "prompt_versions": dict(prompts.PROMPT_VERSIONS),
            "temperature": self.temperature,
            "seed": self.seed,
            "json_mode": self.json_mode,
            "max_tokens": dict(prompts.MAX_TOKENS) if self.max_tokens == PER_METRIC else self.max_tokens,
            "heuristic": False,
        }

    def supports(self, metric: str) -> bool:
        return metric in ALL_METRICS

    async def aclose(self) -> None:
        """Close the HTTP client (when it belongs to the running loop)."""
        client, loop = self._client, self._client_loop
        self._client, self._client_loop = None, None
        if client is None:
            return
        if loop is _running_loop():
            await client.close()
        elif loop is not None and loop.is_running() and not loop.is_closed():
            asyncio.run_coroutine_threadsafe(client.close(), loop)

    # ------------------------------------------------------------------ judging

    def warm(self) -> None:
        """Start importing the SDK now (a case that will need the judge has begun), not at its first request."""
        _start_import()

    async def judge(self, metric: str, inp: JudgeInput, *, repeat_index: int = 0) -> Verdict:
        """One verdict for ``metric``: one request, plus its retries and re-asks."""
        if not self.supports(metric):
            raise JudgeError(metric, f"the openai judge has no prompt for metric {metric!r}")
        turns: list[dict[str, str]] = []  # the unusable answers and the corrections, after the prompt
        prompt_tokens = completion_tokens = 0
        problem, raw = "", ""
        asks = self.max_reasks + 1
        for ask in range(1, asks + 1):
            attempt = await self._probe.run(functools.partial(self._ask, metric, inp, turns))
            prompt_tokens += attempt.prompt_tokens
            completion_tokens += attempt.completion_tokens
            raw = attempt.content  # masked already: a server echoing the key must not store it
            problem, verdict = self._check(metric, attempt)
            if verdict is not None:
                with self._lock:
                    self.verdicts_given += 1
                verdict = self._masked(verdict)
                verdict.attempts = ask
                verdict.prompt_tokens, verdict.completion_tokens = prompt_tokens, completion_tokens
                verdict.cost_usd = self.cost(prompt_tokens, completion_tokens)
                return verdict
            log.debug("rageval judge: %s answer unusable (%s); ask %d of %d", metric, problem, ask, asks)
            turns = [
                *turns,
                {"role": "assistant", "content": raw},
                {"role": "user", "content": prompts.reask_message(metric, problem)},
            ]
        raise JudgeError(
            metric,
            f"unusable judge answer after {asks} attempts: {problem}; last raw answer: {_shorten(raw)!r}",
            prompt_tokens=prompt_tokens,
            completion_tokens=completion_tokens,
            cost_usd=self.cost(prompt_tokens, completion_tokens),
        )

    def cost(self, prompt_tokens: int, completion_tokens: int) -> float:
        """Estimated USD from the price table (0 for a model not in it)."""
        price = self.prices.get(self.model)
        if not price:
            return 0.0
        return (prompt_tokens * float(price[0]) + completion_tokens * float(price[1])) / 1_000_000

    def _masked(self, verdict: Verdict) -> Verdict:
        """The verdict with its decoded texts masked (a secret the raw text hid in an escape it could not undo
        withholds the raw text)."""
        mask = self._redactor.mask
        texts = [verdict.reasoning, *verdict.supported_claims, *verdict.unsupported_claims]
        if all(mask(text) == text for text in texts):
            return verdict
        return verdict.model_copy(
            update={
                "reasoning": mask(verdict.reasoning),
                "supported_claims": [mask(c) for c in verdict.supported_claims],
                "unsupported_claims": [mask(c) for c in verdict.unsupported_claims],
                "raw": MASK,
            }
        )

    @staticmethod
    def _check(metric: str, attempt: _Attempt) -> tuple[str, Verdict | None]:
        if attempt.truncated:
            return (
                "the answer was cut off at max_tokens (finish_reason=length); keep every field within its limit",
                None,
            )
        if not attempt.content.strip() and attempt.refusal:
            return f"the model refused: {_shorten(attempt.refusal, 200)}", None
        try:
            return "", parse_answer(metric, attempt.content)
        except ValueError as exc:
            return str(exc), None

    # ------------------------------------------------------------------ transport

    def _client_now(self, openai: Any) -> Any:
        """The AsyncOpenAI client of the running loop, created on first use there (``openai``: the package)."""
        loop = _running_loop()
        if self._client is None or self._client_loop is not loop:
            self._client = openai.AsyncOpenAI(
                base_url=without_userinfo(self.base_url),  # (httpx would send user:pass@ as Basic, in place of the key)
                api_key=self.__key,
                timeout=self.timeout,
                max_retries=0,
                http_client=openai.DefaultAsyncHttpxClient(
                    event_hooks=bounded_http.event_hooks(self.max_response_bytes)
                ),
            )
            self._client_loop = loop
        return self._client

    def _request(self, metric: str, inp: JudgeInput, turns: list[dict[str, str]], fmt: Format) -> dict[str, Any]:
        """The keyword arguments of one chat.completions request in response format ``fmt``."""
        messages = [*prompts.build_messages(metric, inp, schema_in_prompt=fmt.schema_in_prompt), *turns]
        request: dict[str, Any] = {
            "model": self.model,
            "messages": messages,
            "temperature": self.temperature,
            "seed": self.seed,
        }
        max_tokens = self.max_tokens_for(metric)
        if max_tokens is not None:
            request["max_tokens"] = max_tokens
        request.update(request_fields(fmt, metric, prompts.RESPONSE_SCHEMAS[metric]))
        return request

    def _fall_back(self, step: int, to: int) -> int:
        """Move from format ``step`` to ``to`` (once, even under concurrent calls); the step to use now."""
        with self._lock:
            self.format_refusals += 1
            if self._step == step:
                self._step = to
                log.warning(
                    "rageval judge: %s refused response format %s; using %s from now on",
                    self._shown_url,
                    FORMATS[step].describe(),
                    FORMATS[to].describe(),
                )
            return self._step

    async def _ask(self, metric: str, inp: JudgeInput, turns: list[dict[str, str]]) -> _Attempt:
        """One chat completion, with retries of transient failures and response-format fallback."""
        openai = await _openai()
        retries = 0
        step = self._step
        while True:
            self._raise_if_gone(metric)
            invalid = ""
            refused_connection = False
            try:
                async with self.limiter.slot() as ticket:
                    with self._lock:
                        self.requests_sent += 1
                    request = self._request(metric, inp, turns, FORMATS[step])
                    sent = time.monotonic()
                    try:
                        completion = await self._client_now(openai).chat.completions.create(**request)
                    except openai.APIStatusError as exc:
                        if exc.status_code in OVERLOADED:
                            ticket.refused()
                        raise
                    except openai.APITimeoutError:
                        ticket.timed_out()
                        raise
                    ticket.done(time.monotonic() - sent)
                with self._lock:
                    self._failing_in_a_row = 0
                return _Attempt(completion, self._redactor)
            except openai.APIStatusError as exc:
                status, text = exc.status_code, self._redactor.mask(_error_text(exc))
                refused = next_step(step, status, text)
                if refused is not None:
                    step = self._fall_back(step, refused)
                    continue
                if status in (401, 403):
                    raise JudgeAuthError(
                        metric,
                        f"judge endpoint refused the API key (HTTP {status}) at {self._shown_url}; set RAGEVAL_JUDGE_API_KEY",
                    ) from None
                failure = f"HTTP {status}: {_shorten(text, 200)}"
                transient = status in _RETRY_STATUSES or status >= 500
                headers = exc.response.headers if exc.response is not None else None
            except (bounded_http.BodyRefused, openai.APIConnectionError) as exc:
                body_refused = bounded_http.refused(exc)
                if body_refused is not None:  # not retried: the same body would come again
                    raise JudgeError(
                        metric, f"judge endpoint {self._shown_url} sent a response that was refused: {body_refused}"
                    ) from None
                assert isinstance(exc, openai.APIConnectionError)
                kind = "timed out" if isinstance(exc, openai.APITimeoutError) else "connection failed"
                failure, transient, headers = f"{kind} ({_shorten(self._redactor.mask(str(exc)), 200)})", True, None
                refused_connection = _connection_refused(exc)
            except (AttributeError, IndexError, TypeError, ValueError, openai.OpenAIError) as exc:
                # A 200 that is no chat completion (a body that is not JSON, a wrong shape): the SDK's exception
                # and its traceback may carry the body, so only a short masked text of it goes on.
                invalid = f"{type(exc).__name__}: {_shorten(self._redactor.mask(str(exc)), 200)}"
            if invalid:  # raised outside the except block: no chained SDK traceback
                raise JudgeError(
                    metric, f"judge endpoint {self._shown_url} returned an invalid chat completion ({invalid})"
                )
            if refused_connection and retries >= min(self.max_retries, GONE_RETRIES) and self._answered_before():
                self._gone(metric)
            if transient and retries >= min(self.max_retries, GONE_RETRIES) and self._flag_raised():
                self._gone(metric, f"{_reason(failure)}; another process of the run found it stopped answering")
            if transient and retries >= self.max_retries:
                self._count_exhausted(metric, failure)
            if not transient or retries >= self.max_retries:
                tries = retries + 1
                hint = ""
                if failure.startswith("timed out"):
                    hint = (
                        f" (each waited {self.timeout:g} s: rageval_timeout; a server that answers one request "
                        "at a time makes the others wait, so --rageval-concurrency 1 or 2 may help)"
                    )
                raise JudgeError(
                    metric,
                    f"judge request to {self._shown_url} failed after {tries} attempt{'s' if tries != 1 else ''}: {failure}{hint}",
                )
            delay = backoff_delay(retries, base=self.backoff, cap=self.max_backoff, headers=headers)
            retries += 1
            log.debug("rageval judge: %s; retry %d of %d in %.2f s", failure, retries, self.max_retries, delay)
            if failure.startswith("HTTP 429"):
                self.limiter.pause(delay)  # every request to this endpoint waits, not just this one
            else:
                await asyncio.sleep(delay)

    def _answered_before(self) -> bool:
        """Whether the endpoint answered this judge, or another process's judge of the run said it stopped."""
        return self.verdicts_given > 0 or self._flag_raised()

    def _flag_raised(self) -> bool:
        return self.stopped_flag is not None and self.stopped_flag.raised()

    def _count_exhausted(self, metric: str, failure: str) -> None:
        """A request used up its retries on transient failures: the ``BREAKER_REQUESTS``-th in a row with no answer
        between them stops the judge (``_gone``)."""
        with self._lock:
            self._failing_in_a_row += 1
            tripped = self._failing_in_a_row >= BREAKER_REQUESTS
        if tripped:
            self._gone(
                metric,
                f"{_reason(failure)} on {BREAKER_REQUESTS} requests in a row, each after {self.max_retries + 1} attempts",
            )

    def _gone(self, metric: str, reason: str = "connection refused") -> None:
        """The endpoint stopped answering (it refused connections after it had answered and went on refusing, or
        the circuit breaker tripped): say so once; raise."""
        with self._lock:
            if self.stopped_answering is None:
                self.stopped_answering = (self._shown_url, self.verdicts_given)
                self._stop_reason = reason
                log.warning(
                    "rageval judge: %s after %d verdicts", _gone_message(self._shown_url, reason), self.verdicts_given
                )
                if self.stopped_flag is not None:
                    self.stopped_flag.raise_flag()
        self._raise_if_gone(metric)

    def _raise_if_gone(self, metric: str) -> None:
        """A request after the endpoint stopped answering fails at once, naming it."""
        if self.stopped_answering is not None:
            raise JudgeError(metric, _gone_message(self.stopped_answering[0], self._stop_reason))


class StoppedFlag:
    """A file that says an endpoint stopped answering, for the other processes of a run (xdist workers)."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def raise_flag(self) -> None:
        try:
            self.path.touch()
        except OSError:  # the run's folder is gone (the session ends): nobody is left to tell
            pass

    def raised(self) -> bool:
        return self.path.exists()


def _gone_message(url: str, reason: str) -> str:
    """One wording for every case judged after the endpoint stopped answering (the summary adds the count)."""
    return f"the judge at {url} stopped answering ({reason})"


def _reason(failure: str) -> str:
    """A failure's kind, short (``HTTP 429``, ``timed out``, ``connection failed``): the stop's reason."""
    return failure.partition(":")[0].partition(" (")[0]


def _connection_refused(exc: BaseException) -> bool:
    """Whether an SDK connection error is a refused connection (nothing listens there now), not a timeout or a
    dropped response. Told by the transport error's class name: the SDK's HTTP package is not always ``httpx``."""
    cause = exc.__cause__ or exc.__context__
    return cause is not None and any(kind.__name__ == "ConnectError" for kind in type(cause).__mro__)


#: The import of the openai package, started the first time a case may need it (:meth:`OpenAIJudge.warm`) or a
#: request does. A process that only describes the judge (the pytest-xdist controller) never imports it.
_IMPORTING: concurrent.futures.Future[Any] | None = None
_IMPORT_LOCK = threading.Lock()


def _start_import() -> concurrent.futures.Future[Any]:
    """The ``openai`` package's import, on a thread of its own (once a process): the event loop goes on running
    the cases in flight meanwhile (an import on the loop's thread stalled every one of them)."""
    global _IMPORTING
    with _IMPORT_LOCK:
        if _IMPORTING is None:
            future: concurrent.futures.Future[Any] = concurrent.futures.Future()

            def run() -> None:
                try:
                    future.set_result(importlib.import_module("openai"))
                except BaseException as exc:  # handed to whoever awaits the package
                    future.set_exception(exc)

            threading.Thread(target=run, name="rageval-import-openai", daemon=True).start()
            _IMPORTING = future
        return _IMPORTING


async def _openai() -> Any:
    """The ``openai`` package (its import started now if nothing started it before)."""
    return await asyncio.wrap_future(_start_import())


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None
