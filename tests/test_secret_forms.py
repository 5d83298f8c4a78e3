"""A known key a hostile provider hides in its echo is masked all the same.

Forms: a provider echoes its ``api_key_env`` key word-wrapped (a line break anywhere in
it, log continuation lines indented), inside a MIME base64 dump (76-character lines, one
breaking the key's encoding), as HTML numeric (decimal, hex) or named character
references, as JSON ``\\uXXXX`` escapes of every character, percent-encoded byte by byte,
quoted-printable (a soft line break inside it), with zero-width spaces, and escaped twice
(a JSON string quoted in a JSON string, ``&amp;#103;``). Each is masked in the outputs, the
error records, the log, the journal and the local runner's snapshot, and the text around
it survives.

Places: the exception a failed durable call raises into the action holds the key nowhere,
wherever the provider's exception keeps it: an exception group's sub-exceptions (nested),
a pydantic model attribute (frozen too), a dataclass, a set or frozenset, an exception
inside a list, ``__notes__``, the ``__cause__``/``__context__`` chain, a cycle; one that
cannot be changed in place (a read-only attribute, a ``__str__`` reading a secret it does
not store) is replaced by a masked copy of its type. What the action catches is what a
replay rebuilds from the record. And a user's script run from a directory outside the
repository prints no key.
"""

from __future__ import annotations

import base64
import builtins
import dataclasses
import html
import json
import logging
import os
import pathlib
import quopri
import re
import sqlite3
import subprocess
import sys
import textwrap
import uuid
from typing import Any
from urllib.parse import unquote

import pytest
from pydantic import BaseModel, ConfigDict

from flink_agents_py import AgentsExecutionEnvironment
from flink_agents_py.api import (
    Agent,
    ChatMessage,
    ChatModelConnection,
    ChatModelSetup,
    ChatResponse,
    InputEvent,
    MessageRole,
    OutputEvent,
    ResourceDescriptor,
    ResourceType,
    RunnerContext,
    action,
    mask_secrets,
    register_secret,
)
from flink_agents_py.api._secrets import MIN_SECRET_CHARS
from flink_agents_py.runtime import SqliteJournal

if sys.version_info < (3, 11):
    pytest.skip("exception groups are Python 3.11's", allow_module_level=True)
ExceptionGroup: Any = builtins.ExceptionGroup  # noqa: A001 - Python 3.11's, named for 3.10's linters

ROOT = pathlib.Path(__file__).resolve().parents[1]
VENV_PYTHON = ROOT / ".venv" / "bin" / "python"
PYTHON = str(VENV_PYTHON if VENV_PYTHON.exists() else pathlib.Path(sys.executable))


def _wrapped(key: str) -> str:
    return "\n".join(textwrap.wrap(f"the key you sent was {key}", 30))


def _mime(key: str) -> str:
    dump = (f"GET /v1 HTTP/1.1\r\nHost: api.example.com\r\nX-Trace: 0123456789abcdef\r\n"
            f"Authorization: Bearer {key}\r\n")
    return "request dump (base64):\n" + base64.encodebytes(dump.encode()).decode()


def _json_in_json(key: str) -> str:
    return json.dumps({"error": json.dumps({"detail": f"bad key {key[:11]}\n  {key[11:]}"})})


HIDDEN: dict[str, Any] = {
    "word-wrapped": _wrapped,
    "log continuation lines": lambda k: f"key: {k[:9]}\n  {k[9:30]}\n  {k[30:]}",
    "mime base64": _mime,
    "html decimal references": lambda k: "".join(f"&#{ord(c)};" for c in k),
    "html hex references, wrapped": lambda k: "\n".join(f"&#x{ord(c):X};" for c in k),
    "json unicode escapes": lambda k: "".join(f"\\u{ord(c):04x}" for c in k),
    "percent-encoded bytes": lambda k: "".join(f"%{b:02X}" for b in k.encode()),
    "quoted-printable": lambda k: quopri.encodestring(("x" * 60 + k).encode()).decode(),
    "zero-width spaces": lambda k: "\u200b".join(k),
    "json string in a json string": _json_in_json,
    "html escaped twice": lambda k: "".join(f"&amp;#{ord(c)};" for c in k),
}
"""How a provider's error body hides the key it quotes."""


