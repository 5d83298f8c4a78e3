"""Trace trees: an event log read back as one tree per run, with its anomalies, as text.

A run's tree follows the log's parent links: run -> input event -> actions -> durable calls
(``ctx.chat`` chats, model calls (chat rounds), tools, sub-agents) and the events the
actions sent -> ... -> outputs. An event that triggered exactly one action is printed on one
line with it (``ToolRequestEvent e0 -> _tool_call_action``).

Anomalies are flagged on their line and listed at the end: a record whose parent is not in
the log (``orphan``), a replayed durable call, a failed action, a failed call or chat, a
failed or cancelled delegation to a sub-agent, an abandoned call, an action re-entered after
a restore, and starts with no end (``unfinished``). Anomalies are computed over every run,
however many are printed; a run with an error (failed action, call, chat or delegation, tool
error) is ``failed``, one with only other anomalies ``anomalous``. A failing node's
``traceback`` (in the log's failure records) is printed under it.

The HTML page is ``_trace_html``; the OpenTelemetry export is ``_otel``.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import orjson

from ..api import mask_secrets
from ..runtime.internal import escape_controls
from ._ids import run_of

__all__ = ["TraceNode", "RunTrace", "build_traces", "render_text", "select_traces",
           "anomaly_summary"]

_PREVIEW = 100


def _json(value: Any, limit: int = _PREVIEW) -> str:
    try:
        text = orjson.dumps(value, default=repr).decode()
    except Exception:  # noqa: BLE001 - e.g. nested deeper than orjson writes (255 levels)
        try:  # a log's record nested deeper than the stack failed ``repr`` too (the command
            text = orjson.dumps(_cut(value), default=repr).decode()  # ended on it)
        except Exception:  # noqa: BLE001
            text = f"<{type(value).__name__} that cannot be shown>"
    if len(text) <= limit:
        return text
    text = mask_secrets(text)  # whole, before the cut (a log written before it was known)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _cut(value: Any, depth: int = 0) -> Any:
    """``value`` with what lies below 32 levels replaced by ``"..."`` (a preview's form)."""
    if depth >= 32:
        return "..."
    if isinstance(value, dict):
        return {str(k): _cut(v, depth + 1) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_cut(v, depth + 1) for v in value]
    return value


def _key_text(key: Any) -> str:
    return key if isinstance(key, str) else _json(key, 1000)


def _tag_text(key: Any) -> str | None:
    """The text of a tagged key's JSON form (``{"uuid": "..."}``), else ``None``."""
    if type(key) is dict and len(key) == 1:
        text = next(iter(key.values()))
        return text if isinstance(text, str) else None
    return None


def _ms(value: Any) -> str:
    if not isinstance(value, (int, float)):
        return ""
    return f"{value:.1f} ms" if value < 1000 else f"{value / 1000:.2f} s"


@dataclass
class TraceNode:
    """One run, event, action execution, durable call or output of a trace."""

    kind: str                     # run | event | action | call | output
    id: str
    parent: str | None
    start: dict[str, Any] = field(default_factory=dict)
    end: dict[str, Any] | None = None
    children: list[TraceNode] = field(default_factory=list)
    flags: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)  # the flags that are errors
    starts: int = 0               # how often it started (re-entered actions start again)

    def flag(self, text: str, error: bool = False) -> None:
        """Mark an anomaly (once); ``error``: a failure (the run counts as failed)."""
        if text not in self.flags:
            self.flags.append(text)
        if error and text not in self.errors:
            self.errors.append(text)

    @property
    def t0(self) -> float | None:
        """When it started (epoch seconds, from the log's ``ts``), if known."""
        ts = self.start.get("ts")
        return float(ts) if isinstance(ts, (int, float)) else None

    @property
    def t1(self) -> float | None:
        """When it ended (epoch seconds), if its end is in the log."""
        ts = (self.end or {}).get("ts")
        return float(ts) if isinstance(ts, (int, float)) else None

    @property
    def traceback(self) -> str | None:
        """The traceback of a failed action, call or chat, when the log has one."""
        tb = (self.end or {}).get("traceback") or self.start.get("traceback")
        return tb if isinstance(tb, str) and tb else None


