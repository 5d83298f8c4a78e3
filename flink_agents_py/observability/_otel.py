"""OpenTelemetry export of trace trees: runs, actions, chat, tool and sub-agent calls as spans.

Off by default; needs the ``otel`` extra (``opentelemetry-sdk``, and for ``--otlp`` the
OTLP/HTTP exporter). Two ways:

- ``export_otel(traces, exporter)`` (``flink-agents-py trace LOG --otlp ENDPOINT``): a
  finished event log, read back, sent once;
- ``OtelSink``: an ``EventLogSink`` that turns each run into spans when it completes, live,
  on the local runner and on Flink (``event_log=EventLog(sink=OtelSink(endpoint=...))``).

One trace per run. Spans follow the GenAI semantic conventions (Development status, as of
semantic-conventions 1.3x) where they apply: the run is ``invoke_agent {agent}``, an action
execution ``action {name}``, a model call (one chat round) ``chat {model}`` (kind
``CLIENT``, ``gen_ai.request.model``, ``gen_ai.usage.*``, ...), a tool call ``execute_tool
{tool}``, a sub-agent call ``invoke_agent {sub-agent}``, a ``ctx.chat`` chat ``ctx.chat
{model setup}``, another durable call ``call {name}`` (the table in
``docs/how-to/observability.md`` lists the attributes).

Spans nest as the trace's tree: an action triggered by an event is a child of the action
(or call) that sent the event, and may end after it (asynchronous work). Events and outputs
become span events of the span above them. Failures set the span status
to ``ERROR`` with ``error.type`` and an ``exception`` event (``exception.stacktrace``: the
log's traceback); a run with failures has status ``ERROR`` too. Every text a span carries is
masked (``api.mask_secrets``) on top of the event log's own masking. Anomalies are in
``flink_agents.anomalies``; a run that ran again after a restore has
``flink_agents.replayed``. Times are the log's ``ts``. Trace and span ids derive from the
job's lineage (the log's header), the agent, the key and the run (``_span_ids``): a run
sent again, live after a restore or by sending its log again, keeps them.
"""

from __future__ import annotations

import copy
import logging
import re
import secrets
import threading
import time
from collections.abc import Iterable, Sequence
from typing import Any

from ..api import AgentsError
from ..api.internal import mask_secrets, mask_value
from ._event_log import EventLogSink
from ._ids import run_of
from ._otlp import OTEL_HINT as _HINT
from ._otlp import otlp_exporter, register_environment_headers, traces_url
from ._span_ids import RunIds, node_span_id, run_trace_id
from ._trace import RunTrace, TraceNode, _call_kind, _key_text, _keystr, build_traces

__all__ = ["export_otel", "OtelSink", "OtelExportError", "otlp_exporter", "spans_of"]

_now = time.monotonic
"""The clock ``_Delivery`` times exports with (a test replaces it)."""

log = logging.getLogger("flink_agents_py.observability")


class OtelExportError(AgentsError):
    """Spans that did not reach the OpenTelemetry endpoint (no receiver, refused, timed out).

    Attributes:
        delivered: spans the exporter reported delivered.
        total: spans built.
        reason: the exporter's last complaint (e.g. ``Connection refused``), or ``""``.
    """

    def __init__(self, delivered: int, total: int, reason: str = "") -> None:
        self.delivered, self.total, self.reason = delivered, total, reason
        super().__init__(f"delivered {delivered} of {total} spans"
                         + (f": {reason}" if reason else ""))


