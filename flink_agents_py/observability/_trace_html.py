"""The trace page: one self-contained HTML file for thousands of runs.

The runs are embedded once, as JSON (``<script type="application/json">``); a small inline
script draws them on demand, so the page stays quick with thousands of runs:

- an index of runs (position, key, run, status, duration, counts, anomalies), drawn only
  for the rows scrolled into view, with a filter (all / failed / with anomalies), a key
  search and an order (as logged, slowest first, most tokens first);
- the anomalies of every run, each linked to its run and node (``#run=84&node=0.1``: the 84th run);
- the selected run's tree, drawn when it is opened (nodes fold and unfold), with each node's
  record fields ("payload") on demand and a failing node's traceback under it (collapsed);
- beside the tree, a timeline (waterfall) of the run's actions and calls on one time axis,
  so overlapping calls and waiting are seen at a glance; events are marks on it.

No external assets (inline CSS and JavaScript only), so it opens offline.
"""

from __future__ import annotations

import html
from typing import Any

import orjson

from ..api import mask_secrets
from ._trace import (
    RunTrace,
    TraceNode,
    _call_kind,
    _folded,
    _key_text,
    _line,
    anomaly_summary,
)

__all__ = ["render_html", "page_data"]

_SKIP = ("ts", "kind", "key", "parent", "traceback")


def _fields(rec: dict[str, Any] | None) -> dict[str, Any]:
    return {k: v for k, v in (rec or {}).items() if k not in _SKIP}


def _payload(n: TraceNode) -> dict[str, Any]:
    if n.kind == "run":
        return {**_fields(n.start), **_fields(n.end)}
    out = _fields(n.start)
    if n.end:
        out.update(_fields(n.end))
    return out


def _ms(t: float | None, base: float | None) -> float | None:
    if t is None or base is None:
        return None
    return round((t - base) * 1000.0, 3)


def _bar(n: TraceNode) -> str:
    if n.kind == "call":
        return _call_kind(n) or "function"
    return n.kind


def _row(n: TraceNode, trace: RunTrace, lo: float | None) -> tuple[dict[str, Any],
                                                                   list[TraceNode]]:
    """A node's row (without its child rows) and the nodes of its child rows."""
    text, flags, children = _line(n, trace)
    shown = _folded(n) or n
    kind = "action" if shown is not n else n.kind
    r: dict[str, Any] = {"l": text, "c": kind}
    if flags:
        r["f"] = flags
    if shown is n:
        r["p"] = _payload(n)
    else:
        r["p"] = {"event": _payload(n), kind: _payload(shown)}
    if shown.traceback:
        r["tb"] = shown.traceback
    s, e = _ms(shown.t0, lo), _ms(shown.t1, lo)
    if s is not None:
        r["s"] = s
    if e is not None and shown.kind != "event":
        r["e"] = e
    if shown.kind in ("event", "output") or (e is None and shown.start.get("replayed")):
        r["m"] = 1  # a moment, not a span: a mark on the timeline
    r["b"] = _bar(shown)
    status = (shown.end or {}).get("status")
    if status == "failed" or (shown.end or {}).get("success") is False or \
            (shown.end or {}).get("tool_error"):
        r["x"] = 1
    return r, children


def _rows(trace: RunTrace, lo: float | None, paths: dict[int, str]) -> dict[str, Any]:
    """The run's rows, each node's path put in ``paths``.

    Built with a stack, not recursion: a run may nest deeper than Python's recursion limit
    (an event chain of up to ``EventChainLimitError.LIMIT`` actions).

    Returns:
        The root row, its child rows under ``k``.
    """
    top: list[Any] = [None]
    stack: list[tuple[TraceNode, str, list[Any], int]] = [(trace.root, "", top, 0)]
    while stack:
        n, path, into, at = stack.pop()
        r, children = _row(n, trace, lo)
        paths[id(n)] = paths[id(_folded(n) or n)] = path
        into[at] = r
        if children:
            rows = r["k"] = [None] * len(children)
            stack.extend((c, f"{path}.{i}" if path else str(i), rows, i)
                         for i, c in reversed(list(enumerate(children))))
    return top[0]


