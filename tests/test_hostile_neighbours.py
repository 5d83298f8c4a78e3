"""Hostile input next to defects fixed before: each test is what an attacker would try.

- A record (or a durable call's result) holding a dict shaped like the runtime's stored form
  of a pydantic model (``{"$model": "pkg.mod:Class", "data": ...}``) is data: the module it
  names is never imported, nothing it names is called, and the action, the durable call's
  caller and the output see the dict exactly as it was sent; an event field named like the
  event class tag (``$class``, an extra field filled from a record) is refused, never
  imported.
- ``load_skill`` reads a file of a skill's folder without following a symlink swapped in
  after its check (a writable skill's command can swap a folder for a symlink out while
  the tool reads).
- A known secret echoed by a provider whose encoder escaped some of its characters only
  (PHP's ``\\/``, .NET's ``\u002B`` and lower-case ``%2b``, ``quote``'s default safe ``/``,
  upper-case hex) is masked in error records and the event log as its plain form is.
- A stdio MCP server writing the ``secret_env`` value it was given to its stderr: the line
  reaches this process's stderr with the value masked.
- A provider echoing its key in a successful answer (its text, its metadata): the answer is
  recorded (keyed state, the journal) and handed to the action with the key masked, so it
  reaches neither memory nor outputs.
- Short-term memory paths, keys and payload field names made from huge record fields are
  not kept (in the path cache, the decoded-key cache, the event log redactor's cache).
"""

from __future__ import annotations

import asyncio
import gc
import json
import os
import re
import sqlite3
import subprocess
import sys
import textwrap
import tracemalloc
import uuid
from pathlib import Path
from typing import Any, ClassVar
from urllib.parse import quote

import pytest
from pydantic import ConfigDict

from flink_agents_py import AgentsExecutionEnvironment
from flink_agents_py.api import (
    Agent,
    ChatMessage,
    ChatModelConnection,
    ChatModelSetup,
    ChatResponse,
    Event,
    InputEvent,
    MessageRole,
    OutputEvent,
    ResourceDescriptor,
    ResourceType,
    RunnerContext,
    SerializationError,
    action,
    mask_secrets,
)
from flink_agents_py.integrations.mcp import McpServer
from flink_agents_py.observability import EventLog, MemorySink, Redactor
from flink_agents_py.runtime import SqliteJournal
from flink_agents_py.runtime._serde import from_json_value, to_json_value
from flink_agents_py.skills import MAX_LISTED_FILES, MAX_WALKED_ENTRIES, LoadSkillTool, SkillError

EVIL_MODULE = "hostile_neighbours_planted"


@pytest.fixture()
def planted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An importable module that writes a file when imported and when its class is called.

    Returns:
        The file it writes (absent while nothing imported or called it).
    """
    marker = tmp_path / "imported.txt"
    (tmp_path / f"{EVIL_MODULE}.py").write_text(textwrap.dedent(f"""
        with open({str(marker)!r}, "a") as f:
            f.write("imported\\n")


        class Payload:
            @staticmethod
            def model_validate(data):
                with open({str(marker)!r}, "a") as f:
                    f.write("called\\n")
                return "replaced by the planted class"
    """))
    monkeypatch.syspath_prepend(str(tmp_path))
    yield marker
    sys.modules.pop(EVIL_MODULE, None)


def _tag_shaped(data: Any) -> dict[str, Any]:
    return {"$model": f"{EVIL_MODULE}:Payload", "data": data}


class EchoAgent(Agent):
    """Echoes its input, and what a durable call returned of the input's ``payload``."""

    @action(InputEvent)
    @staticmethod
    def echo(event: InputEvent, ctx: RunnerContext) -> None:
        """Output the input as the action saw it and the durable call's result."""
        returned = ctx.durable_execute(_identity, event.input["payload"])
        ctx.send_event(OutputEvent(output={"seen": event.input, "returned": returned}))


def _identity(value: Any) -> Any:
    return value