def _views(text: str) -> list[str]:
    """``text`` and what it reads as once a form of ``HIDDEN`` is undone (a test's own)."""
    flat = re.sub(r"(?:\\+[nr]|\s|\u200b|=\n)+", "", text)
    views = [text, flat, html.unescape(html.unescape(flat)), unquote(flat),
             re.sub(r"\\u([0-9a-fA-F]{4})", lambda m: chr(int(m.group(1), 16)), flat)]
    for run in re.findall(r"[A-Za-z0-9+/=]{16,}", flat):
        for shift in range(4):
            chunk = run[shift:]
            try:
                views.append(base64.b64decode(chunk + "=" * (-len(chunk) % 4))
                             .decode("latin-1"))
            except ValueError:
                continue
    return views


def assert_no_key(key: str, text: str, where: str) -> None:
    for view in _views(text):
        assert key not in view, f"the key reached {where}"


# -- forms ------------------------------------------------------------------------------------
@pytest.mark.parametrize("form", sorted(HIDDEN))
def test_mask_secrets_finds_a_hidden_key_and_masks_only_its_span(form):
    key = f"gk{uuid.uuid4().hex}{uuid.uuid4().hex[:8]}"
    register_secret(key)
    hidden = HIDDEN[form](key)
    assert key not in hidden  # each really hides it
    masked = mask_secrets(f"401 from the gateway <{hidden}> end")
    assert masked.startswith("401 from the gateway <") and masked.endswith("> end")
    assert "[REDACTED]" in masked
    assert_no_key(key, masked, form)


def test_a_key_with_punctuation_hidden_and_escaped_is_masked():
    key = f"Aw9/{uuid.uuid4().hex[:12]}+Zk=Qp"
    register_secret(key)
    for text in (f"{key[:6]}\n  {key[6:]}", "".join(f"&#{ord(c)};" for c in key),
                 key.replace("/", "&sol;").replace("+", "&plus;"),
                 "\\/".join(key.split("/")).replace("+", "\n\\u002B")):
        assert mask_secrets(f"<{text}>") == "<[REDACTED]>", text


@pytest.mark.parametrize("encode", [
    lambda k: quopri.encodestring(f"the key: {k}".encode()).decode(),  # '=' as '=3D'
    lambda k: quopri.encodestring(("x" * 50 + k).encode()).decode(),  # and a soft break
    lambda k: quopri.encodestring(k.encode(), header=True).decode(),  # '_' as '=5F'
    lambda k: quopri.encodestring(f"{k}\u00e9".encode(), quotetabs=True).decode(),
], ids=["body", "soft break", "header", "next to non-ascii"])
def test_a_key_with_equals_signs_quoted_printable_is_masked(encode):
    """An Azure-style key (``==`` padding, ``_``) in a quoted-printable mail or dump."""
    key = f"az_{uuid.uuid4().hex[:20]}/Q+{uuid.uuid4().hex[:6]}=="
    register_secret(key)
    text = encode(key)
    assert key not in text and ("=3D" in text or "=5F" in text)  # really encoded
    masked = mask_secrets(f"<{text}>")
    assert "[REDACTED]" in masked
    assert key not in quopri.decodestring(masked.encode()).decode("utf-8", "replace")
    for part in (key[3:15], key[-14:-2]):
        assert part not in masked


def test_a_key_read_with_surrounding_whitespace_is_masked_as_a_client_sends_it(monkeypatch):
    """A key file's trailing newline is in ``$VAR``; a client strips it, then encodes it."""
    key = f"kf{uuid.uuid4().hex[:24]}"
    monkeypatch.setenv("KEY_FROM_FILE", f" {key}\n")
    from flink_agents_py.api._secrets import secret_from_env

    secret_from_env("KEY_FROM_FILE")
    for prefix in ("", "u:", "us:"):  # every base64 alignment of a Basic header
        basic = base64.b64encode(f"{prefix}{key}".encode()).decode()
        masked = mask_secrets(f"Authorization: Basic {basic}")
        assert "[REDACTED]" in masked
        assert_no_key(key, masked, "a Basic header")
    assert mask_secrets(key.encode().hex()) == "[REDACTED]"