class _Delivery:
    """A span exporter around another that counts what it delivered (``SUCCESS``) and not.

    The SDK's batch processor drops an export's result; this keeps it. The exporter's own
    warnings (the OTLP exporter logs a refused connection instead of raising) are caught
    as ``reason`` while it runs, so the caller reports one clear line.

    An export that failed after the exporter retried for a while (at least ``SLOW_S``: no
    receiver listening, timeouts, a receiver answering 503) means the receiver is down: the
    batches of the next ``COOLDOWN_S`` fail at once, unsent (counted undelivered), instead of
    each retrying for about 6 s. Else the batch processor's flush when the sink closes (and
    ``trace --otlp``), which sends every queued batch one after the other and ignores its
    timeout, held the job's end for minutes (6 s per 512 spans). A failure the exporter
    reports at once (a refused batch, 400) does not stop the next batches.
    """

    SLOW_S = 1.0
    COOLDOWN_S = 10.0

    def __init__(self, inner: Any) -> None:
        register_environment_headers()  # whatever the exporter: OTLP ones send them
        self.inner = inner
        self.delivered = 0
        self.failed = 0
        self.reason = ""
        self._lock = threading.Lock()
        self._down_until: float | None = None

    def export(self, spans: Sequence[Any]) -> Any:
        from opentelemetry.sdk.trace.export import SpanExportResult

        with self._lock:
            if self._down_until is not None and _now() < self._down_until:
                self.failed += len(spans)  # the receiver is down: not sent (see above)
                return SpanExportResult.FAILURE
        catcher = _Complaints()
        otel_log = logging.getLogger("opentelemetry")
        otel_log.addHandler(catcher)
        started = _now()
        try:
            result = self.inner.export(spans)
        except Exception as e:  # noqa: BLE001 - an exporter that raises delivered nothing
            result, catcher.last = SpanExportResult.FAILURE, f"{type(e).__name__}: {e}"
        finally:
            otel_log.removeHandler(catcher)
        ended = _now()
        with self._lock:
            if result is SpanExportResult.SUCCESS:
                self.delivered += len(spans)
                self._down_until = None
            else:
                self.failed += len(spans)
                self.reason = catcher.last or self.reason or f"the exporter returned {result}"
                if ended - started >= self.SLOW_S:
                    self._down_until = ended + self.COOLDOWN_S
        return result

    def shutdown(self) -> None:
        self.inner.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        flush = getattr(self.inner, "force_flush", None)
        return bool(flush(timeout_millis)) if flush is not None else True


class _Complaints(logging.Handler):
    """Keeps the first warning an exporter logged during one export: its root cause.

    (The OTLP exporter retries and ends with a generic "max retries" line; the first one
    names the cause: ``Connection refused``, a status code.)
    """

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.last = ""

    def emit(self, record: logging.LogRecord) -> None:
        if not self.last:
            self.last = _reason(record.getMessage())


_OS_ERROR = re.compile(r"\[Errno -?\d+\] ([^\"')]+)")


def _reason(message: str) -> str:
    """The OS's words for a failed connection when ``message`` holds them, else it, bounded."""
    found = _OS_ERROR.search(message)
    text = mask_secrets(found.group(1).strip() if found else message.strip())  # then cut
    return text if len(text) <= 300 else text[:297] + "..."


def _sdk() -> Any:
    try:
        from opentelemetry.sdk import trace as sdk_trace
    except ImportError as e:
        raise ImportError(f"the OpenTelemetry export needs opentelemetry-sdk: {_HINT}") from e
    return sdk_trace


def _ns(t: float | None) -> int | None:
    return None if t is None else int(round(t * 1e9))


def _error_type(text: str) -> str:
    head = text.split(":", 1)[0].strip()
    return head if head.isidentifier() else "error"


def _plain(value: Any) -> Any:
    return value if isinstance(value, (str, bool, int, float)) else str(value)


