"""Trace trees: an event log read back as one tree per run, rendered as text or HTML.

A run's tree follows the log's parent links: run -> input event -> actions -> durable calls
(``ctx.chat`` chats, model calls (chat rounds), tools, sub-agents) and the events the
actions sent -> ... -> outputs. An event that triggered exactly one action is printed on one
line with it (``ToolRequestEvent e0 -> _tool_call_action``).

Anomalies are flagged on their line and listed at the end: a record whose parent is not in
the log (``orphan``), a replayed durable call, a failed action, a failed call or chat, a
failed or cancelled delegation to a sub-agent, an abandoned call, an action re-entered after
a restore, and starts with no end (``unfinished``).
"""

from __future__ import annotations

import html
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import orjson

from ._ids import run_of

__all__ = ["TraceNode", "RunTrace", "build_traces", "render_text", "render_html",
           "select_traces"]

_PREVIEW = 100


def _json(value: Any, limit: int = _PREVIEW) -> str:
    try:
        text = orjson.dumps(value, default=repr).decode()
    except Exception:  # noqa: BLE001
        text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _key_text(key: Any) -> str:
    return key if isinstance(key, str) else _json(key, 1000)


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
    starts: int = 0               # how often it started (re-entered actions start again)

    def flag(self, text: str) -> None:
        """Mark an anomaly (once)."""
        if text not in self.flags:
            self.flags.append(text)


@dataclass
class RunTrace:
    """The tree of one run of one key."""

    key: Any
    run: str
    root: TraceNode
    anomalies: list[tuple[TraceNode, str]] = field(default_factory=list)

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
    return (n.end or {}).get("call_kind") if (n.end or {}).get("call_kind") not in (
        None, "unknown") else n.start.get("call_kind", "function")


def _keystr(key: Any) -> str:
    return orjson.dumps(key, option=orjson.OPT_SORT_KEYS, default=repr).decode()


def build_traces(records: Iterable[dict[str, Any]]) -> list[RunTrace]:
    """Build one ``RunTrace`` per ``(key, run)`` in the records, in order of first appearance."""
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

    for rec in records:
        kind = rec.get("kind")
        if kind == "log_opened" or "id" not in rec:
            continue
        k = _keystr(rec.get("key"))
        keys.setdefault(k, rec.get("key"))
        ident = str(rec["id"])
        parent = rec.get("parent")
        if kind == "run_started":
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
        trace = RunTrace(key=keys.get(k), run=run_id, root=root)
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
                n.flag(f"failed action: {end.get('error', '')}")
            elif n.end is None:
                n.flag("unfinished action")
        elif n.kind == "call":
            kind = _call_kind(n)
            if n.start.get("replayed"):
                n.flag("replayed call")
            status = end.get("status")
            if status == "failed":
                what = "delegation" if kind == "subagent" else f"{kind} call"
                n.flag(f"failed {what}: {end.get('error', '')}")
            elif status == "abandoned":
                n.flag("abandoned call (its action ended first)")
            elif kind == "subagent" and end.get("success") is False:
                word = "cancelled" if end.get("cancelled") else "failed"
                n.flag(f"{word} delegation: {end.get('error', '')}")
            elif kind == "tool" and end.get("tool_error"):
                n.flag(f"tool error: {end['tool_error']}")
            elif n.end is None and not n.start.get("replayed"):
                n.flag("unfinished call")
        elif n.kind == "event" and n.start.get("error"):
            n.flag(f"failed chat: {n.start['error']}")
        for f in n.flags:
            trace.anomalies.append((n, f))