def test_a_record_shaped_like_a_stored_model_is_data_never_imported_or_called(planted):
    payload = {"nested": [_tag_shaped({"x": 1})], **_tag_shaped({"y": 2})}
    record = {"key": "k", "payload": _tag_shaped({"z": 3}), "more": payload}
    result = AgentsExecutionEnvironment.local().from_list([record]).apply(EchoAgent()).run()
    assert result.errors == []
    assert result.outputs == [{"seen": record, "returned": _tag_shaped({"z": 3})}]
    assert not planted.exists(), planted.read_text()
    assert EVIL_MODULE not in sys.modules


@pytest.mark.parametrize("value", [
    _tag_shaped({"a": 1}),
    {"$model": None, "data": {"a": 1}},
    {"$model": 7, "data": [1]},
    [{"k": _tag_shaped(_tag_shaped("deep"))}],
])
def test_a_tag_shaped_plain_value_survives_its_stored_form(planted, value):
    assert from_json_value(to_json_value(value, "test")) == value
    assert not planted.exists()


def test_a_stored_tag_naming_something_that_is_not_a_model_is_refused_not_called(planted):
    with pytest.raises(SerializationError, match="not a pydantic model"):
        from_json_value(_tag_shaped({"a": 1}))
    assert planted.read_text() == "imported\n"  # the class was looked up, never called


# -- load_skill: a folder swapped for a symlink after the check -------------------------------
def _racy_skill(tmp_path: Path) -> tuple[Path, Path]:
    skill = tmp_path / "racy"
    (skill / "sub").mkdir(parents=True)
    (skill / "SKILL.md").write_text("---\nname: racy\ndescription: d\n---\nhi\n")
    (skill / "sub" / "notes.md").write_text("the skill's own notes\n")
    outside = tmp_path / "host"
    outside.mkdir()
    (outside / "notes.md").write_text("HOST-SECRET\n")
    return skill, outside


def test_a_folder_swapped_for_a_symlink_after_the_check_is_never_followed(tmp_path,
                                                                          monkeypatch):
    """A writable skill's command may swap ``sub`` for a symlink out while load_skill runs."""
    skill, outside = _racy_skill(tmp_path)
    tool = LoadSkillTool(paths=[str(skill)])
    read = asyncio.run(tool.acall("racy", "sub/notes.md"))
    assert read == {"file": "sub/notes.md", "text": "the skill's own notes\n"}
    (skill / "sub").rename(skill / "sub_real")
    (skill / "sub").symlink_to(outside)  # swapped: as the check saw it, still a folder
    monkeypatch.setattr(Path, "resolve", lambda self, strict=False: Path(os.path.abspath(self)))
    with pytest.raises(SkillError, match="never followed") as e:
        asyncio.run(tool.acall("racy", "sub/notes.md"))
    assert "HOST-SECRET" not in str(e.value)


def test_a_symlink_inside_the_folder_to_its_own_file_still_reads(tmp_path):
    skill, _ = _racy_skill(tmp_path)
    (skill / "alias").symlink_to("sub")
    (skill / "notes-link.md").symlink_to(skill / "sub" / "notes.md")
    tool = LoadSkillTool(paths=[str(skill)])
    for name in ("alias/notes.md", "notes-link.md", "./sub/../sub/notes.md"):
        assert asyncio.run(tool.acall("racy", name))["text"] == "the skill's own notes\n"


def test_load_skill_racing_a_swapping_process_never_reads_outside(tmp_path):
    """A real race: another process swaps the folder for a symlink out, over and over."""
    skill, outside = _racy_skill(tmp_path)
    tool = LoadSkillTool(paths=[str(skill)])
    stop = tmp_path / "stop"
    swapper = subprocess.Popen([sys.executable, "-c", textwrap.dedent(f"""
        import os
        s, o, stop = {str(skill)!r}, {str(outside)!r}, {str(stop)!r}
        while not os.path.exists(stop):
            os.rename(s + "/sub", s + "/sub_real")
            os.symlink(o, s + "/sub")
            os.unlink(s + "/sub")
            os.rename(s + "/sub_real", s + "/sub")
    """)])
    read: list[str] = []
    try:
        for _ in range(3000):
            try:
                read.append(tool.skill("racy").read("sub/notes.md"))
            except SkillError:
                pass
    finally:
        stop.touch()
        swapper.wait(timeout=30)
    assert read and all(text == "the skill's own notes\n" for text in read)


