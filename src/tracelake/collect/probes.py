"""Privacy probes: a small library a web service uses to report where request data goes.

A service marks its sources (an endpoint's request fields) and sinks (loggers, database writes,
outbound calls). Each request opens a scope (`probes.request(...)` or the `@probes.endpoint`
decorator); the scope lives in a context variable, so it follows the request through `await`s
and into threads started with the request's context, and two concurrent requests never see each
other's payloads. A sampled fraction of requests capture their payloads — flattened at once, so
later mutation does not matter — within a per-request time budget; when the request ends its
captures go to a background worker, which matches sources against sinks (`probe_flows`) within
its own budget and ships the accumulated flows as a `LineageBatch`, signal `probe`, every
`flush_interval` seconds: into a store in the same process (`StoreShipper`) or over HTTP to a
Tracelake server (`HttpShipper`). An unsampled request costs one random draw, a dictionary
lookup (its handler's scope, made once, which still says which request code runs in:
`current_request`) and a context-variable set. A probe never fails the request: any error inside
it is counted, logged without values, and the request carries on. Values are kept only as keyed
fingerprints unless `keep_raw` is set.
"""

from __future__ import annotations

import atexit
import functools
import inspect
import logging
import os
import queue
import random
import sys
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from contextvars import ContextVar, Token
from dataclasses import dataclass, field
from typing import Any, NamedTuple, Protocol, TypeVar

from tracelake.collect.probe_flows import Capture, FlowSet, Landing, SampledRequest
from tracelake.collect.probe_match import Limits, flatten
from tracelake.model import LineageBatch, parse_urn
from tracelake.model.batch_json import batch_to_json

log = logging.getLogger(__name__)
F = TypeVar("F", bound=Callable[..., Any])
KEY_ENV = "TRACELAKE_PROBE_KEY"


@dataclass(frozen=True)
class ProbeConfig:
    sample_rate: float = 0.01
    limits: Limits = field(default_factory=Limits)  # per captured payload
    # Budgets count the thread's CPU time, not the wall clock: a request waiting for the
    # interpreter while other threads run has not spent its budget.
    capture_budget_us: float = 500.0  # per request, spent on the request's own thread
    match_budget_ms: float = 5.0  # per request, spent by the background worker
    min_length: int = 3  # shorter values are never matched (they match by chance)
    keep_raw: bool = False
    key: bytes | None = None  # fingerprint key; else $TRACELAKE_PROBE_KEY, else random per process
    stack_depth: int = 4
    flush_interval: float = 10.0
    max_pending: int = 10_000  # sampled requests waiting for the worker; beyond, they are dropped


class Shipper(Protocol):
    def ship(self, batch: LineageBatch) -> None: ...


class StoreShipper:
    """Ships into a store in this process (the embedded default)."""

    def __init__(self, store: Any) -> None:
        self.store = store

    def ship(self, batch: LineageBatch) -> None:
        self.store.ingest(batch)


class HttpShipper:
    """Ships to a Tracelake server (`POST /api/tracelake/v1/batches`), with a write-scope token
    when the server requires one. A failed ship raises, so the flows stay for the next one."""

    def __init__(self, url: str, *, token: str | None = None, timeout: float = 10.0) -> None:
        import requests

        self.endpoint = url.rstrip("/") + "/api/tracelake/v1/batches"
        self.timeout = timeout
        self.session = requests.Session()
        if token:
            self.session.headers["Authorization"] = f"Bearer {token}"

    def ship(self, batch: LineageBatch) -> None:
        response = self.session.post(self.endpoint, json=batch_to_json(batch), timeout=self.timeout)
        response.raise_for_status()


@dataclass
class ProbeStats:
    requests: int = 0
    sampled: int = 0
    captures: int = 0
    over_budget: int = 0  # sampled requests that stopped capturing at the time budget
    truncated: int = 0  # captures cut at the size limits
    dropped: int = 0  # sampled requests the worker had no room for
    cut_short: int = 0  # requests whose matching hit its budget
    errors: int = 0
    shipped: int = 0
    ship_failures: int = 0