def page_data(traces: list[RunTrace]) -> dict[str, Any]:
    """The page's JSON: ``{"runs": [...], "anomalies": [[run, node path, text, failed]]}``.

    A run is ``{"k": key text, "r": run id, "st": status, "d": duration ms, "ts": start
    (epoch s), "c": [actions, chat calls, input tokens, output tokens, tool calls, sub-agent
    calls, outputs], "a": anomalies, "t": its root row}``. A row is ``{"l": label, "c":
    kind, "f": flags, "k": child rows, "p": payload, "tb": traceback, "s"/"e": start and end
    in ms from the run's start, "b": bar kind, "x": 1 when it failed, "m": 1 for a moment
    (an event, an output, a replayed call) rather than a span}``; empty fields are left
    out. A node path is the child indexes from the root joined by ``.`` (root: ``""``).

    Args:
        traces: the runs.

    Returns:
        The data, ready for ``orjson.dumps`` (``_dumps`` when a run nests deeper than
        orjson's depth limit).
    """
    runs: list[dict[str, Any]] = []
    anomalies: list[list[Any]] = []
    for ri, trace in enumerate(traces):
        lo, hi = trace.span()
        paths: dict[int, str] = {}
        root = _rows(trace, lo, paths)
        t = trace.totals()
        end = trace.root.end or {}
        dur = end.get("duration_ms")
        if dur is None and end and lo is not None and hi is not None:
            dur = round((hi - lo) * 1000.0, 3)
        runs.append({"k": _key_text(trace.key), "r": trace.run, "st": trace.status,
                     "d": dur, "ts": lo, "a": len(trace.anomalies), "t": root,
                     "c": [t["actions"], t["chat_calls"], t["input_tokens"],
                           t["output_tokens"], t["tool_calls"], t["subagent_calls"],
                           t["outputs"]]})
        for n, f in trace.anomalies:
            anomalies.append([ri, paths.get(id(n), ""), f"{n.kind} {n.id}: {f}",
                              int(f in n.errors)])
    return {"runs": runs, "anomalies": anomalies, "summary": anomaly_summary(traces)}


def render_html(traces: list[RunTrace], title: str = "flink-agents-py trace") -> str:
    """One self-contained page of ``traces`` (inline CSS and script, data as JSON).

    Args:
        traces: the runs to show (all of them are in the page; it draws them lazily).
        title: the page title.

    Returns:
        The HTML text.
    """
    # "<" occurs only inside JSON strings: escaped, no payload can end or open a script;
    # known secrets masked on top of the log's own masking (as in the spans and the text)
    data = mask_secrets(_dumps(page_data(traces)).decode()).replace("<", "\\u003c")
    esc = html.escape
    return "".join([
        "<!DOCTYPE html><html><head><meta charset='utf-8'>",
        "<meta name='viewport' content='width=device-width, initial-scale=1'>",
        f"<title>{esc(title)}</title><style>{_CSS}</style></head><body>",
        f"<header><h1>{esc(title)}</h1><p id='summary' class='meta'></p></header>",
        _BODY,
        "<script type='application/json' id='trace-data'>", data, "</script>",
        f"<script>{_JS}</script></body></html>\n",
    ])


class _Raw(bytes):
    """JSON text to copy as it is (``_dumps``)."""


def _dumps(value: Any) -> bytes:
    """``value`` as JSON, however deeply it nests (orjson stops at 255 levels).

    A run's rows nest two levels per node, so an event chain of a few hundred actions (up
    to ``EventChainLimitError.LIMIT`` are allowed) is deeper than orjson goes: such a value
    is written with a stack, its dicts and lists by hand and the rest by orjson.

    Returns:
        The JSON text.
    """
    try:
        return orjson.dumps(value, default=repr)
    except TypeError:  # "Recursion limit reached" (else it fails again below, as it did)
        pass
    out: list[bytes] = []
    stack: list[Any] = [value]
    while stack:
        item = stack.pop()
        if type(item) is _Raw:
            out.append(item)
        elif isinstance(item, dict):
            stack.append(_Raw(b"}"))
            entries = list(item.items())
            for i in range(len(entries) - 1, -1, -1):
                k, v = entries[i]
                stack.append(v)
                stack.append(_Raw((b"," if i else b"") + orjson.dumps(str(k)) + b":"))
            stack.append(_Raw(b"{"))
        elif isinstance(item, (list, tuple)):
            stack.append(_Raw(b"]"))
            for i in range(len(item) - 1, -1, -1):
                stack.append(item[i])
                if i:
                    stack.append(_Raw(b","))
            stack.append(_Raw(b"["))
        else:
            out.append(orjson.dumps(item, default=repr))
    return b"".join(out)