# -- secrets: a key echoed with some of its characters escaped ---------------------------------
def _escaped_echoes(key: str) -> dict[str, str]:
    """The key as other stacks' encoders echo it, each escaping some characters only."""
    return {
        "PHP json_encode (slashes escaped)": json.dumps(key)[1:-1].replace("/", "\\/"),
        ".NET System.Text.Json (+ as \\u002B)": json.dumps(key)[1:-1].replace("+", "\\u002B"),
        "JSON, every symbol escaped": "".join(
            c if c.isalnum() else f"\\u{ord(c):04x}" for c in key),
        ".NET HttpUtility.UrlEncode (lower-case hex)": re.sub(
            "%[0-9A-F]{2}", lambda m: m.group().lower(), quote(key, safe="")),
        "quote() with its default safe '/'": quote(key),
        "hex, upper case": key.encode().hex().upper(),
    }


class EscapingConnection(ChatModelConnection):
    """A provider that echoes its key in a 401 the ways other stacks encode it."""

    api_key_env: str = "ESCAPING_PROVIDER_KEY"

    def chat(self, messages: Any, **kwargs: Any) -> Any:
        """Fail, echoing the key (escaped by several encoders)."""
        key = os.environ[self.api_key_env]
        body = "; ".join(f"{name}: {form}" for name, form in _escaped_echoes(key).items())
        raise RuntimeError(f"401 from the gateway: {body}")


class Asker(Agent):
    """Asks the model once (a failed chat fails the action)."""

    @action(InputEvent)
    @staticmethod
    async def ask(event: InputEvent, ctx: RunnerContext) -> None:
        """Ask the model."""
        await ctx.chat("model", [ChatMessage(content="hi")])


def test_a_key_echoed_with_some_characters_escaped_is_masked_at_every_exit(monkeypatch,
                                                                           caplog):
    key = f"Aw9/{uuid.uuid4().hex[:12]}+Zk=Qp"  # an AWS-style secret: '/', '+' and '='
    monkeypatch.setenv("ESCAPING_PROVIDER_KEY", key)
    echoes = _escaped_echoes(key)
    for name, form in echoes.items():
        assert key not in form, name  # each really is another form
    agent = Asker()
    agent.add_resource("conn", ResourceType.CHAT_MODEL_CONNECTION,
                       ResourceDescriptor(EscapingConnection))
    agent.add_resource("model", ResourceType.CHAT_MODEL,
                       ResourceDescriptor(ChatModelSetup, connection="conn", model="m"))
    sink = MemorySink()
    result = (AgentsExecutionEnvironment.local(event_log=EventLog(sink=sink, level="verbose"))
              .from_list([{"key": "k"}]).apply(agent).run())
    [error] = result.errors
    exits = {"the error record": error.model_dump_json(),
             "the event log": json.dumps(sink.records),
             "the log": "\n".join(r.getMessage() + (r.exc_text or "") for r in caplog.records)}
    for where, text in exits.items():
        assert "401 from the gateway" in text
        for name, form in echoes.items():
            assert form not in text, f"the key, as {name}, reached {where}"
            assert mask_secrets(f"<{form}>") == "<[REDACTED]>", name


# -- MCP: a stdio server writing the secret it was given to its stderr ------------------------
ECHOING_SERVER = '''
import os, sys
sys.path.insert(0, {tests!r})
from test_mcp_fixture_server import build

token = os.environ["TOKEN"]
sys.stderr.write(f"starting with token {{token}}\\n")
sys.stderr.write(f"debug: Authorization: Bearer {{token}} (no newline, split: ")
sys.stderr.flush()
sys.stderr.write(f"{{token[:5]}}")
sys.stderr.flush()
sys.stderr.write(f"{{token[5:]}})\\n")
sys.stderr.flush()
build().run("stdio")
'''