def test_values_too_short_and_text_without_a_key_are_left_as_they_are():
    short = "a1b2c3d"[: MIN_SECRET_CHARS - 1]
    assert not register_secret(short)
    text = f"{short[:3]}\n  {short[3:]} &#97;&#49; %61%31 word-\nwrapped &amp; \\u0041"
    assert mask_secrets(text) == text


# -- the exits of a run -----------------------------------------------------------------------
class HidingConnection(ChatModelConnection):
    """A provider failing with a 401 that quotes its key, hidden as its model names."""

    api_key_env: str = "HIDING_GATEWAY_KEY"

    def chat(self, messages: Any, *, model: str | None = None, **kwargs: Any) -> Any:
        """Fail, quoting the key in the form ``model`` names."""
        key = os.environ[self.api_key_env]
        raise RuntimeError(f"401 from the gateway: {HIDDEN[model or ''](key)}")


class Reporter(Agent):
    """Asks the model its record names; outputs and logs the failure (or raises it)."""

    @action(InputEvent)
    @staticmethod
    async def ask(event: InputEvent, ctx: RunnerContext) -> None:
        """Ask; on failure output and log its text, or fail the action."""
        try:
            await ctx.chat(event.input["model"], [ChatMessage(content="hi")])
        except Exception as e:
            if event.input.get("raise"):
                raise
            logging.getLogger("user.agent").warning("chat failed: %s", e, exc_info=True)
            ctx.send_event(OutputEvent(output={"error": str(e), "args": list(e.args)}))


def _reporter() -> Reporter:
    agent = Reporter()
    agent.add_resource("conn", ResourceType.CHAT_MODEL_CONNECTION,
                       ResourceDescriptor(HidingConnection))
    for i, form in enumerate(sorted(HIDDEN)):
        agent.add_resource(f"m{i}", ResourceType.CHAT_MODEL, ResourceDescriptor(
            ChatModelSetup, connection="conn", model=form))
    return agent


def _journal_text(path: pathlib.Path) -> str:
    with sqlite3.connect(path) as db:
        tables = [t for (t,) in db.execute("select name from sqlite_master where type='table'")]
        return repr([row for t in tables for row in db.execute(f"select * from {t}")])


def test_a_hidden_key_is_masked_at_every_exit(tmp_path, monkeypatch, caplog):
    key = f"gk{uuid.uuid4().hex}{uuid.uuid4().hex[:8]}"  # not secret-looking: known only
    monkeypatch.setenv("HIDING_GATEWAY_KEY", key)
    caplog.set_level(logging.DEBUG)
    records = [{"key": f"{form}/{how}", "model": f"m{i}", "raise": how == "raise"}
               for i, form in enumerate(sorted(HIDDEN)) for how in ("catch", "raise")]
    journal = tmp_path / "journal.sqlite"
    job = (AgentsExecutionEnvironment.local(journal=SqliteJournal(str(journal),
                                                                  retention_s=3600))
           .from_list(records).apply(_reporter()))
    result = job.run()
    assert len(result.outputs) == len(HIDDEN) and len(result.errors) == len(HIDDEN)
    exits = {"the outputs": json.dumps(result.outputs),
             "the error records": "\n".join(e.model_dump_json() for e in result.errors),
             "the log": "\n".join(r.getMessage() + (r.exc_text or "") for r in caplog.records),
             "the journal": _journal_text(journal),
             "the snapshot": json.dumps(job.snapshot())}
    for where, text in exits.items():
        assert_no_key(key, text, where)
    for output in result.outputs:
        assert "401 from the gateway: " in output["error"]
        assert "[REDACTED]" in output["error"]
    assert "401 from the gateway" in exits["the log"]
    assert "401 from the gateway" in exits["the journal"]