@dataclass
class RunTrace:
    """The tree of one run of one key."""

    key: Any
    run: str
    root: TraceNode
    anomalies: list[tuple[TraceNode, str]] = field(default_factory=list)
    failures: int = 0             # how many of the anomalies are errors
    agent: str = ""               # the agent's name, from its log's header ("" if none)
    lineage: str = ""             # the job's token, from its log's header ("" if none)

    @property
    def status(self) -> str:
        """``"failed"`` (an error), ``"anomalous"`` (other anomalies only) or ``"ok"``."""
        if self.failures:
            return "failed"
        return "anomalous" if self.anomalies else "ok"

    def span(self) -> tuple[float | None, float | None]:
        """The run's first and last ``ts`` in the log (epoch seconds), ``None`` if none."""
        lo = hi = None
        for n in self.walk():
            for t in (n.t0, n.t1):
                if t is not None:
                    lo = t if lo is None or t < lo else lo
                    hi = t if hi is None or t > hi else hi
        return lo, hi

    def walk(self) -> Iterable[TraceNode]:
        """Every node, depth first, in log order."""
        stack = [self.root]
        while stack:
            node = stack.pop()
            yield node
            stack.extend(reversed(node.children))

    def totals(self) -> dict[str, int]:
        """Counts over the run: chat calls, tokens, tool and sub-agent calls, actions."""
        t = {"actions": 0, "chat_calls": 0, "input_tokens": 0, "output_tokens": 0,
             "tool_calls": 0, "subagent_calls": 0, "outputs": 0}
        for n in self.walk():
            if n.kind == "action":
                t["actions"] += 1
            elif n.kind == "output":
                t["outputs"] += 1
            elif n.kind == "call":
                kind = _call_kind(n)
                if kind == "chat_model":
                    t["chat_calls"] += 1
                    usage = (n.end or {}).get("usage") or {}
                    t["input_tokens"] += int(usage.get("input_tokens") or 0)
                    t["output_tokens"] += int(usage.get("output_tokens") or 0)
                elif kind == "tool":
                    t["tool_calls"] += 1
                elif kind == "subagent":
                    t["subagent_calls"] += 1
        return t


def _call_kind(n: TraceNode) -> str:
    ended = (n.end or {}).get("call_kind")
    return str(ended) if ended not in (None, "unknown") else str(
        n.start.get("call_kind", "function"))


def _keystr(key: Any) -> str:
    return orjson.dumps(key, option=orjson.OPT_SORT_KEYS, default=repr).decode()


_LISTS = ("tool_calls", "failed_tools", "refused_tools")


def _int(value: Any) -> bool:
    return type(value) is int or (type(value) is float and value.is_integer())


def _sane(rec: dict[str, Any]) -> dict[str, Any]:
    """``rec`` with the fields the trace reads by type made of their types (a damaged log).

    A ``parent`` that is not text becomes text; a ``usage`` that is not a map of whole
    numbers, a ``round`` that is not one, ``tool_calls`` or ``failed_tools`` that are not
    lists, are left out. The trace of a damaged or hand-edited line shows what it can
    instead of failing the whole command.

    Returns:
        ``rec`` itself when it is sound (the usual case), else a fixed copy.
    """
    parent, usage, round_ = rec.get("parent"), rec.get("usage"), rec.get("round")
    lists = [f for f in _LISTS if f in rec and type(rec[f]) is not list]
    if (parent is None or type(parent) is str) and (round_ is None or _int(round_)) and (
            usage is None or (type(usage) is dict and all(map(_int, usage.values())))) \
            and not lists:
        return rec
    rec = {k: v for k, v in rec.items() if k not in lists}
    if parent is not None and type(parent) is not str:
        rec["parent"] = _json(parent, 1000)
    if round_ is not None and not _int(round_):
        del rec["round"]
    if usage is not None:
        if type(usage) is dict:
            rec["usage"] = {k: int(v) for k, v in usage.items() if _int(v)}
        else:
            del rec["usage"]
    return rec