def test_a_stdio_mcp_servers_stderr_never_carries_its_secret_env(tmp_path, monkeypatch, capfd):
    pytest.importorskip("mcp")
    token = f"mcp-tok-{uuid.uuid4().hex}"
    monkeypatch.setenv("HOSTILE_MCP_TOKEN", token)
    script = tmp_path / "echoing_server.py"
    script.write_text(ECHOING_SERVER.format(tests=str(Path(__file__).resolve().parent)))
    server = McpServer(command=[sys.executable, str(script)],
                       secret_env={"TOKEN": "HOSTILE_MCP_TOKEN"}, list_at_plan_build=False)
    try:
        assert server.call_tool("add", {"a": 2, "b": 3}) == 5  # the server runs as before
    finally:
        server.close()
    err = capfd.readouterr().err
    assert token not in err and token[5:] not in err
    assert "starting with token [REDACTED]" in err  # what it says still reaches stderr
    assert "split: [REDACTED])" in err


# -- secrets: a provider echoing its key in a successful answer -------------------------------
class EchoingConnection(ChatModelConnection):
    """A gateway that answers, echoing the key in its text and in debug metadata."""

    api_key_env: str = "ECHOING_GATEWAY_KEY"

    def chat(self, messages: Any, **kwargs: Any) -> Any:
        """Answer, quoting the key back."""
        key = os.environ[self.api_key_env]
        return ChatResponse(
            message=ChatMessage(role=MessageRole.ASSISTANT, content=f"debug: you sent {key}"),
            metadata={"request_headers": {"authorization": f"Bearer {key}", "x-key": key}})


class Keeper(Agent):
    """Keeps the answer in memory and emits it."""

    @action(InputEvent)
    @staticmethod
    async def ask(event: InputEvent, ctx: RunnerContext) -> None:
        """Ask, remember and output the answer."""
        response = await ctx.chat("model", [ChatMessage(content="hi")])
        ctx.short_term_memory.set("last", response.content)
        ctx.send_event(OutputEvent(output={"answer": response.content,
                                           "metadata": response.metadata}))


def test_a_key_echoed_in_a_successful_answer_is_recorded_and_seen_masked(tmp_path, monkeypatch):
    key = f"gw-{uuid.uuid4().hex}"
    monkeypatch.setenv("ECHOING_GATEWAY_KEY", key)
    agent = Keeper()
    agent.add_resource("conn", ResourceType.CHAT_MODEL_CONNECTION,
                       ResourceDescriptor(EchoingConnection))
    agent.add_resource("model", ResourceType.CHAT_MODEL,
                       ResourceDescriptor(ChatModelSetup, connection="conn", model="m"))
    journal_file = tmp_path / "journal.sqlite"
    job = (AgentsExecutionEnvironment.local(journal=SqliteJournal(str(journal_file),
                                                                  retention_s=3600))
           .from_list([{"key": "k"}]).apply(agent))
    result = job.run()
    assert result.errors == []
    assert result.outputs == [{"answer": "debug: you sent [REDACTED]", "metadata": {
        "request_headers": {"authorization": "Bearer [REDACTED]", "x-key": "[REDACTED]"}}}]
    with sqlite3.connect(journal_file) as db:
        tables = [t for (t,) in db.execute("select name from sqlite_master where type='table'")]
        journal = repr([row for t in tables for row in db.execute(f"select * from {t}")])
    assert "debug: you sent" in journal  # the recorded answer, masked
    exits = {"the journal": journal, "keyed state": json.dumps(job.snapshot()),
             "the outputs": json.dumps(result.outputs)}
    for where, text in exits.items():
        assert key not in text, f"the echoed key reached {where}"


class OpenNote(Event):
    """An event class that takes any extra field (filled from a record below)."""

    model_config = ConfigDict(extra="allow")
    EVENT_TYPE: ClassVar[str] = "OpenNote"


class NoteTaker(Agent):
    """Sends an ``OpenNote`` made of the record's ``note`` fields, outputs what arrives."""

    @action(InputEvent)
    @staticmethod
    def take(event: InputEvent, ctx: RunnerContext) -> None:
        """Send the note."""
        ctx.send_event(OpenNote(**event.input["note"]))

    @action(OpenNote)
    @staticmethod
    def noted(event: OpenNote, ctx: RunnerContext) -> None:
        """Output the note as it arrived."""
        ctx.send_event(OutputEvent(output={"class": type(event).__name__,
                                           "text": event.model_extra.get("text")}))