# -- the places of an exception ---------------------------------------------------------------
class Detail(BaseModel):
    """A provider SDK's error detail."""

    message: str
    tried: list[str] = []


class FrozenDetail(BaseModel):
    """The same, frozen, taking extra fields."""

    model_config = ConfigDict(frozen=True, extra="allow")
    message: str


@dataclasses.dataclass(frozen=True)
class Attempt:
    """One attempt of a provider SDK's retry loop."""

    url: str
    headers: dict[str, str]


class ReadOnly(Exception):
    """An exception whose ``body`` cannot be set."""

    def __init__(self, body: str) -> None:
        super().__init__("401 unauthorized")
        self._body = body

    @property
    def body(self) -> str:
        """The body (read-only)."""
        return self._body

    def __str__(self) -> str:
        return f"401 unauthorized: {self._body}"

    def __setattr__(self, name: str, value: Any) -> None:
        if name in ("_body", "args") and hasattr(self, "_body"):
            raise AttributeError(f"{name} is read-only")
        super().__setattr__(name, value)


class Sealed(Exception):
    """An exception whose text reads the key from somewhere it does not store."""

    def __str__(self) -> str:
        return f"401 for key {os.environ['PLACES_GATEWAY_KEY']}"


def _failure(place: str) -> BaseException:
    key = os.environ["PLACES_GATEWAY_KEY"]
    if place == "exception group, nested":
        return ExceptionGroup(f"all attempts failed ({key})", [
            ValueError("first"),
            ExceptionGroup("retries", [ConnectionError(f"401 for {key}")])])
    if place == "pydantic model":
        e = RuntimeError("401 unauthorized")
        e.detail = Detail(message=f"key {key} revoked", tried=[key])  # type: ignore[attr-defined]
        return e
    if place == "frozen pydantic model with extras":
        e = RuntimeError("401 unauthorized")
        e.detail = FrozenDetail(message=f"key {key}", echo=key)  # type: ignore[attr-defined]
        return e
    if place == "dataclass":
        e = RuntimeError("401 unauthorized")
        e.attempt = Attempt(url=f"https://api/?k={key}",  # type: ignore[attr-defined]
                            headers={"authorization": key})
        return e
    if place == "set and frozenset":
        e = RuntimeError("401 unauthorized")
        e.tried = {key, "other"}  # type: ignore[attr-defined]
        e.keys = frozenset({(key, 1)})  # type: ignore[attr-defined]
        return e
    if place == "exception in a list":
        e = RuntimeError("all attempts failed")
        e.errors = [ValueError(f"401 for {key}")]  # type: ignore[attr-defined]
        return e
    if place == "notes":
        e = RuntimeError("401 unauthorized")
        e.add_note(f"sent key {key}")
        return e
    if place == "cause and context chain with a group":
        try:
            try:
                raise ExceptionGroup("inner", [KeyError(key)])
            except ExceptionGroup as inner:
                raise OSError(13, "denied", f"/keys/{key}") from inner
        except OSError as outer:
            try:
                raise RuntimeError("401 unauthorized")  # noqa: TRY301
            except RuntimeError as e:
                assert e.__context__ is outer
                return e
    if place == "cycle":
        e = RuntimeError(f"401 for {key}")
        loop: list[Any] = [key]
        loop.append(loop)
        e.loop = loop  # type: ignore[attr-defined]
        e.__context__ = ValueError("again")
        e.__context__.__context__ = e
        return e
    if place == "read-only attribute":
        return ReadOnly(f"key {key}")
    if place == "a __str__ reading the key":
        return Sealed()
    raise AssertionError(place)


PLACES = ("exception group, nested", "pydantic model", "frozen pydantic model with extras",
          "dataclass", "set and frozenset", "exception in a list", "notes",
          "cause and context chain with a group", "cycle", "read-only attribute",
          "a __str__ reading the key")


def call_provider(place: str) -> None:
    """A durable call failing with the key kept in ``place``."""
    raise _failure(place)