def build_traces(records: Iterable[dict[str, Any]]) -> list[RunTrace]:
    """Build one ``RunTrace`` per ``(key, run)`` in the records, in order of first appearance.

    A run's ``agent`` and ``lineage`` are those of the ``log_opened`` header read before it.
    Runs of different lineages (two jobs appending to one file) are different runs, however
    alike their keys and run ids; the attempts of one job (a restore) share its lineage.

    Returns:
        The traces.
    """
    runs: dict[tuple[str, str], TraceNode] = {}
    keys: dict[str, Any] = {}
    nodes: dict[tuple[str, str, str], TraceNode] = {}
    order: list[tuple[str, TraceNode]] = []

    def node(k: str, kind: str, ident: str, parent: str | None, rec: dict[str, Any]) -> TraceNode:
        n = nodes.get((k, kind, ident))
        if n is None:
            n = nodes[(k, kind, ident)] = TraceNode(kind, ident, parent, start=rec)
            order.append((k, n))
        return n

    def run_node(k: str, run: str) -> TraceNode:
        n = runs.get((k, run))
        if n is None:
            n = runs[(k, run)] = TraceNode("run", run, None)
        return n

    agent = lineage = ""  # the agent and the job named by the header of the log being read
    agents: dict[tuple[str, str], str] = {}
    lineages: dict[str, str] = {}
    for rec in records:
        kind = rec.get("kind")
        if kind == "log_opened":
            agent, lineage = str(rec.get("agent") or ""), str(rec.get("lineage") or "")
            continue
        if "id" not in rec:
            continue
        rec = _sane(rec)
        k = f"{lineage}\x00{_keystr(rec.get('key'))}" if lineage else _keystr(rec.get("key"))
        if k not in keys:
            keys[k], lineages[k] = rec.get("key"), lineage
        ident = str(rec["id"])
        parent = rec.get("parent")
        if kind == "run_started":
            agents.setdefault((k, ident), agent)
            r = run_node(k, ident)
            r.start, r.starts = rec, r.starts + 1
        elif kind == "run_completed":
            run_node(k, ident).end = rec
        elif kind == "event":
            n = node(k, "event", ident, parent, rec)
            n.start, n.starts = rec, n.starts + 1
        elif kind == "action_started":
            n = node(k, "action", ident, parent, rec)
            n.starts += 1
            if rec.get("reentered"):
                n.start = {**n.start, "reentered": True}
                n.end = None
        elif kind == "action_finished":
            node(k, "action", ident, parent, rec).end = rec
        elif kind == "call_started":
            n = node(k, "call", ident, parent, rec)
            n.starts += 1
            if rec.get("replayed"):  # after a restore: keep what the first start said
                n.start = {**rec, **{f: v for f, v in n.start.items() if v is not None},
                           "replayed": True}
        elif kind == "call_finished":
            n = node(k, "call", ident, parent, rec)
            if n.end is None or rec.get("status") != "abandoned":  # an outcome beats abandoned
                n.end = rec
        elif kind == "output":
            node(k, "output", ident, parent, rec)

    def parent_kind(n: TraceNode) -> str:
        if n.kind == "event":
            return "call" if n.id.endswith("/b") else "action"
        if n.kind == "action":
            return "event"
        if n.kind == "call":
            return "action"
        return "event"  # output

    for k, n in order:
        run_id = run_of(n.id)
        root = run_node(k, run_id)
        if n.parent is None:
            root.children.append(n)
            continue
        parent = nodes.get((k, parent_kind(n), n.parent))
        if parent is None:
            n.flag(f"orphan: parent {n.parent} is not in the log")
            root.children.append(n)
        else:
            parent.children.append(n)

    traces: list[RunTrace] = []
    for (k, run_id), root in runs.items():
        trace = RunTrace(key=keys.get(k), run=run_id, root=root,
                         agent=agents.get((k, run_id), agent), lineage=lineages.get(k, ""))
        _flag(trace)
        traces.append(trace)
    return traces


