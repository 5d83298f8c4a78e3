"""The documentation: the site builds strictly, the README stays a front door that links in.

``mkdocs build --strict`` fails on a broken link or anchor, a page missing from the nav, and
any warning of the API reference (a docstring mkdocstrings cannot render, an unknown
cross-reference). The build needs the ``docs`` extra, which ``make setup`` installs.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"

pytestmark = pytest.mark.timeout(300)


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    for module in ("mkdocs", "material", "mkdocstrings_handlers.python"):
        try:
            __import__(module)
        except ImportError:
            pytest.fail(f"{module} is missing: install the docs extra (make setup does; or "
                        f"pip install -e '.[docs]')")
    out = tmp_path_factory.mktemp("site")
    proc = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--config-file",
         str(ROOT / "mkdocs.yml"), "--site-dir", str(out)],
        cwd=ROOT, capture_output=True, text=True, timeout=240,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
    assert proc.returncode == 0, f"mkdocs build --strict failed:\n{proc.stderr[-6000:]}"
    return out


def test_site_builds_strictly_with_every_page(site):
    pages = {p.relative_to(ROOT / "docs").with_suffix("").as_posix()
             for p in (ROOT / "docs").rglob("*.md")}
    for page in pages:
        html = site / ("index.html" if page == "index" else
                       f"{page[:-len('/index')] if page.endswith('/index') else page}/index.html")
        assert html.is_file(), f"docs/{page}.md was not built"


def test_api_reference_renders_the_public_names(site):
    api = (site / "reference" / "api" / "index.html").read_text()
    for name in ("Agent", "RunnerContext", "ResourceDescriptor", "ChatModelSetup",
                 "InternalSubagent", "action", "tool"):
        assert f'id="flink_agents_py.api.{name}"' in api, name
    # every Google-style section of every page is rendered as a section: a docstring griffe
    # cannot parse (bad indentation, a stray escape) shows its "Args:" as raw text or code
    for page in sorted((site / "reference").glob("*/index.html")):
        for line in page.read_text().splitlines():
            if re.search(r"\b(Args|Returns|Raises):", line):
                assert "doc-section-title" in line, f"{page.parent.name}: unparsed {line[:200]}"
    ctx = api[api.index('id="flink_agents_py.api.RunnerContext"'):]
    assert "durable_execute" in ctx and "Raises" in ctx
    flink = (site / "reference" / "flink" / "index.html").read_text()
    assert 'id="flink_agents_py.flink.create_stream_environment"' in flink
    env = (site / "reference" / "environment" / "index.html").read_text()
    assert "AgentsExecutionEnvironment" in env and "flink(" in env


def test_tutorial_page_is_in_the_site(site):
    html = (site / "getting-started" / "tutorial" / "index.html").read_text()
    assert "ctx.chat" in html and "submit_subagent" in html and "from_kafka" in html


# -- the README ---------------------------------------------------------------------------------
def test_readme_keeps_the_commands_ci_and_users_rely_on():
    text = README.read_text()
    for command in ("`make setup`", "`make run`", "`make test`"):
        assert command in text, command
    assert len(text.encode()) < 12_000, "README.md is the front door: move details to docs/"


def test_readme_links_resolve():
    text = README.read_text()
    links = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", text)
    local = [x for x in links if not re.match(r"[a-z]+://", x)]
    assert local, "the README links into the docs"
    for link in local:
        assert (ROOT / link).exists(), f"README.md links to {link}, which does not exist"
    assert "docs/getting-started/tutorial.md" in local
    assert "docs/reference/index.md" in local


def test_readme_example_runs_outside_the_repository(tmp_path):
    # the front door's example, saved by a user in a directory of their own
    code = re.search(r"```python\n(.*?)```", README.read_text(), re.S).group(1)
    (tmp_path / "echo.py").write_text(code)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    proc = subprocess.run([sys.executable, "echo.py"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "'echo': {'key': 'a', 'text': 'hi'}" in proc.stdout
    assert "'echo': {'key': 'b', 'text': 'yo'}" in proc.stdout