def _everything(value: Any, seen: set[int] | None = None) -> list[str]:
    """The texts of everything ``value`` reaches (a test's own walk)."""
    seen = set() if seen is None else seen
    if id(value) in seen:
        return []
    seen.add(id(value))
    out = [repr(value)]
    if isinstance(value, BaseException):
        out.append(str(value))
        parts: list[Any] = [value.args, getattr(value, "__notes__", None), value.__cause__,
                            value.__context__, getattr(value, "exceptions", None)]
        parts += [getattr(value, n, None) for n in ("filename", "message", "body")]
        parts += list(getattr(value, "__dict__", {}).values())
    elif isinstance(value, dict):
        parts = [*value.keys(), *value.values()]
    elif isinstance(value, (list, tuple, set, frozenset)):
        parts = list(value)
    elif isinstance(value, BaseModel):
        parts = [value.model_dump()]
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        parts = [dataclasses.asdict(value)]
    else:
        parts = []
    for part in parts:
        out += _everything(part, seen)
    return out


class Catcher(Agent):
    """Runs the durable call its record names; outputs what it caught."""

    @action(InputEvent)
    @staticmethod
    async def run(event: InputEvent, ctx: RunnerContext) -> None:
        """Chat (the connection registers its key), then make the failing durable call."""
        await ctx.chat("model", [ChatMessage(content="hi")])
        try:
            await ctx.durable_execute_async(call_provider, event.input["place"])
        except BaseException as e:  # noqa: BLE001 - a group too
            place = event.input["place"]
            ctx.send_event(OutputEvent(output={
                "place": place, "type": type(e).__qualname__,
                "is_original_type": isinstance(e, _ORIGINAL_TYPES.get(place, Exception)),
                "seen": _everything(e)}))


_ORIGINAL_TYPES: dict[str, type[BaseException]] = {
    "exception group, nested": ExceptionGroup, "read-only attribute": ReadOnly,
    "a __str__ reading the key": Sealed}


class KeyedConnection(ChatModelConnection):
    """A connection that reads its key and answers."""

    api_key_env: str = "PLACES_GATEWAY_KEY"

    def chat(self, messages: Any, **kwargs: Any) -> Any:
        """Answer (the key is read, so registered)."""
        assert os.environ[self.api_key_env]
        return ChatResponse(message=ChatMessage(role=MessageRole.ASSISTANT, content="ok"))


def test_the_exception_a_failed_durable_call_raises_holds_no_key_anywhere(tmp_path,
                                                                         monkeypatch):
    key = f"pk{uuid.uuid4().hex}"
    monkeypatch.setenv("PLACES_GATEWAY_KEY", key)
    agent = Catcher()
    agent.add_resource("conn", ResourceType.CHAT_MODEL_CONNECTION,
                       ResourceDescriptor(KeyedConnection))
    agent.add_resource("model", ResourceType.CHAT_MODEL,
                       ResourceDescriptor(ChatModelSetup, connection="conn", model="m"))
    journal = tmp_path / "journal.sqlite"
    job = (AgentsExecutionEnvironment.local(journal=SqliteJournal(str(journal),
                                                                  retention_s=3600))
           .from_list([{"key": p, "place": p} for p in PLACES]).apply(agent))
    result = job.run()
    assert result.errors == []
    assert sorted(o["place"] for o in result.outputs) == sorted(PLACES)
    for output in result.outputs:
        assert_no_key(key, json.dumps(output["seen"]), f"the action, kept in {output['place']}")
        assert "[REDACTED]" in json.dumps(output["seen"]), output["place"]
        assert output["is_original_type"], output  # a masked copy keeps its type
    assert_no_key(key, _journal_text(journal), "the journal")
    assert_no_key(key, json.dumps(job.snapshot()), "the snapshot")


@pytest.mark.parametrize("place", ["pydantic model", "frozen pydantic model with extras",
                                   "set and frozenset", "notes", "exception in a list"])
