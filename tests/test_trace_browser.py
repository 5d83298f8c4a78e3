"""The trace page of 3,000 runs in a real headless Chromium (Debian's chromium and
chromium-driver, driven by selenium).

What it checks, as a user would see it: the index counts 3,000 runs and draws only the rows
in view (scrolling draws the last ones); the filter narrows it to the one failed run (key
k83) and to the two runs with anomalies; opening the failed run shows its tree with the
failing node flagged; that node's payload opens on a click and shows the error; its
traceback is under it, collapsed, and opens; an anomaly link opens its run at its node; a
normal run's timeline has one bar per action and call, inside the time axis, in causal
order (tools after the model asked for them, the second model call after both tools);
a model call's payload shows its finish reason and model; folding a node hides its
children and keeps what is open elsewhere, unfolding shows them again; the timeline can be
hidden; "slowest first" orders the index by duration; the console has no errors.

Skipped when chromium, chromedriver or selenium is missing, except under CI (``CI`` set),
where ``make setup`` installs them and the test must run.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest
from support import trace_agents

from flink_agents_py.observability import build_traces, read_event_log, render_html

pytestmark = [pytest.mark.browser, pytest.mark.timeout(300)]

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--window-size=1500,1000"]


def _missing() -> str | None:
    for path in (CHROMIUM, CHROMEDRIVER):
        if not os.path.exists(path):
            return f"{path} is missing (apt-get install chromium chromium-driver)"
    try:
        import selenium  # noqa: F401
    except ImportError:
        return "selenium is missing (pip install -e '.[test]')"
    return None


@pytest.fixture(scope="module")
def driver():
    why = _missing()
    if why:
        if os.environ.get("CI"):
            pytest.fail(f"the browser test must run in CI: {why}")
        pytest.skip(why)
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    profile = tempfile.mkdtemp(prefix="trace-chromium-")
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in [*FLAGS, f"--user-data-dir={profile}"]:
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    drv = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    drv.implicitly_wait(0)
    try:
        yield drv
    finally:
        drv.quit()
        shutil.rmtree(profile, ignore_errors=True)


@pytest.fixture(scope="module")
def page(tmp_path_factory) -> tuple[Path, str]:
    """The page of the 3,000-run log; the failing node's traceback as the page has it."""
    traces = build_traces(read_event_log([trace_agents.cached_log(3000)]))
    [failed] = [t for t in traces if t.status == "failed"]
    node = next(n for n in failed.walk() if n.kind == "action" and n.flags)
    assert node.traceback is not None and "trace_agents.py" in node.traceback
    out = tmp_path_factory.mktemp("page") / "trace.html"
    out.write_text(render_html(traces), encoding="utf-8")
    return out, node.traceback


def _wait(drv, condition, timeout: float = 30):
    from selenium.webdriver.support.ui import WebDriverWait

    return WebDriverWait(drv, timeout).until(condition)


def _index(drv) -> list[list[str]]:
    """The cells of the index rows drawn now (read at once, in the page)."""
    return drv.execute_script(
        "return Array.from(document.querySelectorAll('#index .irow'))"
        ".map(function(r){return Array.from(r.children).map(function(c){"
        "return c.textContent;});});")


def _ms(text: str) -> float:
    value, unit = text.split()
    return float(value) * (1000.0 if unit == "s" else 1.0)


def _open(drv, position: int) -> None:
    """Click the index row of run ``#position``."""
    from selenium.webdriver.common.by import By

    drv.find_element(By.CSS_SELECTOR, f"#index .irow[data-run='{position - 1}']").click()


def _filter(drv, value: str, search: str = "") -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    Select(drv.find_element(By.ID, "filter")).select_by_value(value)
    box = drv.find_element(By.ID, "search")
    box.clear()
    if search:
        box.send_keys(search)


def _tree_row(drv, text: str):
    from selenium.webdriver.common.by import By

    rows = [r for r in drv.find_elements(By.CSS_SELECTOR, "#tree .trow")
            if text in r.find_element(By.CSS_SELECTOR, ".tcell").text]
    assert rows, f"no tree row with {text!r}"
    return rows[0]