def test_an_event_field_named_like_the_class_tag_is_refused_never_imported(planted):
    records = [{"key": "a", "note": {"text": "hi", "$class": f"{EVIL_MODULE}:Payload"}},
               {"key": "b", "note": {"text": "fine"}}]
    result = AgentsExecutionEnvironment.local().from_list(records).apply(NoteTaker()).run()
    assert result.outputs == [{"class": "OpenNote", "text": "fine"}]  # the other record runs
    [error] = result.errors
    assert error.key == "a" and "'$class'" in error.message and "rename the field" in error.message
    assert not planted.exists()
    assert EVIL_MODULE not in sys.modules


# -- memory: a path made from a record is not kept once its run is done -----------------------
class Scratch(Agent):
    """Uses a short-term memory path made from the record's ``name``, then deletes it."""

    @action(InputEvent)
    @staticmethod
    def use(event: InputEvent, ctx: RunnerContext) -> None:
        """Set and delete ``scratch.<name>``."""
        path = "scratch." + event.input["name"]
        ctx.short_term_memory.set(path, 1)
        ctx.short_term_memory.delete(path)
        ctx.send_event(OutputEvent(output=len(path)))


def test_memory_paths_made_from_huge_record_fields_are_not_kept_after_the_job():
    records = [{"key": "k", "name": f"{i}-" + "x" * 1_000_000} for i in range(40)]
    tracemalloc.start()
    try:
        result = AgentsExecutionEnvironment.local().from_list(records).apply(Scratch()).run()
        assert len(result.outputs) == 40 and result.errors == []
        del result, records
        gc.collect()
        retained = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    assert retained < 16 << 20, f"{retained >> 20} MiB of the records' paths kept"


class Counter(Agent):
    """Outputs 1 per record."""

    @action(InputEvent)
    @staticmethod
    def count(event: InputEvent, ctx: RunnerContext) -> None:
        """Output 1."""
        ctx.send_event(OutputEvent(output=1))


def test_keys_made_from_huge_record_fields_are_not_kept_after_the_job():
    records = [{"tenant": "acme", "user": f"{i}-" + "x" * 1_000_000} for i in range(40)]
    tracemalloc.start()
    try:
        result = (AgentsExecutionEnvironment.local()
                  .from_list(records, key_selector=lambda r: (r["tenant"], r["user"]))
                  .apply(Counter()).run())
        assert result.outputs == [1] * 40 and result.errors == []
        del result, records
        gc.collect()
        retained = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    assert retained < 16 << 20, f"{retained >> 20} MiB of the records' keys kept"


def test_a_redactor_keeps_no_huge_field_name_of_the_payloads_it_saw():
    redactor = Redactor()
    tracemalloc.start()
    try:
        for i in range(40):  # a record's field names: any length
            payload = {f"{i}-" + "x" * 1_000_000: "v", "api_key": "sk-hidden"}
            assert redactor(payload)["api_key"] == "[REDACTED]"
        del payload
        gc.collect()
        retained = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    assert retained < 16 << 20, f"{retained >> 20} MiB of field names kept"


def test_a_skill_folder_of_endless_empty_folders_is_walked_only_so_far(tmp_path):
    """A writable skill's command can make folders by the ten thousand; each listing walks
    at most ``MAX_WALKED_ENTRIES`` of them (on the operator's event loop)."""
    skill, _ = _racy_skill(tmp_path)
    deep = skill / "deep"
    deep.mkdir()
    for i in range(MAX_WALKED_ENTRIES + 10):
        (deep / f"d{i}").mkdir()
    loaded = asyncio.run(LoadSkillTool(paths=[str(skill)]).acall("racy"))
    assert loaded["files_cut"] == (f"the listing stops after {MAX_WALKED_ENTRIES} entries of "
                                   f"the folder")
    assert len(loaded["files"]) <= MAX_LISTED_FILES