def spans_of(trace: RunTrace, agent_name: str = "agent") -> list[dict[str, Any]]:
    """The spans of one run as plain data (what ``export_otel`` sends).

    Args:
        trace: the run.
        agent_name: ``gen_ai.agent.name`` of the run span.

    Returns:
        Spans parents first: ``{"node", "parent" (index or None), "name", "kind"
        ("internal"/"client"), "start"/"end" (epoch ns), "attributes", "events": [(name,
        ns, attributes)], "error": (type, message, traceback) or None}``.
    """
    lo, hi = trace.span()
    out: list[dict[str, Any]] = []
    key = _key_text(trace.key)

    # depth first with a stack, not recursion: a run may nest deeper than Python's
    # recursion limit (an event chain of up to ``EventChainLimitError.LIMIT`` actions)
    stack: list[tuple[TraceNode, int | None]] = [(trace.root, None)]
    while stack:
        n, parent = stack.pop()
        spec = _span_spec(n, trace, key, agent_name)
        if spec is None:  # an event or output: a span event of the span above it
            if parent is not None:
                s = n.start
                name = "output" if n.kind == "output" else str(s.get("type", "event"))
                attrs: dict[str, Any] = {"flink_agents.id": n.id}
                if s.get("error"):
                    attrs["flink_agents.error"] = str(s["error"])
                if n.flags:  # a refused tool call has no span of its own: its event says so
                    attrs["flink_agents.anomalies"] = list(n.flags)
                out[parent]["events"].append((name, _ns(n.t0) or out[parent]["start"],
                                              attrs))
            stack.extend((c, parent) for c in reversed(n.children))
            continue
        start = n.t0 if n.t0 is not None else lo
        end = n.t1
        if end is None:
            end = start if n.start.get("replayed") else hi
            if not n.start.get("replayed"):
                spec["attributes"]["flink_agents.unfinished"] = True
        spec.update(node=n, parent=parent, start=_ns(start), end=_ns(end), events=[])
        if n.flags:
            spec["attributes"]["flink_agents.anomalies"] = list(n.flags)
        out.append(spec)
        index = len(out) - 1
        stack.extend((c, index) for c in reversed(n.children))
    return out


def _span_spec(n: TraceNode, trace: RunTrace, key: str, agent: str) -> dict[str, Any] | None:
    s, e = n.start, n.end or {}
    attrs: dict[str, Any] = {"flink_agents.key": key, "flink_agents.id": n.id}
    error = None
    kind = "internal"
    if n.kind == "run":
        t = trace.totals()
        name = f"invoke_agent {agent}"
        attrs.update({"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": agent,
                      "flink_agents.run": trace.run, "flink_agents.status": trace.status,
                      "flink_agents.actions": t["actions"],
                      "flink_agents.outputs": t["outputs"]})
        if trace.failures:
            error = f"{trace.failures} failure(s) in the run"
        if any(x.start.get("replayed") or x.start.get("reentered") for x in trace.walk()):
            attrs["flink_agents.replayed"] = True
    elif n.kind == "action":
        action = s.get("action") or e.get("action") or n.id
        name = f"action {action}"
        attrs["flink_agents.action"] = action
        if s.get("reentered"):
            attrs["flink_agents.reentered"] = True
        if e.get("status") == "failed":
            error = str(e.get("error") or "failed")
    elif n.kind == "call":
        call_kind = _call_kind(n)
        attrs["flink_agents.call_kind"] = call_kind
        if s.get("replayed"):
            attrs["flink_agents.replayed"] = True
        cname = e.get("name") or s.get("name") or e.get("tool") or ""
        if call_kind == "chat_model":
            model = e.get("provider_model") or s.get("model") or e.get("model") or cname
            name, kind = f"chat {model}", "client"
            attrs.update({"gen_ai.operation.name": "chat", "gen_ai.request.model": model,
                          "flink_agents.model_setup": s.get("model") or e.get("model") or ""})
            if e.get("provider_model"):
                attrs["gen_ai.response.model"] = e["provider_model"]
            usage = e.get("usage") or {}
            if usage:
                attrs["gen_ai.usage.input_tokens"] = int(usage.get("input_tokens") or 0)
                attrs["gen_ai.usage.output_tokens"] = int(usage.get("output_tokens") or 0)
            if e.get("finish_reason"):
                attrs["gen_ai.response.finish_reasons"] = [str(e["finish_reason"])]
            chat = s.get("chat") or e.get("chat")
            if chat:
                attrs["gen_ai.conversation.id"] = f"{key}/{chat}"
            round_ = s.get("round") or e.get("round")
            if round_:
                attrs["flink_agents.round"] = int(round_)
            if e.get("tool_calls"):
                attrs["flink_agents.tool_calls"] = [str(c) for c in e["tool_calls"]]
        elif call_kind == "tool":
            tool = e.get("tool") or cname or "tool"
            name = f"execute_tool {tool}"
            attrs.update({"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": tool,
                          "gen_ai.tool.type": "function"})
            if e.get("tool_error"):
                error = str(e["tool_error"])
        elif call_kind == "subagent":
            name = f"invoke_agent {cname}"
            attrs.update({"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": cname})
            if e.get("success") is False:
                error = str(e.get("error") or ("cancelled" if e.get("cancelled") else "failed"))
        elif call_kind == "chat":
            name = f"ctx.chat {cname}"
            attrs["flink_agents.model_setup"] = cname
        else:
            fn = s.get("function") or cname
            name = f"call {fn}"
            attrs["flink_agents.function"] = str(fn)
        if e.get("status") == "failed":
            error = str(e.get("error") or "failed")
        elif e.get("status") == "abandoned":
            attrs["flink_agents.abandoned"] = True
    else:
        return None
    return {"name": name, "kind": kind,
            "attributes": {k: _plain(v) if not isinstance(v, list) else v
                           for k, v in attrs.items()},
            "error": None if error is None else (_error_type(error), error, n.traceback)}


