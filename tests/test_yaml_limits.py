"""YAML documents are read within a budget: an alias bomb fails fast with a ``YamlError``.

The budget is counted in nodes (``_nodes.MAX_NODES`` once aliases and merge keys are
expanded, ``_nodes.MAX_DEPTH`` levels), so these tests assert how many nodes were built,
never how long it took.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from flink_agents_py.yaml import YamlError, _nodes, load_agents, read_yaml

pytestmark = pytest.mark.timeout(60)

# the classic "billion laughs": 9 levels of 9 aliases each, 9**9 (387 million) strings
BOMB = """\
# yaml alias bomb: do not feed to an unbounded loader
a: &a ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]
b: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a]
c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b]
d: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c]
e: &e [*d, *d, *d, *d, *d, *d, *d, *d, *d]
f: &f [*e, *e, *e, *e, *e, *e, *e, *e, *e]
g: &g [*f, *f, *f, *f, *f, *f, *f, *f, *f]
h: &h [*g, *g, *g, *g, *g, *g, *g, *g, *g]
i: &i [*h, *h, *h, *h, *h, *h, *h, *h, *h]
agents:
  - name: bomb
    actions: [{name: go, function: "support.yaml_helpers:start", on: [InputEvent]}]
    config: {payload: *i}
"""

GOOD = """\
agents:
  - name: small
    actions:
      - &first {name: one, function: "support.yaml_helpers:start", on: [InputEvent]}
      - {<<: *first, name: two}