_BODY = """
<main>
<section id='left'>
 <div class='controls'>
  <label>show <select id='filter'><option value='all'>all runs</option>
   <option value='failed'>failed runs</option>
   <option value='anomalous'>runs with anomalies</option></select></label>
  <input id='search' type='search' placeholder='key contains...' size='14'>
  <label>order <select id='sort'><option value='log'>as logged</option>
   <option value='slowest'>slowest first</option>
   <option value='tokens'>most tokens first</option></select></label>
  <span id='count' class='meta'></span>
 </div>
 <div class='irow ihead'><span>#</span><span>key</span><span>run</span><span>status</span>
  <span>duration</span><span title='actions / chat calls / tool calls'>act/chat/tool</span>
  <span title='anomalies'>!</span></div>
 <div id='index'><div id='index-spacer'></div></div>
 <h2>anomalies <span id='anomaly-count' class='meta'></span></h2>
 <p id='no-anomalies' class='meta' hidden>no anomalies</p>
 <ol id='anomalies'></ol>
 <button id='more-anomalies' hidden>show more</button>
</section>
<section id='detail'>
 <div id='run-head' class='meta'>Select a run in the index (or an anomaly).</div>
 <label id='tl-toggle' hidden><input type='checkbox' id='show-timeline' checked> timeline</label>
 <div id='tree'></div>
</section>
</main>
"""