def export_otel(traces: Iterable[RunTrace], exporter: Any, *,
                service_name: str = "flink-agents-py", agent_name: str | None = None) -> int:
    """Send ``traces`` as OpenTelemetry spans through ``exporter``, then shut it down.

    Delivery is checked: every batch the exporter did not report delivered (no receiver
    listening, a refused or failed request, a timeout) is counted, and any such span fails
    the call.

    Args:
        traces: the runs (e.g. ``build_traces(read_event_log(paths))``).
        exporter: an OpenTelemetry ``SpanExporter`` (``otlp_exporter(url)``, or the SDK's
            ``InMemorySpanExporter`` in a test).
        service_name: the ``service.name`` resource attribute.
        agent_name: ``gen_ai.agent.name`` of the run spans, and the run span's name
            (``invoke_agent {agent_name}``); default: the agent class named in each run's
            event log (``"agent"`` for a log that names none).

    Returns:
        How many spans were delivered (all of them).

    Raises:
        ImportError: when opentelemetry-sdk is not installed (names the extra).
        OtelExportError: when some spans were not delivered (with how many were, of how
            many, and the exporter's reason).
    """
    traces = list(traces)
    agents = [agent_name or t.agent or "agent" for t in traces]
    specs = [spans_of(t, a) for t, a in zip(traces, agents, strict=True)]
    total = sum(len(s) for s in specs)
    delivery = _Delivery(exporter)
    emitter = _Emitter(delivery, service_name, queue=max(2048, total))
    try:
        for t, a, spans in zip(traces, agents, specs, strict=True):
            emitter.emit(spans, _identity(t.lineage, a, t) if t.lineage else None)
    finally:
        emitter.close()
    if delivery.delivered < total:
        raise OtelExportError(delivery.delivered, total, delivery.reason)
    return delivery.delivered