def test_the_trace_page_in_chromium(driver, page):
    from selenium.webdriver.common.by import By

    path, traceback = page
    drv = driver
    drv.get(path.as_uri())
    _wait(drv, lambda d: d.execute_script("return document.body.dataset.ready") == "1")

    # the index: 3,000 runs, drawn lazily
    assert drv.find_element(By.ID, "count").text == "3000 runs"
    assert "3000 runs" in drv.find_element(By.ID, "summary").text
    assert 10 < len(_index(drv)) < 120
    drv.execute_script("var i=document.getElementById('index'); i.scrollTop=i.scrollHeight;")
    _wait(drv, lambda d: any(r[0] == "#3000" for r in _index(d)))
    assert len(_index(drv)) < 120

    # filter to failures: one run, key k83
    _filter(drv, "failed")
    assert drv.find_element(By.ID, "count").text == "1 of 3000 runs"
    [row] = _index(drv)
    assert row[:4] == ["#84", "k83", "r0", "failed"]
    _open(drv, 84)
    _wait(drv, lambda d: "key k83" in d.find_element(By.ID, "run-head").text)
    failing = _tree_row(drv, "failed action: KeyError: 'missing'")
    assert "-> ask" in failing.text

    # expand the failing node's payload
    assert not failing.find_elements(By.CSS_SELECTOR, "pre.payload")
    failing.find_element(By.CSS_SELECTOR, "button.pl").click()
    payload = failing.find_element(By.CSS_SELECTOR, "pre.payload")
    assert payload.is_displayed()
    assert '"error": "KeyError: \'missing\'"' in payload.text
    assert '"status": "failed"' in payload.text

    # its traceback: under it, collapsed until opened
    details = failing.find_element(By.CSS_SELECTOR, "details.tb")
    pre = details.find_element(By.TAG_NAME, "pre")
    assert details.get_attribute("open") is None and not pre.is_displayed()
    details.find_element(By.TAG_NAME, "summary").click()
    _wait(drv, lambda d: pre.is_displayed())
    assert pre.text.strip() == traceback.strip()
    assert 'trace_agents.py", line' in pre.text
    assert pre.text.strip().endswith("KeyError: 'missing'")

    # the runs with anomalies: the failed one and the unfinished one
    _filter(drv, "anomalous")
    assert drv.find_element(By.ID, "count").text == "2 of 3000 runs"
    assert [(r[1], r[3]) for r in _index(drv)] == [("k83", "failed"),
                                                   ("k2999", "anomalous")]

    # an anomaly links to its run and node
    links = drv.find_elements(By.CSS_SELECTOR, "#anomalies a")
    assert [a.text for a in links] == [
        "#84 key k83 action r0/ask: failed action: KeyError: 'missing'",
        "#3000 key k2999 run r0: unfinished run"]
    links[1].click()
    _wait(drv, lambda d: "key k2999" in d.find_element(By.ID, "run-head").text)
    focus = drv.find_element(By.CSS_SELECTOR, "#tree .trow.focus")
    assert "unfinished run" in focus.text

    # a normal run's timeline: one bar per action and call, in causal order
    _filter(drv, "all", search="k7")
    assert [r[1] for r in _index(drv)][:2] == ["k7", "k70"]
    _open(drv, 8)
    _wait(drv, lambda d: "key k7 " in d.find_element(By.ID, "run-head").text)
    bars = drv.find_elements(By.CSS_SELECTOR, "#tree .tl .bar")
    assert len(bars) == 10  # the run, 5 actions, 2 model calls, 2 tool calls
    assert len(drv.find_elements(By.CSS_SELECTOR, "#tree .bar.b-tool")) == 2
    assert len(drv.find_elements(By.CSS_SELECTOR, "#tree .bar.b-chat_model")) == 2
    for bar in bars:
        cell = bar.find_element(By.XPATH, "..").rect
        r = bar.rect
        assert r["width"] >= 1 and r["height"] > 0
        assert cell["x"] - 1 <= r["x"] and r["x"] + r["width"] <= cell["x"] + cell["width"] + 1

    def bar_of(text: str):
        return _tree_row(drv, text).find_element(By.CSS_SELECTOR, ".bar").rect

    chat1, chat2 = bar_of("chat call #1"), bar_of("chat call #2")
    tools = [bar_of("tool stock"), bar_of("tool price")]
    for t in tools:  # 1 px of rounding
        assert chat1["x"] + chat1["width"] <= t["x"] + 1
        assert t["x"] + t["width"] <= chat2["x"] + 1
    assert len(drv.find_elements(By.CSS_SELECTOR, "#tree .tl .mark")) >= 1  # the output
    ticks = [t.text for t in drv.find_elements(By.CSS_SELECTOR, ".axis .tick")]
    assert ticks[0] in ("+0.0 ms", "+0.00 ms") and len(ticks) == 5

    # a model call's payload: its usage and finish reason
    _tree_row(drv, "chat call #1").find_element(By.CSS_SELECTOR, "button.pl").click()

    def chat_payload() -> str:
        return _tree_row(drv, "chat call #1").find_element(By.CSS_SELECTOR,
                                                           "pre.payload").text

    assert '"finish_reason": "tool_calls"' in chat_payload()
    assert '"provider_model": "shop-llm-1"' in chat_payload()

    # folding a node hides its children (what is open elsewhere stays open); unfolding
    # shows them again; the timeline can be hidden
    before = len(drv.find_elements(By.CSS_SELECTOR, "#tree .trow"))
    _tree_row(drv, "ToolRequestEvent").find_element(By.CSS_SELECTOR, "button.tog").click()
    after = len(drv.find_elements(By.CSS_SELECTOR, "#tree .trow"))
    assert after == before - 6  # two tools, the response, chat call #2, answer, output
    assert '"finish_reason": "tool_calls"' in chat_payload()
    _tree_row(drv, "ToolRequestEvent").find_element(By.CSS_SELECTOR, "button.tog").click()
    assert len(drv.find_elements(By.CSS_SELECTOR, "#tree .trow")) == before
    drv.find_element(By.ID, "show-timeline").click()
    assert not drv.find_element(By.CSS_SELECTOR, "#tree .tl .bar").is_displayed()

    # slowest first: the index is ordered by duration
    from selenium.webdriver.support.ui import Select

    _filter(drv, "all")
    logged = [_ms(r[4]) for r in _index(drv)]  # as logged: early runs are the quick ones
    Select(drv.find_element(By.ID, "sort")).select_by_value("slowest")
    durations = [_ms(r[4]) for r in _index(drv)[:20]]
    # (the slowest runs may all show the same rounded duration: compare with the log order)
    assert durations == sorted(durations, reverse=True)
    assert durations[0] >= max(logged) and durations[0] > min(logged)

    severe = [e for e in drv.get_log("browser") if e.get("level") == "SEVERE"]
    assert severe == []