def _flag(trace: RunTrace) -> None:
    root = trace.root
    if not root.start:
        root.flag("run start not in the log")
    elif root.end is None:
        root.flag("unfinished run")
    for n in trace.walk():
        end = n.end or {}
        if n.kind == "action":
            if n.start.get("reentered"):
                n.flag("re-entered after a restore")
            if end.get("status") == "failed":
                n.flag(f"failed action: {end.get('error', '')}", error=True)
            elif n.end is None:
                n.flag("unfinished action")
        elif n.kind == "call":
            kind = _call_kind(n)
            if n.start.get("replayed"):
                n.flag("replayed call")
            status = end.get("status")
            if status == "failed":
                what = "delegation" if kind == "subagent" else f"{kind} call"
                n.flag(f"failed {what}: {end.get('error', '')}", error=True)
            elif status == "abandoned":
                n.flag("abandoned call (its action ended first)")
            elif kind == "subagent" and end.get("success") is False:
                word = "cancelled" if end.get("cancelled") else "failed"
                n.flag(f"{word} delegation: {end.get('error', '')}", error=True)
            elif kind == "tool" and end.get("tool_error"):
                n.flag(f"tool error: {end['tool_error']}", error=True)
            elif n.end is None and not n.start.get("replayed"):
                n.flag("unfinished call")
        elif n.kind == "event" and n.start.get("error"):
            n.flag(f"failed chat: {n.start['error']}", error=True)
        elif n.kind == "event" and n.start.get("refused_tools"):
            for refused in n.start["refused_tools"]:
                n.flag(f"refused tool call: {refused}", error=True)
        for f in n.flags:
            trace.anomalies.append((n, f))
        trace.failures += len(n.errors)


def select_traces(traces: list[RunTrace], key: str | None = None, run: str | None = None,
                  status: str | None = None) -> list[RunTrace]:
    """The traces matching every filter given.

    Args:
        traces: the runs.
        key: a key's text, or its JSON form (of a tagged key, ``{"uuid":"..."}``, or the
            tag's text alone).
        run: a run id of each key (``r3``).
        status: ``"failed"`` (runs with an error) or ``"anomalous"`` (runs with any
            anomaly, failures included).

    Returns:
        The matching traces, in their order.

    Raises:
        ValueError: for another ``status``.
    """
    if status not in (None, "failed", "anomalous"):
        raise ValueError(f"status must be 'failed' or 'anomalous', not {status!r}")
    out = []
    for t in traces:
        if key is not None and key not in (_key_text(t.key), _keystr(t.key), _tag_text(t.key)):
            continue
        if run is not None and t.run != run:
            continue
        if status == "failed" and not t.failures or status == "anomalous" and not t.anomalies:
            continue
        out.append(t)
    return out


# -- labels --------------------------------------------------------------------------------
def _rel(n: TraceNode) -> str:
    if n.parent and n.id.startswith(n.parent + "/"):
        return n.id[len(n.parent) + 1:]
    return n.id