class _Emitter:
    """A tracer provider of its own (never the global one) with a batch processor."""

    def __init__(self, exporter: Any, service_name: str, queue: int = 2048) -> None:
        sdk_trace = _sdk()
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace.export import BatchSpanProcessor

        self.ids = RunIds()
        self.provider = sdk_trace.TracerProvider(
            resource=Resource.create({"service.name": service_name}), id_generator=self.ids)
        self.provider.add_span_processor(BatchSpanProcessor(exporter, max_queue_size=queue))
        self.tracer = self.provider.get_tracer("flink_agents_py.observability")

    def emit(self, spans: list[dict[str, Any]], run: str | None = None) -> None:
        """Start and end ``spans`` (ids derived from ``run``, the run's identity, if given)."""
        from opentelemetry import trace as api
        from opentelemetry.trace import SpanKind, Status, StatusCode

        live: list[Any] = []
        trace_id = run_trace_id(run) if run is not None else None
        for spec in spans:
            if trace_id is not None:
                node = spec["node"]
                self.ids.next(trace_id, node_span_id(trace_id, node.kind, node.id))
            parent = spec["parent"]
            ctx = api.set_span_in_context(live[parent]) if parent is not None else None
            span = self.tracer.start_span(
                mask_secrets(spec["name"]), context=ctx, start_time=spec["start"],
                kind=SpanKind.CLIENT if spec["kind"] == "client" else SpanKind.INTERNAL,
                attributes=mask_value(spec["attributes"]))
            live.append(span)
        for spec, span in zip(spans, live, strict=True):
            for name, ts, attrs in spec["events"]:
                span.add_event(name, mask_value(attrs), timestamp=ts)
            if spec["error"] is not None:
                etype, message, tb = mask_value(list(spec["error"]))
                span.set_status(Status(StatusCode.ERROR, message))
                if spec["node"].kind == "run":  # the failures are on the spans below
                    continue
                span.set_attribute("error.type", etype)
                attrs = {"exception.type": etype, "exception.message": message}
                if tb:
                    attrs["exception.stacktrace"] = tb
                span.add_event("exception", attrs, timestamp=spec["end"])
        for spec, span in reversed(list(zip(spans, live, strict=True))):
            span.end(end_time=spec["end"])

    def close(self) -> None:
        self.provider.force_flush()
        self.provider.shutdown()


def _identity(job: str, agent: str, trace: RunTrace) -> str:
    """What a run's trace and span ids derive from: the job, the agent, the key, the run."""
    return f"{job}|{agent}|{_keystr(trace.key)}|{trace.run}"