def test_headers_are_whole_and_no_anomalies_is_said_in_words(driver, tmp_path):
    """Every index header fits its column (``act/chat/tool`` was cut); a log with no
    anomalies says so in words, not as a numbered item ``1. none``."""
    from selenium.webdriver.common.by import By

    traces = [t for t in build_traces(read_event_log([trace_agents.cached_log(3000)]))
              if not t.anomalies][:5]
    assert len(traces) == 5
    out = tmp_path / "clean.html"
    out.write_text(render_html(traces), encoding="utf-8")
    drv = driver
    for width in (1500, 1000):  # a wide window and a narrow one
        drv.set_window_size(width, 900)
        drv.get(out.as_uri())
        _wait(drv, lambda d: d.execute_script("return document.body.dataset.ready") == "1")
        cut = drv.execute_script(
            "return Array.from(document.querySelectorAll('.ihead span'))"
            ".filter(function(s){return s.scrollWidth>s.clientWidth;})"
            ".map(function(s){return s.textContent;});")
        assert cut == [], f"headers cut at a {width} px window: {cut}"
        assert "act/chat/tool" in drv.find_element(By.CSS_SELECTOR, ".ihead").text
        assert drv.find_elements(By.CSS_SELECTOR, "#anomalies li") == []
        assert not drv.find_element(By.ID, "anomalies").is_displayed()
        assert drv.find_element(By.ID, "no-anomalies").text == "no anomalies"
    drv.set_window_size(1500, 1000)