_CSS = """
*{box-sizing:border-box}
body{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;font-size:12.5px;
margin:0;color:#1d2330;background:#fbfbfd}
header{padding:.6em 1em;border-bottom:1px solid #dde1ea}
h1{font-size:16px;margin:0} h2{font-size:13px;margin:1em 0 .3em}
.meta{color:#6b7280}
main{display:flex;gap:1em;padding:.6em 1em;align-items:flex-start}
#left{flex:0 0 36%;min-width:430px}
#detail{flex:1;min-width:0}
.controls{display:flex;gap:.6em;align-items:center;margin-bottom:.4em;flex-wrap:wrap}
#index{height:46vh;overflow:auto;border:1px solid #dde1ea;background:#fff;position:relative}
#index-spacer{position:relative}
.irow{display:grid;grid-template-columns:5ch minmax(6ch,1fr) 4ch 9ch 9ch 14ch 3ch;
gap:.3em;height:22px;line-height:22px;padding:0 .4em;white-space:nowrap;overflow:hidden;
cursor:pointer;width:100%;color:inherit;text-decoration:none}
.irow>span{overflow:hidden;text-overflow:ellipsis}
#index .irow{position:absolute;left:0;right:0}
#index .irow:hover{background:#eef2fb}
#index .irow.sel{background:#dfe7fb}
.ihead{font-weight:bold;cursor:default;border-bottom:1px solid #dde1ea}
.st-failed{color:#b3261e;font-weight:bold}.st-anomalous{color:#a15c00}.st-ok{color:#1b7a3a}
#anomalies{margin:0;padding-left:3em;max-height:30vh;overflow:auto}
#anomalies li{margin:2px 0}
#anomalies a{color:#a15c00}#anomalies li.failed a{color:#b3261e}
#run-head{margin-bottom:.4em;white-space:pre-wrap}
.trow{display:grid;grid-template-columns:minmax(0,1fr) 38%;border-bottom:1px solid #f0f1f5}
#tree.no-tl .trow{grid-template-columns:minmax(0,1fr)}
#tree.no-tl .tl{display:none}
.tcell{padding:1px 0;white-space:pre-wrap;word-break:break-word}
.trow.focus{background:#fff6d6}
.tog{display:inline-block;width:1.3em;border:none;background:none;padding:0;cursor:pointer;
font:inherit;color:#6b7280}
.c-run .lbl{font-weight:bold}.c-event .lbl{color:#30508f}.c-call .lbl{color:#6b3fa0}
.c-output .lbl{color:#1b7a3a}
.flag{background:#ffe3e0;color:#a11d12;border-radius:3px;padding:0 4px;margin-left:6px}
.pl{border:1px solid #c4c8d4;background:#f4f5f8;border-radius:3px;font:inherit;
font-size:11px;padding:0 3px;margin-left:6px;cursor:pointer;color:#445}
pre{margin:.2em 0 .3em 1.3em;padding:.4em;background:#f4f5f8;border:1px solid #e0e3ea;
white-space:pre-wrap;word-break:break-word;max-height:24em;overflow:auto}
details.tb{margin-left:1.3em}details.tb>summary{cursor:pointer;color:#a11d12}
details.tb pre{background:#fff4f3;border-color:#f3c9c4}
.tl{position:relative;border-left:1px solid #e6e8ee;min-height:18px}
.axis{position:relative;height:18px;border-bottom:1px solid #c4c8d4;font-size:10.5px}
.tick{position:absolute;top:0;color:#6b7280;border-left:1px solid #c4c8d4;padding-left:2px;
height:18px}
.bar{position:absolute;top:4px;height:10px;min-width:2px;border-radius:2px;background:#8a94a8}
.b-action{background:#8fa3c8}.b-chat_model{background:#8e5cc4}.b-chat{background:#b79ad9}
.b-tool{background:#e08a2b}.b-subagent{background:#2a9d8f}.b-function{background:#7b8494}
.b-run{background:#c9d2e3}
.bar.failed{background:#d0382b}
.bar.open{background:repeating-linear-gradient(45deg,#c4c8d4 0 4px,#eef0f4 4px 8px)}
.mark{position:absolute;top:5px;width:7px;height:7px;margin-left:-3px;transform:rotate(45deg);
background:#30508f}
"""