class OtelSink(EventLogSink):
    """An event log sink that sends each run as OpenTelemetry spans when it completes.

    Use it as the event log of a job (``event_log=EventLog(sink=OtelSink(...))``), on the
    local runner or on Flink (each subtask opens its own copy). Records are kept per run
    until its ``run_completed`` record arrives (a run's sub-agent calls included), then the
    run's spans are built as ``export_otel`` builds them and handed to a batch processor;
    ``close`` sends the runs still open (marked unfinished).

    Args:
        endpoint: an OTLP/HTTP endpoint (``http://localhost:4318``); or give ``exporter``.
        exporter: a ``SpanExporter`` (used as is; not pickled to Flink workers, so give an
            ``endpoint`` there).
        service_name: the ``service.name`` resource attribute.
        agent_name: ``gen_ai.agent.name`` of run spans and the run span's name (default:
            the agent's class name, from the event log's header).
        forward: another sink that also gets every record (e.g. a ``FileSink``), or ``None``.
        headers: extra HTTP headers for the OTLP endpoint.
        max_queue_size: spans waiting to be sent, at most; more are dropped (the SDK's
            batch processor, which sends every 5 s or 512 spans).
        job_id: the job in the trace and span ids (which derive from it, the agent, the
            key, the run and the span's node, so a run sent again after a restore keeps
            them). Default: the job's lineage from the log's header, which its attempts
            and restores share (a token drawn here for a host that writes none).

    Delivery is counted (``delivered``, ``undelivered``); spans that did not reach the
    endpoint (no receiver, refused, timed out, dropped from a full queue) are reported in
    one WARNING on ``close``, with the exporter's reason.

    Raises:
        ValueError: without an endpoint or an exporter, or with both.
    """

    def __init__(self, endpoint: str | None = None, *, exporter: Any = None,
                 service_name: str = "flink-agents-py", agent_name: str | None = None,
                 forward: EventLogSink | None = None,
                 headers: dict[str, str] | None = None, max_queue_size: int = 65536,
                 job_id: str | None = None) -> None:
        if (endpoint is None) == (exporter is None):
            raise ValueError("give OtelSink an endpoint or an exporter (one of them)")
        if endpoint is not None:
            traces_url(endpoint)
        self.endpoint = endpoint
        self.exporter = exporter
        self.service_name = service_name
        self.agent_name = agent_name
        self.forward = forward
        self.headers = headers
        self.max_queue_size = max_queue_size
        self.job_id = job_id
        self._lineage = secrets.token_hex(8)  # the job's own, from the log's header, once read
        self._runs: dict[tuple[str, str], list[dict[str, Any]]] = {}
        self._emitter: _Emitter | None = None
        self._lock: threading.Lock | None = None
        self._delivery: _Delivery | None = None
        self._agent = ""
        self._built = 0

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state.update(exporter=None, _runs={}, _emitter=None, _lock=None, _delivery=None,
                     _built=0)
        return state

    @property
    def delivered(self) -> int:
        """Spans the exporter reported delivered so far (of this opened copy)."""
        return self._delivery.delivered if self._delivery is not None else 0

    @property
    def undelivered(self) -> int:
        """Spans built but not (yet) reported delivered: failed, dropped or still queued."""
        return self._built - self.delivered

    def open(self, subtask: int | None = None, attempt: int | None = None) -> OtelSink:
        """A copy with its own tracer provider and exporter (one per Flink subtask)."""
        exporter = self.exporter if self.exporter is not None else otlp_exporter(
            str(self.endpoint), self.headers)
        sink = copy.copy(self)  # (through __getstate__: no runs, no emitter)
        sink.exporter = exporter
        sink.forward = self.forward.open(subtask, attempt) if self.forward else None
        sink._delivery = _Delivery(exporter)
        sink._emitter = _Emitter(sink._delivery, self.service_name,
                                 queue=self.max_queue_size)
        sink._lock = threading.Lock()
        return sink

    def write(self, record: dict[str, Any]) -> None:
        """Keep ``record`` with its run; send the run's spans when it is ``run_completed``.

        Raises:
            RuntimeError: when the sink was not opened.
        """
        if self.forward is not None:
            self.forward.write(record)
        if self._emitter is None or self._lock is None:
            raise RuntimeError("OtelSink.write before open()")
        if record.get("kind") == "log_opened":
            self._agent = str(record.get("agent") or "")
            self._lineage = str(record.get("lineage") or "")
            return
        if "id" not in record:
            return
        run_key = (_keystr(record.get("key")), run_of(str(record["id"])))
        with self._lock:
            self._runs.setdefault(run_key, []).append(record)
            done = self._runs.pop(run_key) if record.get("kind") == "run_completed" else None
        if done is not None:
            self._send(done)

    def _send(self, records: list[dict[str, Any]]) -> None:
        assert self._emitter is not None
        for trace in build_traces(records):
            agent = self.agent_name or self._agent or "agent"
            spans = spans_of(trace, agent)
            self._built += len(spans)
            self._emitter.emit(spans, _identity(self.job_id or self._lineage, agent, trace))

    def flush(self) -> None:
        """Flush the forwarded sink and send the spans waiting in the batch processor."""
        if self.forward is not None:
            self.forward.flush()
        if self._emitter is not None:
            self._emitter.provider.force_flush()

    def close(self) -> None:
        """Send the open runs (unfinished), close the provider, then ``forward``."""
        if self._emitter is not None and self._lock is not None:
            with self._lock:
                left, self._runs = list(self._runs.values()), {}
            for records in left:
                self._send(records)
            self._emitter.close()
            self._emitter = None
            if self.undelivered:
                reason = self._delivery.reason if self._delivery is not None else ""
                log.warning("OtelSink: %d of %d spans were not delivered to %s%s",
                            self.undelivered, self._built, self.endpoint or "the exporter",
                            f": {reason}" if reason else "")
        if self.forward is not None:  # last: failing to close (a full disk), it loses no span
            self.forward.close()