def _label(n: TraceNode, trace: RunTrace) -> str:
    s, e = n.start, n.end or {}
    if n.kind == "run":
        t = trace.totals()
        parts = [f"run {n.id}", f"key {_key_text(trace.key)}"]
        if e:
            if e.get("duration_ms") is not None:
                parts.append(f"completed in {_ms(e['duration_ms'])}")
            elif isinstance(s.get("ts"), (int, float)) and isinstance(e.get("ts"), (int, float)):
                wall = _ms((e["ts"] - s["ts"]) * 1000.0)
                parts.append(f"completed {wall} after its start (across a restore)")
            else:
                parts.append("completed")
        parts.append(f"[actions {t['actions']}, chat calls {t['chat_calls']} "
                     f"(tokens {t['input_tokens']} in / {t['output_tokens']} out), "
                     f"tool calls {t['tool_calls']}, sub-agent calls {t['subagent_calls']}, "
                     f"outputs {t['outputs']}]")
        return "  ".join(parts)
    if n.kind == "event":
        etype = s.get("type", "?")
        if etype == "InputEvent" and n.parent is None:
            return f"input {n.id}: {_json((s.get('data') or {}).get('input'))}"
        bits = [f"{etype} {_rel(n)}"]
        if etype == "ChatRequestEvent" and s.get("model"):
            bits.append(f"model={s['model']}")
        if etype == "ToolRequestEvent" and s.get("tool_calls"):
            bits.append("tools: " + ", ".join(map(str, s["tool_calls"])))
        if etype == "ToolResponseEvent" and s.get("failed_tools"):
            bits.append("failed: " + ", ".join(map(str, s["failed_tools"])))
        if etype == "OutputEvent" and not any(c.kind == "output" for c in n.children):
            if "/b/" in n.id:
                bits.append("(collected by its sub-agent call)")
            if s.get("data"):
                bits.append(_json((s.get("data") or {}).get("output")))
        return "  ".join(bits)
    if n.kind == "output":
        return f"output: {_json(s.get('output'))}"
    if n.kind == "action":
        bits = [f"{s.get('action') or e.get('action') or _rel(n)}"]
        if e.get("duration_ms") is not None:
            bits.append(_ms(e["duration_ms"]))
        return "  ".join(bits)
    # calls
    kind = _call_kind(n)
    name = e.get("name") or s.get("name") or e.get("tool") or ""
    dur = _ms(e.get("duration_ms"))
    status = e.get("status") or ("replayed" if s.get("replayed") else "...")
    if kind == "chat_model":
        rnd = s.get("round") or e.get("round")
        model = s.get("model") or e.get("model") or e.get("provider_model") or "?"
        bits = [f"chat call{' #' + str(rnd) if rnd else ''} {model} ({_rel(n)})", dur]
        usage = e.get("usage")
        if usage:
            bits.append(f"tokens {usage.get('input_tokens', 0)} in / "
                        f"{usage.get('output_tokens', 0)} out")
        if e.get("tool_calls"):
            bits.append("-> tools: " + ", ".join(map(str, e["tool_calls"])))
        elif status == "ok":
            bits.append(f"-> answer ({e.get('finish_reason') or 'stop'})")
        elif status != "ok":
            bits.append(status)
        return "  ".join(b for b in bits if b)
    title = {"chat": "chat", "tool": "tool", "subagent": "sub-agent",
             "function": "call"}.get(kind, "call")
    if kind == "function":
        name = s.get("function") or name
    ok = status
    if kind == "subagent" and e.get("success") is False:
        ok = "cancelled" if e.get("cancelled") else "failed"
    if kind == "tool" and e.get("tool_error"):
        ok = "error"
    return "  ".join(b for b in [f"{title} {name} ({_rel(n)})", dur, ok] if b)


def _folded(n: TraceNode) -> TraceNode | None:
    """The single action (or output) under an event, when the event has nothing else."""
    if n.kind == "event" and len(n.children) == 1 and n.children[0].kind in ("action", "output") \
            and not n.flags:
        return n.children[0]
    return None


def _line(n: TraceNode, trace: RunTrace) -> tuple[str, list[str], list[TraceNode]]:
    """A node's text, flags and children, folding an event into its only action."""
    action = _folded(n)
    if action is None:
        return _label(n, trace), n.flags, n.children
    return (f"{_label(n, trace)} -> {_label(action, trace)}", action.flags, action.children)


# -- text ----------------------------------------------------------------------------------
ANOMALY_LINES = 200
"""The most anomalies ``render_text`` lists one per line (the count covers all of them)."""


def _shown(n: TraceNode) -> TraceNode:
    """The node whose flags, traceback and children a line shows (the folded action)."""
    return _folded(n) or n


def anomaly_summary(traces: list[RunTrace]) -> str:
    """``"3 anomalies in 2 of 3000 runs, 1 run failed"``, or ``"no anomalies in 3000 runs"``."""
    count = sum(len(t.anomalies) for t in traces)
    runs = sum(1 for t in traces if t.anomalies)
    failed = sum(1 for t in traces if t.failures)
    if not count:
        return f"no anomalies in {_n(len(traces), 'run')}"
    return (f"{_n(count, 'anomaly', 'anomalies')} in {runs} of {_n(len(traces), 'run')}, "
            f"{_n(failed, 'run')} failed")