class _Request:
    __slots__ = ("endpoint", "handler", "over_budget", "sampled", "sinks", "sources", "spent_ns", "trace_id")

    def __init__(
        self, handler: str, trace_id: str, endpoint: str | None = None, *, sampled: bool = True
    ) -> None:
        self.handler = handler
        self.trace_id = trace_id
        self.endpoint = endpoint
        self.sampled = sampled  # else nothing is captured: the scope only says which request it is
        self.sources: list[Capture] = []
        self.sinks: list[Capture] = []
        self.spent_ns = 0
        self.over_budget = False


class RequestScope(NamedTuple):
    """The request some code runs in (`current_request`): its handler's process is
    `web.handler/<handler>`; `endpoint` is the endpoint asset, when the scope was told it;
    `trace_id` is empty for a request that is not sampled."""

    handler: str
    endpoint: str | None
    trace_id: str


def current_request() -> RequestScope | None:
    """The request scope this code runs in, sampled or not (Python runs started inside a
    request link to it: `tracelake.python`)."""
    request = _current.get()
    return None if request is None else RequestScope(request.handler, request.endpoint, request.trace_id)


_UNSAMPLED_SCOPES = 1000
_current: ContextVar[_Request | None] = ContextVar("tracelake_probe_request", default=None)
_STOP = object()
_THIS_FILE = __file__


def _sampled() -> _Request | None:
    """The sampled request this code runs in, if any."""
    request = _current.get()
    return request if request is not None and request.sampled else None


class _Scope:
    """`with probes.request(...)`: a class rather than a generator, it is on every request's path."""

    __slots__ = ("_probes", "_request", "_token")

    def __init__(self, probes: Probes, request: _Request | None) -> None:
        self._probes = probes
        self._request = request
        self._token: Token[_Request | None] | None = None

    def __enter__(self) -> _Request | None:
        if self._request is not None:
            self._token = _current.set(self._request)
        return self._request

    def __exit__(self, *exc: object) -> None:
        if self._token is not None:
            _current.reset(self._token)
            self._probes._finish(self._request)