def select_traces(traces: list[RunTrace], key: str | None = None,
                  run: str | None = None) -> list[RunTrace]:
    """The traces of ``key`` (its text, or its JSON form) and/or ``run`` (``r3``)."""
    out = []
    for t in traces:
        if key is not None and key not in (_key_text(t.key), _keystr(t.key)):
            continue
        if run is not None and t.run != run:
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
def render_text(traces: list[RunTrace]) -> str:
    """The traces as indented trees, then the anomalies."""
    out: list[str] = []

    def emit(n: TraceNode, prefix: str, last: bool, top: bool, trace: RunTrace) -> None:
        text, flags, children = _line(n, trace)
        marks = "".join(f"  !! {f}" for f in flags)
        if top:
            out.append(text + marks)
            child_prefix = ""
        else:
            out.append(prefix + ("└─ " if last else "├─ ") + text + marks)
            child_prefix = prefix + ("   " if last else "│  ")
        for i, c in enumerate(children):
            emit(c, child_prefix, i == len(children) - 1, False, trace)

    total: list[tuple[RunTrace, TraceNode, str]] = []
    for trace in traces:
        emit(trace.root, "", True, True, trace)
        out.append("")
        total.extend((trace, n, f) for n, f in trace.anomalies)
    if total:
        out.append(f"anomalies ({len(total)}):")
        for trace, n, f in total:
            out.append(f"  key {_key_text(trace.key)} {n.kind} {n.id}: {f}")
    else:
        out.append("anomalies: none")
    return "\n".join(out) + "\n"


# -- HTML ----------------------------------------------------------------------------------
_CSS = """
body{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;font-size:13px;
margin:1.5em;color:#1d2330;background:#fbfbfd}
h1{font-size:18px} h2{font-size:14px;margin:1.4em 0 .3em}
ul{list-style:none;margin:0;padding-left:1.3em;border-left:1px dotted #c4c8d4}
ul.top{padding-left:0;border:none}
li{margin:1px 0} summary{cursor:pointer} summary,li>span{white-space:pre-wrap}
.k-run>summary,.k-run>span{font-weight:bold}
.k-event{color:#30508f}.k-action{color:#1d2330}.k-call{color:#6b3fa0}.k-output{color:#1b7a3a}
.flag{background:#ffe3e0;color:#a11d12;border-radius:3px;padding:0 4px;margin-left:6px}
.anom li{color:#a11d12}
.meta{color:#6b7280}
"""


def render_html(traces: list[RunTrace], title: str = "flink-agents-py trace") -> str:
    """One self-contained page (inline CSS, no scripts or external assets)."""
    esc = html.escape
    parts = ["<!DOCTYPE html><html><head><meta charset='utf-8'>",
             f"<title>{esc(title)}</title><style>{_CSS}</style></head><body>",
             f"<h1>{esc(title)}</h1>",
             f"<p class='meta'>{len(traces)} run(s)</p>"]

    def emit(n: TraceNode, trace: RunTrace) -> None:
        text, flags, children = _line(n, trace)
        kind = "event" if n.kind == "event" and _folded(n) is None else (
            "action" if n.kind == "event" else n.kind)
        flag_html = "".join(f"<span class='flag'>{esc(f)}</span>" for f in flags)
        title_attr = f" title='{esc(n.id)}'"
        if children:
            parts.append(f"<li class='k-{kind}'><details open><summary{title_attr}>"
                         f"{esc(text)}{flag_html}</summary><ul>")
            for c in children:
                emit(c, trace)
            parts.append("</ul></details></li>")
        else:
            parts.append(f"<li class='k-{kind}'><span{title_attr}>{esc(text)}</span>"
                         f"{flag_html}</li>")

    anomalies: list[str] = []
    for trace in traces:
        parts.append(f"<h2>key {esc(_key_text(trace.key))} &middot; {esc(trace.run)}</h2>"
                     "<ul class='top'>")
        emit(trace.root, trace)
        parts.append("</ul>")
        anomalies.extend(f"key {_key_text(trace.key)} {n.kind} {n.id}: {f}"
                         for n, f in trace.anomalies)
    parts.append(f"<h2>anomalies ({len(anomalies)})</h2><ul class='top anom'>")
    parts.extend(f"<li>{esc(a)}</li>" for a in anomalies)
    if not anomalies:
        parts.append("<li class='meta'>none</li>")
    parts.append("</ul></body></html>\n")
    return "".join(parts)