def _n(count: int, one: str, many: str | None = None) -> str:
    return f"{count} {one if count == 1 else (many or one + 's')}"


def render_text(traces: list[RunTrace], limit: int | None = None) -> str:
    r"""The first ``limit`` traces (all: ``None``) as indented trees, then the anomalies.

    Known secrets are masked (``api.mask_secrets``). Every line is terminal-safe: control
    characters (ESC, BEL, CR, other C0 and C1), bidirectional overrides and other format
    characters in keys, outputs, errors and tracebacks are written as visible escapes
    (``\x1b``, ``\u202e``; ``escape_controls``).
    A run's line names its job (``job <lineage>``) when ``traces`` hold runs of several jobs.
    Anomalies are listed for every trace, shown or not (at most ``ANOMALY_LINES`` lines,
    with the total), each with the run's position (``#84``) in ``traces``. A failing
    node's traceback is printed under it.

    Args:
        traces: the runs, e.g. from ``build_traces``.
        limit: how many trees to print; ``None`` or ``<= 0``: all.

    Returns:
        The text, ending in a newline.
    """
    shown = traces if limit is None or limit <= 0 else traces[:limit]
    out: list[str] = []
    jobs = len({t.lineage for t in traces}) > 1  # jobs appended to one file: say whose run

    def emit(root: TraceNode, trace: RunTrace) -> None:
        # depth first with a stack, not recursion: a run may nest deeper than Python's
        # recursion limit (an event chain of up to ``EventChainLimitError.LIMIT`` actions)
        stack: list[tuple[TraceNode, str, bool, bool]] = [(root, "", True, True)]
        while stack:
            n, prefix, last, top = stack.pop()
            text, flags, children = _line(n, trace)
            marks = "".join(f"  !! {f}" for f in flags)
            if top:
                job = f"job {escape_controls(trace.lineage)}  " if jobs else ""
                out.append(job + text + marks)
                child_prefix = ""
            else:
                out.append(prefix + ("└─ " if last else "├─ ") + text + marks)
                child_prefix = prefix + ("   " if last else "│  ")
            tb = _shown(n).traceback
            if tb:
                bar = child_prefix + ("│  " if children else "   ") + "┆ "
                # lines end at "\n" only: other breaks (CR, VT, FF, U+2028...) are escaped
                out.extend(bar + ln.removesuffix("\r")
                           for ln in tb.rstrip("\r\n").split("\n"))
            stack.extend((c, child_prefix, i == len(children) - 1, False)
                         for i, c in reversed(list(enumerate(children))))

    for trace in shown:
        emit(trace.root, trace)
        out.append("")
    if len(shown) < len(traces):
        out.append(f"runs: {len(shown)} shown of {len(traces)} (others: --limit 0, --key, "
                   "--run, --failed, --anomalous, or --html for all)")
    else:
        out.append(f"runs: {len(traces)} shown of {len(traces)}")
    total = [(i, trace, n, f) for i, trace in enumerate(traces, 1) for n, f in trace.anomalies]
    if total:
        out.append(f"anomalies ({len(total)}): {anomaly_summary(traces)}")
        for i, trace, n, f in total[:ANOMALY_LINES]:
            where = "" if i <= len(shown) else " (run not shown)"
            out.append(f"  #{i} key {_key_text(trace.key)} {n.kind} {n.id}: {f}{where}")
        if len(total) > ANOMALY_LINES:
            out.append(f"  ... and {len(total) - ANOMALY_LINES} more (--anomalous, --failed "
                       "or --html lists them all)")
    else:
        out.append("anomalies: none")
    # Keys, outputs, errors and tracebacks come from records and models: every line is
    # written with its control and bidi characters escaped (no terminal escape sequences);
    # known secrets masked on top of the log's own masking (a log written before a secret
    # was known), as the OpenTelemetry spans are
    return "\n".join(escape_controls(mask_secrets(ln)) for ln in out) + "\n"