class Probes:
    """Sources, sinks and request scopes for one service; see the module docstring."""

    def __init__(
        self,
        shipper: Shipper | None = None,
        config: ProbeConfig | None = None,
        *,
        landings: Mapping[str, Landing] | None = None,
        sampler: Callable[[], float] = random.random,
    ) -> None:
        self.config = config or ProbeConfig()
        self.shipper = shipper
        self.stats = ProbeStats()
        key = self.config.key or os.environ.get(KEY_ENV, "").encode() or os.urandom(32)
        self.flows = FlowSet(
            key=key[:64],
            min_length=self.config.min_length,
            keep_raw=self.config.keep_raw,
            landings=dict(landings or {}),
        )
        self._sampler = sampler
        self._budget_ns = int(self.config.capture_budget_us * 1000)
        self._queue: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._worker: threading.Thread | None = None
        self._lock = threading.Lock()  # guards self.flows between the worker and readers
        self._dirty = False
        self._warned: set[str] = set()
        self._unsampled: dict[tuple[str, str | None], _Request] = {}

    # ------------------------------------------------------------ request scopes

    def request(self, handler: str, trace_id: str | None = None, *, endpoint: str | None = None) -> _Scope:
        """The scope of one request to `handler` (its process is `web.handler/<handler>`) at
        the `endpoint` asset, if given.

        Inside a scope already open (a handler calling another), the outer scope goes on.
        """
        if _current.get() is not None:
            return _Scope(self, None)
        self.stats.requests += 1
        if self._sampler() >= self.config.sample_rate:
            # one scope object per handler, made once: an unsampled request allocates nothing
            unsampled = self._unsampled.get((handler, endpoint))
            if unsampled is None:
                unsampled = self._unsampled[handler, endpoint] = _Request(
                    handler, "", endpoint, sampled=False
                )
            return _Scope(self, unsampled)
        self.stats.sampled += 1
        return _Scope(self, _Request(handler, trace_id or uuid.uuid4().hex, endpoint))

    def source(self, asset: str, payload: Any) -> None:
        """Data the request received: each key of `payload` is a field of `asset`."""
        request = _sampled()
        if request is not None:
            self._capture(request, asset, payload, sink=False)

    def sink(self, asset: str, payload: Any) -> None:
        """Data the request wrote to `asset` (a log record, a row, an outbound call's body)."""
        request = _sampled()
        if request is not None:
            self._capture(request, asset, payload, sink=True)

    def endpoint(
        self, asset: str, *, handler: str | None = None, body: str | None = None
    ) -> Callable[[F], F]:
        """Decorate a request handler: a scope per call, its arguments the endpoint's fields
        (`body`: only the argument of that name, e.g. the request model)."""
        name = handler or parse_urn(asset).name

        def decorate(function: F) -> F:
            signature = inspect.signature(function)

            def record(args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
                if _sampled() is not None:
                    arguments = signature.bind_partial(*args, **kwargs).arguments
                    self.source(asset, arguments.get(body) if body else arguments)

            if inspect.iscoroutinefunction(function):

                @functools.wraps(function)
                async def run_async(*args: Any, **kwargs: Any) -> Any:
                    with self.request(name, endpoint=asset):
                        record(args, kwargs)
                        return await function(*args, **kwargs)

                return run_async  # type: ignore[return-value]  # functools.wraps keeps the signature mypy cannot follow

            @functools.wraps(function)
            def run(*args: Any, **kwargs: Any) -> Any:
                with self.request(name, endpoint=asset):
                    record(args, kwargs)
                    return function(*args, **kwargs)

            return run  # type: ignore[return-value]  # functools.wraps keeps the signature mypy cannot follow

        return decorate

    def sink_call(self, asset: str, *, arg: str | None = None) -> Callable[[F], F]:
        """Decorate a function that writes to `asset`: each call's argument `arg` (or all of its
        arguments) is a sink payload."""

        def decorate(function: F) -> F:
            signature = inspect.signature(function)

            @functools.wraps(function)
            def run(*args: Any, **kwargs: Any) -> Any:
                if _sampled() is not None:
                    try:
                        arguments = signature.bind_partial(*args, **kwargs).arguments
                        arguments.pop("self", None)
                        self.sink(asset, arguments.get(arg) if arg else arguments)
                    except Exception as error:  # a probe never fails the call
                        self._failed("sink_call", error)
                return function(*args, **kwargs)

            return run  # type: ignore[return-value]  # functools.wraps keeps the signature mypy cannot follow

        return decorate

    def log_handler(self, asset: str) -> logging.Handler:
        """A `logging.Handler` that makes a logger a sink: its message and `extra` fields."""
        return ProbeLogHandler(self, asset)

    # ------------------------------------------------------------ capture

    def _capture(self, request: _Request, asset: str, payload: Any, *, sink: bool) -> None:
        if request.over_budget:
            return
        started = time.thread_time_ns()
        try:
            leaves, truncated = flatten(payload, self.config.limits)
            stack = _stack(self.config.stack_depth) if sink else ()
            capture = Capture(asset, tuple(leaves), time.time(), stack, truncated)
            (request.sinks if sink else request.sources).append(capture)
            self.stats.captures += 1
            self.stats.truncated += truncated
        except Exception as error:  # a probe never fails the request
            self._failed("capture", error)
        request.spent_ns += time.thread_time_ns() - started
        if request.spent_ns > self._budget_ns:
            request.over_budget = True
            self.stats.over_budget += 1

    def _finish(self, request: _Request | None) -> None:
        if request is None or not request.sampled or not (request.sources and request.sinks):
            return
        try:
            if self._queue.qsize() >= self.config.max_pending:
                self.stats.dropped += 1
                return
            self._ensure_worker()
            self._queue.put(
                SampledRequest(
                    request.handler, request.trace_id, tuple(request.sources), tuple(request.sinks)
                )
            )
        except Exception as error:
            self._failed("finish", error)

    def _failed(self, where: str, error: Exception) -> None:
        self.stats.errors += 1
        if where not in self._warned:  # once per place; the type only, never a value
            self._warned.add(where)
            log.warning("privacy probe %s failed (%s); the request goes on", where, type(error).__name__)

    # ------------------------------------------------------------ matching and shipping

    def _ensure_worker(self) -> None:
        if self._worker is None:
            with self._lock:
                if self._worker is None:
                    self._worker = threading.Thread(target=self._work, name="tracelake-probes", daemon=True)
                    self._worker.start()
                    atexit.register(self.close)

    def _work(self) -> None:
        interval = self.config.flush_interval
        last_ship = time.monotonic()
        while True:
            try:
                item = self._queue.get(timeout=interval)
            except queue.Empty:
                item = None
            if isinstance(item, SampledRequest):
                deadline = time.thread_time_ns() + int(self.config.match_budget_ms * 1e6)
                try:
                    with self._lock:
                        before = self.flows.cut_short
                        self.flows.observe(item, deadline)
                        self.stats.cut_short += self.flows.cut_short - before
                        self._dirty = True
                except Exception as error:
                    self._failed("match", error)
            flushing = isinstance(item, threading.Event) or item is _STOP
            if flushing or time.monotonic() - last_ship >= interval:
                self._ship()
                last_ship = time.monotonic()
            if isinstance(item, threading.Event):
                item.set()
            if item is _STOP:
                return

    def _ship(self) -> None:
        if self.shipper is None or not self._dirty:
            return
        with self._lock:
            batch = self.flows.batch()
            self._dirty = False
        try:
            self.shipper.ship(batch)
            self.stats.shipped += 1
        except Exception as error:
            self._dirty = True  # the set is cumulative: the next ship carries these flows too
            self.stats.ship_failures += 1
            self._failed("ship", error)

    def flush(self, timeout: float = 30.0) -> bool:
        """Match every finished request and ship; True when done within `timeout`."""
        if self._worker is None:
            return True
        done = threading.Event()
        self._queue.put(done)
        return done.wait(timeout)

    def batch(self) -> LineageBatch:
        """Every flow seen so far (after `flush`), for callers that ship it themselves."""
        with self._lock:
            return self.flows.batch()

    def close(self, timeout: float = 30.0) -> None:
        worker = self._worker
        if worker is None or not worker.is_alive():
            return
        self._queue.put(_STOP)
        worker.join(timeout)


class ProbeLogHandler(logging.Handler):
    """Makes a Python logger a sink: the formatted message plus the record's `extra` fields."""

    _STANDARD = frozenset(vars(logging.LogRecord("", 0, "", 0, "", (), None))) | {"message", "asctime"}

    def __init__(self, probes: Probes, asset: str) -> None:
        super().__init__()
        self.probes = probes
        self.asset = asset

    def emit(self, record: logging.LogRecord) -> None:
        if _sampled() is None:
            return
        try:
            payload = {k: v for k, v in vars(record).items() if k not in self._STANDARD}
            payload["message"] = record.getMessage()
            self.probes.sink(self.asset, payload)
        except Exception as error:
            self.probes._failed("log_handler", error)


def _stack(depth: int) -> tuple[str, ...]:
    """The caller's frames outside this library: `file:line in function`."""
    frames: list[str] = []
    frame = sys._getframe(2)
    while frame is not None and len(frames) < depth:
        filename = frame.f_code.co_filename
        if filename != _THIS_FILE and "/logging/" not in filename:
            short = "/".join(filename.rsplit("/", 2)[-2:])
            frames.append(f"{short}:{frame.f_lineno} in {frame.f_code.co_name}")
        frame = frame.f_back  # type: ignore[assignment]  # the loop ends at the outermost frame's None
    return tuple(frames)