"""


def assert_names_the_entry(problem: str, source: str) -> None:
    """The problem names the top-level entry whose expansion went over, at its own line."""
    m = re.match(rf"{re.escape(source)}:(\d+): ([a-i])\[\d+\]", problem)
    assert m, problem
    assert BOMB.splitlines()[int(m.group(1)) - 1].startswith(f"{m.group(2)}: &")


@pytest.fixture
def built(monkeypatch):
    """Counts the nodes the loader turns into data (``_nodes._construct`` calls)."""
    calls = [0]
    original = _nodes._construct

    def counting(*args, **kwargs):
        calls[0] += 1
        return original(*args, **kwargs)

    monkeypatch.setattr(_nodes, "_construct", counting)
    return calls


def test_an_alias_bomb_file_is_refused_after_at_most_the_node_budget(tmp_path, built):
    path = tmp_path / "bomb.yaml"
    path.write_text(BOMB)
    assert len(BOMB.encode()) < 700  # a few hundred bytes ...
    assert 9 ** 9 > 1000 * _nodes.MAX_NODES  # ... that would expand to 387 million strings
    with pytest.raises(YamlError) as info:
        load_agents(path)
    assert built[0] <= _nodes.MAX_NODES + 1  # the work done: bounded by the budget
    err = info.value
    assert err.source == str(path)
    [problem] = err.problems
    assert problem.startswith(f"{path}:")
    assert_names_the_entry(problem, str(path))
    assert f"more than {_nodes.MAX_NODES} nodes" in problem and "alias" in problem
    assert str(path) in str(err)


def test_an_alias_bomb_given_as_text_is_refused_the_same_way(built):
    with pytest.raises(YamlError) as info:
        load_agents(BOMB.encode())
    assert built[0] <= _nodes.MAX_NODES + 1
    assert_names_the_entry(info.value.problems[0], "<string>")


def test_a_merge_key_bomb_is_bounded(built):
    lines = ["m0: &m0 {a: 1, b: 2, c: 3, d: 4, e: 5, f: 6, g: 7, h: 8, i: 9}"]
    for k in range(1, 10):  # each level merges the previous one nine times, and nests it
        prev = f"*m{k - 1}"
        lines.append(f"m{k}: &m{k} {{<<: [{', '.join([prev] * 9)}], "
                     f"x: [{', '.join([prev] * 9)}]}}")
    lines.append("agents: [*m9]")
    with pytest.raises(YamlError) as info:
        load_agents("\n".join(lines) + "\n")
    assert built[0] <= _nodes.MAX_NODES + 1
    assert f"more than {_nodes.MAX_NODES} nodes" in str(info.value)


def test_a_document_with_too_many_nodes_is_refused_while_it_is_read(built):
    text = "agents: [" + "1, " * (_nodes.MAX_NODES + 10) + "1]\n"
    with pytest.raises(YamlError) as info:
        load_agents(text)
    assert built[0] == 0  # stopped while composing: nothing was turned into data
    assert f"more than {_nodes.MAX_NODES} nodes" in str(info.value)


@pytest.mark.parametrize("depth", [_nodes.MAX_DEPTH + 5, 5000])
def test_a_document_nested_too_deeply_is_a_yaml_error(depth):
    text = "agents: " + "[" * depth + "]" * depth + "\n"
    with pytest.raises(YamlError) as info:
        load_agents(text)
    assert f"{_nodes.MAX_DEPTH} levels" in str(info.value)


def test_aliases_and_merge_keys_within_the_budget_still_load(built):
    agents = load_agents(GOOD)
    assert list(agents) == ["small"]
    assert 0 < built[0] < 100


def test_the_docs_say_a_yaml_file_must_be_trusted_like_code():
    page = (Path(__file__).resolve().parents[1] / "docs" / "how-to" / "yaml.md").read_text()
    assert "a YAML file is code" in page and "module:qualname" in page
    assert f"{_nodes.MAX_NODES:,}" in page and f"{_nodes.MAX_DEPTH} levels" in page


def test_read_yaml_gives_any_untrusted_yaml_the_same_budget(built):
    # e.g. the front matter of a skill folder someone else wrote
    with pytest.raises(YamlError) as info:
        read_yaml(BOMB, "SKILL.md")
    assert built[0] <= _nodes.MAX_NODES + 1
    assert info.value.problems[0].startswith("SKILL.md:")
    assert read_yaml("name: pdf\ndescription: Reads PDFs\nflag: yes\n") == {
        "name": "pdf", "description": "Reads PDFs", "flag": "yes"}
    assert read_yaml("") is None
    with pytest.raises(YamlError, match="duplicate key 'a'"):
        read_yaml("a: 1\na: 2\n")


@pytest.mark.parametrize("tagged", [
    "!!python/object/apply:os.system [\"echo hi\"]",
    "!!python/object/new:os.system {args: [\"echo hi\"]}",
    "!!set {a: null}",
    "!custom [1, 2]",
])
def test_a_tagged_mapping_or_list_is_refused_naming_its_tag_and_line(tagged, tmp_path):
    """A safe loader would read a tagged mapping or list as plain data and drop the tag (a
    ``!!python/object/apply`` list became the action list); it is refused like a tagged
    scalar, and nothing runs."""
    doc = tmp_path / "agents.yaml"
    doc.write_text(f"agents:\n  - name: a\n    actions: {tagged}\n")
    with pytest.raises(YamlError) as info:
        load_agents(doc)
    [problem] = [p for p in info.value.problems if "tag" in p]
    assert problem.startswith(f"{doc}:3:") and tagged.split()[0].lstrip("!") in problem
    with pytest.raises(YamlError, match="is not read"):
        read_yaml(f"flag: {tagged}\n", "SKILL.md")
    assert read_yaml("a: {b: [1, 2]}\nc: [x]\n") == {"a": {"b": [1, 2]}, "c": ["x"]}


def test_a_control_character_is_a_yaml_error_naming_the_file_not_a_reader_exception(tmp_path):
    """PyYAML's reader refuses a NUL or an escape character before parsing starts: that is
    a ``YamlError`` naming the source like any other problem (a skill's front matter, an
    agents file)."""
    with pytest.raises(YamlError, match=r"SKILL.md.*not valid YAML.*#x0000"):
        read_yaml("name: a\x00\n", "SKILL.md")
    doc = tmp_path / "agents.yaml"
    doc.write_bytes(b"agents:\n  - name: a\x1b\n")
    with pytest.raises(YamlError, match=r"agents.yaml.*not valid YAML.*#x001b"):
        load_agents(doc)


# --- hostile bytes and sizes: every problem is one YamlError naming the file -------------

ONE_ACTION = ("    actions:\n"
              "      - {name: s, function: 'builtins:print', on: [InputEvent]}\n")


@pytest.mark.parametrize("how", ["path", "path string", "bytes", "binary stream"])
def test_bytes_that_are_not_utf8_are_a_yaml_error_naming_file_line_and_column(tmp_path, how):
    data = b"agents:\n  - name: \xff\xfe\n" + ONE_ACTION.encode()
    path = tmp_path / "bad_utf8.yaml"
    path.write_bytes(data)
    source = {"path": path, "path string": str(path), "bytes": data,
              "binary stream": path.open("rb")}[how]
    with pytest.raises(YamlError) as err:
        load_agents(source)
    name = "<string>" if how == "bytes" else str(path)
    assert err.value.source == name
    assert err.value.problems == [
        f"{name}:2: byte 18 (column 11: 0xff) is not UTF-8 (invalid start byte); save the "
        "file as UTF-8"]
    assert err.value.__cause__ is None


def test_a_document_over_the_size_limit_is_refused_before_it_is_read(tmp_path, monkeypatch):
    monkeypatch.setattr(_nodes, "MAX_SOURCE_BYTES", 1000)
    path = tmp_path / "big.yaml"
    path.write_text("agents:\n  - name: " + "a" * 2000 + "\n")
    for source, name in ((path, str(path)), (path.read_text(), "<string>"),
                         (path.read_bytes(), "<string>")):
        with pytest.raises(YamlError) as err:
            load_agents(source)
        assert err.value.problems == [f"{name}: the document is bigger than 1,000 bytes (0 MiB), "
                                      "which no document of agents needs; it is not read"]
    assert _nodes.MAX_SOURCE_BYTES == 1000 and 16 * 1024 * 1024 > 1000


def test_the_documented_size_limit_is_16_mib():
    assert _nodes.MAX_SOURCE_BYTES == 16 * 1024 * 1024
    big = "agents:\n  - name: " + "a" * _nodes.MAX_SOURCE_BYTES + "\n"
    with pytest.raises(YamlError, match="bigger than 16,777,216 bytes"):
        load_agents(big)


@pytest.mark.parametrize("where", ["agent", "action", "resource", "unknown key"])
def test_a_huge_value_is_clipped_in_every_message(where):
    huge = "x" * 1_000_000
    doc = {
        "agent": f"agents:\n  - name: {huge}\n{ONE_ACTION}",
        "action": f"agents:\n  - name: a\n    actions:\n      - {{name: {huge}, "
                  "function: 'builtins:print', on: [InputEvent]}\n",
        "resource": f"agents:\n  - name: a\n{ONE_ACTION}    prompts:\n      - {{name: {huge}, "
                    "text: hi}\n",
        "unknown key": f"agents:\n  - name: a\n    {huge[:1000]}: 1\n{ONE_ACTION}",  # YAML
        # keys of plain style have at most 1024 characters
    }[where]
    with pytest.raises(YamlError) as err:
        load_agents(doc)
    assert len(str(err.value)) < 5000
    assert "characters cut" in str(err.value)


def test_a_name_over_the_length_limit_is_refused_with_a_clear_message():
    from flink_agents_py.yaml._specs import MAX_NAME_CHARS
    ok = "n" * MAX_NAME_CHARS
    assert list(load_agents(f"agents:\n  - name: {ok}\n{ONE_ACTION}")) == [ok]
    with pytest.raises(YamlError) as err:
        load_agents(f"agents:\n  - name: {ok}n\n{ONE_ACTION}")
    assert err.value.problems[0].startswith("<string>:2: agents[0].name: name 'nnn")
    assert f"is {MAX_NAME_CHARS + 1} characters long; a name has at most {MAX_NAME_CHARS}" \
        in err.value.problems[0]


def test_a_users_script_outside_the_repository_gets_yaml_errors(tmp_path):
    import os
    import subprocess
    import sys
    import textwrap
    (tmp_path / "bad.yaml").write_bytes(b"agents:\n  - name: \xff\xfe\n")
    (tmp_path / "run.py").write_text(textwrap.dedent("""\
        from flink_agents_py.yaml import YamlError, load_agents
        for source in ("bad.yaml", "agents:\\n  - name: " + "z" * 5_000_000 + "\\n"):
            try:
                load_agents(source)
            except YamlError as e:
                print(len(str(e)), str(e).splitlines()[1][:80])
        """))
    root = str(Path(__file__).resolve().parents[1])
    env = {**os.environ, "PYTHONPATH": root}
    proc = subprocess.run([sys.executable, "run.py"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=90)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert "bad.yaml:2: byte 18 (column 11: 0xff) is not UTF-8" in lines[0]
    assert int(lines[1].split()[0]) < 5000 and "<string>:2: agents[0].name" in lines[1]


@pytest.mark.parametrize("scalar, why", [
    ("9" * 5000, "4300 digits"),  # Python's int refuses to read it
    ("0b" + "1" * 100_000, "more than 4096 bits"),  # read, but no message could quote it
    ("0x" + "f" * 30_000, "more than 4096 bits"),
    ("2001-13-01", "month must be in 1..12"),  # datetime refuses it
    (":".join(["59"] * 300) + ".5", "too large to convert to float"),  # base 60: Overflow
    ("-" + ":".join(["1"] * 200) + ".0", "too large to convert to float"),
    ("!!bool maybe", "'maybe' is not a bool"),  # a KeyError out of PyYAML's constructor
    ("!!timestamp nope", "'nope' is not a timestamp"),  # an AttributeError out of it
])
@pytest.mark.parametrize("as_key", [False, True])
def test_a_scalar_python_cannot_read_or_write_is_a_yaml_error_naming_its_line(scalar, why,
                                                                              as_key):
    """A value Python's ``int`` or ``datetime`` refuses, an integer so long that quoting
    it in any message fails (``ValueError`` from ``repr``), or a base-60 float past a float's
    range (``OverflowError`` from ``float``), was a ``ValueError`` out of the
    reader (a skill folder's front matter made ``load_skills`` fail with it, not with a
    ``SkillError`` naming the folder)."""
    text = f"ok: 1\n? {scalar}\n: 1\n" if as_key else f"ok: 1\nx: {scalar}\n"  # ? : a
    # key longer than the 1,024 characters of a plain one
    with pytest.raises(YamlError) as err:
        read_yaml(text, source="hostile.yaml")
    assert err.value.problems[0].startswith("hostile.yaml:2:"), err.value.problems
    assert why in str(err.value)


def test_a_skill_whose_front_matter_holds_a_float_past_the_range_is_a_skill_error(tmp_path):
    from flink_agents_py.skills import SkillError, load_skills

    folder = tmp_path / "big"
    folder.mkdir()
    (folder / "SKILL.md").write_text("---\nname: big\ndescription: d\nversion: "
                                     + ":".join(["59"] * 300) + ".5\n---\nbody\n")
    with pytest.raises(SkillError, match="too large to convert to float"):
        load_skills([str(folder)])