def test_what_the_action_catches_is_what_a_replay_rebuilds(monkeypatch, place):
    from flink_agents_py.runtime.recorder._outcomes import rebuild_exception, store_outcome
    from flink_agents_py.runtime.recorder._state import CallRecord

    key = f"rk{uuid.uuid4().hex}"
    monkeypatch.setenv("PLACES_GATEWAY_KEY", key)
    register_secret(key)
    rec = CallRecord(digest="d")
    ok, live = store_outcome(rec, "c1", False, _failure(place))
    assert not ok
    replayed = rebuild_exception(rec)
    assert_no_key(key, json.dumps(_everything(live)), f"the live exception ({place})")
    assert_no_key(key, json.dumps(_everything(replayed)), f"the replayed one ({place})")
    assert str(live) == str(replayed)
    for name, value in vars(replayed).items():
        if not name.startswith("_"):
            assert getattr(live, name) == value, name


# -- a user's script --------------------------------------------------------------------------
USER_SCRIPT = '''
"""A user's job: a gateway echoing its key wrapped, in base64 and as HTML references."""
import base64, json, logging, os, sys, textwrap

from flink_agents_py import AgentsExecutionEnvironment
from flink_agents_py.api import (Agent, ChatMessage, ChatModelConnection, ChatModelSetup,
    InputEvent, OutputEvent, ResourceDescriptor, ResourceType, RunnerContext, action)

logging.basicConfig(level=logging.DEBUG, stream=sys.stderr)


class Gateway(ChatModelConnection):
    api_key_env: str = "USER_GATEWAY_KEY"

    def chat(self, messages, *, model=None, **kwargs):
        key = os.environ[self.api_key_env]
        if model == "wrapped":
            raise RuntimeError("401\\n" + "\\n".join(textwrap.wrap("bad key " + key, 25)))
        if model == "base64":
            dump = base64.encodebytes(("x" * 40 + "Authorization: Bearer " + key).encode())
            raise RuntimeError("401 dump:\\n" + dump.decode())
        raise RuntimeError("401 <p>" + "".join(f"&#{ord(c)};" for c in key) + "</p>")


def refuse(key):
    raise ExceptionGroup("retries failed", [ValueError("401 for " + key)])


class Job(Agent):
    @action(InputEvent)
    @staticmethod
    async def go(event: InputEvent, ctx: RunnerContext) -> None:
        try:
            await ctx.chat(event.input["model"], [ChatMessage(content="hi")])
        except Exception as e:
            print("CAUGHT", e, flush=True)
            if event.input.get("raise"):
                raise
        try:
            await ctx.durable_execute_async(refuse, os.environ["USER_GATEWAY_KEY"])
        except ExceptionGroup as e:
            ctx.send_event(OutputEvent(output={"sub": str(e.exceptions[0])}))


agent = Job()
agent.add_resource("conn", ResourceType.CHAT_MODEL_CONNECTION, ResourceDescriptor(Gateway))
for m in ("wrapped", "base64", "html"):
    agent.add_resource(m, ResourceType.CHAT_MODEL, ResourceDescriptor(
        ChatModelSetup, connection="conn", model=m))
result = (AgentsExecutionEnvironment.local()
          .from_list([{"key": f"{m}/{r}", "model": m, "raise": r}
                      for m in ("wrapped", "base64", "html") for r in (False, True)])
          .apply(agent).run())
for o in result.outputs:
    print("OUT", json.dumps(o), flush=True)
for e in result.errors:
    print("ERROR", e.model_dump_json(), flush=True)
'''


def test_a_users_script_outside_the_repository_prints_no_hidden_key(tmp_path):
    key = f"uk{uuid.uuid4().hex}{uuid.uuid4().hex[:6]}"
    script = tmp_path / "job.py"
    script.write_text(USER_SCRIPT)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "USER_GATEWAY_KEY": key}
    proc = subprocess.run([PYTHON, str(script)], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.count("CAUGHT RuntimeError: 401") == 6
    assert proc.stdout.count("OUT ") == 3 and proc.stdout.count("ERROR ") == 3
    assert proc.stdout.count('"sub": "401 for [REDACTED]"') == 3
    assert_no_key(key, proc.stdout, "the script's stdout")
    assert_no_key(key, proc.stderr, "the script's stderr")