_JS = r"""
(function(){
'use strict';
var DATA=JSON.parse(document.getElementById('trace-data').textContent);
var RUNS=DATA.runs, ROW=22, AN_PAGE=200;
var el=function(id){return document.getElementById(id);};
var filtered=[], selected=-1, anShown=0;
function fmt(ms){if(ms===null||ms===undefined)return '';
 return ms<1000?ms.toFixed(1)+' ms':(ms/1000).toFixed(2)+' s';}
function h(tag,cls,text){var e=document.createElement(tag);if(cls)e.className=cls;
 if(text!==undefined)e.textContent=text;return e;}
el('summary').textContent=RUNS.length+' run'+(RUNS.length===1?'':'s')+' \u00b7 '+DATA.summary;

// -- index (virtual list) --------------------------------------------------------------
function applyFilter(){
 var f=el('filter').value, q=el('search').value.trim().toLowerCase();
 filtered=[];
 for(var i=0;i<RUNS.length;i++){var r=RUNS[i];
  if(f==='failed'&&r.st!=='failed')continue;
  if(f==='anomalous'&&r.st==='ok')continue;
  if(q&&r.k.toLowerCase().indexOf(q)<0)continue;
  filtered.push(i);}
 var order=el('sort').value;
 if(order==='slowest')filtered.sort(function(a,b){return (RUNS[b].d||0)-(RUNS[a].d||0);});
 if(order==='tokens')filtered.sort(function(a,b){
  return (RUNS[b].c[2]+RUNS[b].c[3])-(RUNS[a].c[2]+RUNS[a].c[3]);});
 el('count').textContent=(filtered.length===RUNS.length?'':filtered.length+' of ')+
  RUNS.length+' runs';
 el('index-spacer').style.height=(filtered.length*ROW)+'px';
 version++; el('index').scrollTop=0; drawIndex();
}
var version=0, drawn='';
function drawIndex(){
 var box=el('index'), sp=el('index-spacer');
 var first=Math.max(0,Math.floor(box.scrollTop/ROW)-10);
 var last=Math.min(filtered.length,first+Math.ceil(box.clientHeight/ROW)+20);
 var state=version+':'+first+':'+last+':'+selected;
 if(state===drawn)return;  // the rows in view are drawn already
 drawn=state; sp.textContent='';
 for(var j=first;j<last;j++){var i=filtered[j], r=RUNS[i];
  var a=h('a','irow'+(i===selected?' sel':''));a.href='#run='+(i+1);a.dataset.run=i;
  a.style.top=(j*ROW)+'px';
  [ '#'+(i+1), r.k, r.r, r.st, fmt(r.d), r.c[0]+'/'+r.c[1]+'/'+r.c[4], r.a?String(r.a):'' ]
   .forEach(function(t,n){var s=h('span',n===3?'st-'+r.st:'',t);if(n===1)s.title=r.k;
    a.appendChild(s);});
  sp.appendChild(a);}
}
el('index').addEventListener('scroll',drawIndex);
el('filter').addEventListener('change',applyFilter);
el('search').addEventListener('input',applyFilter);
el('sort').addEventListener('change',applyFilter);

// -- anomalies ------------------------------------------------------------------------
function drawAnomalies(){
 var ol=el('anomalies'), end=Math.min(DATA.anomalies.length,anShown+AN_PAGE);
 for(;anShown<end;anShown++){var a=DATA.anomalies[anShown], r=RUNS[a[0]];
  var li=h('li',a[3]?'failed':''), link=h('a','', '#'+(a[0]+1)+' key '+r.k+' '+a[2]);
  link.href='#run='+(a[0]+1)+'&node='+a[1]; li.appendChild(link); ol.appendChild(li);}
 el('more-anomalies').hidden=anShown>=DATA.anomalies.length;
 el('anomaly-count').textContent='('+DATA.anomalies.length+')';
 el('no-anomalies').hidden=DATA.anomalies.length>0;  // not a numbered item "none"
 ol.hidden=!DATA.anomalies.length;
}
el('more-anomalies').addEventListener('click',drawAnomalies);

// -- one run: tree and timeline -------------------------------------------------------
function count(r){var n=1;(r.k||[]).forEach(function(c){n+=count(c);});return n;}
function setOpen(r,depth,all){r.o=all||depth<3;(r.k||[]).forEach(function(c){
 setOpen(c,depth+1,all);});}
function span(run){var end=run.t.e;
 (function walk(r){if(r.e!==undefined&&(end===undefined||r.e>end))end=r.e;
  if(r.s!==undefined&&(end===undefined||r.s>end))end=r.s;(r.k||[]).forEach(walk);})(run.t);
 return end&&end>0?end:1;}
function pct(v,total){return Math.max(0,Math.min(100,v/total*100));}
function timeline(r,total){
 var tl=h('div','tl');if(r.s===undefined)return tl;
 if(r.m){
  var m=h('div','mark');m.style.left='min('+pct(r.s,total)+'%, calc(100% - 4px))';
  m.title='+'+fmt(r.s);
  tl.appendChild(m);return tl;}
 var open=r.e===undefined, e=open?total:r.e;
 var b=h('div','bar b-'+r.b+(r.x?' failed':'')+(open?' open':''));
 // a bar is at least 2px wide: keep its left edge so that it ends inside the axis
 b.style.left='min('+pct(r.s,total)+'%, calc(100% - 2px))';
 b.style.width=Math.max(0,pct(e,total)-pct(r.s,total))+'%';
 b.dataset.s=r.s;b.dataset.e=e;
 b.title='starts +'+fmt(r.s)+(open?', no end in the log':', takes '+fmt(e-r.s));
 tl.appendChild(b);return tl;}
function rowEl(r,path,depth,total){
 var d=h('div','trow c-'+r.c);d.dataset.path=path;
 var cell=h('div','tcell');cell.style.paddingLeft=(depth*16)+'px';
 var tog=h(r.k?'button':'span','tog',r.k?(r.o?'\u25be':'\u25b8'):'');
 if(r.k){tog.title='fold/unfold';tog.addEventListener('click',function(){r.o=!r.o;draw();});}
 cell.appendChild(tog);cell.appendChild(h('span','lbl',r.l));
 (r.f||[]).forEach(function(f){cell.appendChild(h('span','flag',f));});
 if(r.p){var b=h('button','pl','{\u2026}');b.title='show the record fields';
  var show=function(){var p=h('pre','payload',JSON.stringify(r.p,null,2));
   cell.insertBefore(p,cell.querySelector(':scope>details.tb'));};
  b.addEventListener('click',function(){var p=cell.querySelector(':scope>pre.payload');
   r.po=!p; if(p)p.remove(); else show();});
  cell.appendChild(b);}
 if(r.tb){var det=h('details','tb');det.appendChild(h('summary','','traceback'));
  det.appendChild(h('pre','',r.tb));det.open=!!r.to;
  det.addEventListener('toggle',function(){r.to=det.open;});cell.appendChild(det);}
 if(r.p&&r.po)show();  // drawn again (a fold elsewhere): keep what was open
 d.appendChild(cell);d.appendChild(timeline(r,total));return d;}
var current=null;
function draw(scroll){
 var tree=el('tree');tree.textContent='';if(!current)return;
 var run=current.run,total=span(run);
 var ax=h('div','trow axis-row');ax.appendChild(h('div','tcell meta','tree'));
 var axis=h('div','tl axis');
 for(var i=0;i<=4;i++){var v=total*i/4;
  var t=h('div','tick',i<4?'+'+(total<10?v.toFixed(2)+' ms':fmt(v)):'');
  t.style.left=(i*25)+'%';axis.appendChild(t);}
 ax.appendChild(axis);tree.appendChild(ax);
 (function add(r,path,depth){tree.appendChild(rowEl(r,path,depth,total));
  if(r.k&&r.o)r.k.forEach(function(c,i){add(c,path===''?String(i):path+'.'+i,depth+1);});
 })(run.t,'',0);
 if(current.focus!==null){var f=tree.querySelector('.trow[data-path="'+current.focus+'"]');
  if(f){f.classList.add('focus');if(scroll)f.scrollIntoView({block:'center'});}}
}
function openRun(i,focus){
 var run=RUNS[i];if(!run)return;selected=i;
 if(run.o===undefined){setOpen(run.t,0,count(run.t)<=400);run.o=1;}
 if(focus!==null){var r=run.t;r.o=true;focus.split('.').forEach(function(n){
  if(n!==''&&r.k&&r.k[+n]){r=r.k[+n];r.o=true;}});}
 current={run:run,focus:focus};
 el('run-head').textContent='#'+(i+1)+'  key '+run.k+'  run '+run.r+'  '+run.st+
  (run.d!==null&&run.d!==undefined?'  '+fmt(run.d):'')+'  \u00b7  tokens '+run.c[2]+' in / '+
  run.c[3]+' out, sub-agent calls '+run.c[5]+', outputs '+run.c[6]+
  (run.a?', anomalies '+run.a:'');
 el('run-head').className='st-'+run.st;
 el('tl-toggle').hidden=false;draw(true);
 var j=filtered.indexOf(i), box=el('index');
 if(j>=0&&(j*ROW<box.scrollTop||(j+1)*ROW>box.scrollTop+box.clientHeight))
  box.scrollTop=Math.max(0,j*ROW-box.clientHeight/2);
 drawIndex();
}
el('show-timeline').addEventListener('change',function(){
 el('tree').classList.toggle('no-tl',!this.checked);});
function route(){
 var m=/run=(\d+)/.exec(location.hash);if(!m)return;
 var n=/node=([\d.]*)/.exec(location.hash);openRun(+m[1]-1,n?n[1]:null);}
window.addEventListener('hashchange',route);
applyFilter();drawAnomalies();route();
document.body.dataset.ready='1';
})();
"""
