"""A model echoing the key it was called with, encoded: every exit masks it.

A prompt injection (in a record, a tool result, a skill's file) can ask a model to write the
API key "base32-encoded", "in UTF-16", "rot13'd", "reversed", as a hex dump... The framework
knows the key by value (it read it from ``api_key_env``): each cheap encoding of it is
precomputed when it is registered (``api/_secret_encodings.py``), so the event log, the
logs and the error records mask it as they mask the key itself.
"""

from __future__ import annotations

import base64
import codecs
import json
import logging
import os
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest

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
from flink_agents_py.api import _secrets as secrets
from flink_agents_py.observability import EventLog, MemorySink

_log = logging.getLogger("test_secret_encodings")


def encodings(key: str) -> dict[str, str]:
    """The key as a model asked to encode it writes it, each one inside other text."""
    raw = key.encode()
    return {
        "base32": base64.b32encode(raw).decode(),
        "base32, no padding, lower case": base64.b32encode(raw).decode().rstrip("=").lower(),
        "base32hex": base64.b32hexencode(raw).decode(),
        "base32 of 'user:key'": base64.b32encode(b"user:" + raw).decode(),
        "base85": base64.b85encode(raw).decode(),
        "ascii85 (Adobe)": "<~" + base64.a85encode(raw).decode() + "~>",
        "ascii85 of 'x' + key": base64.a85encode(b"x" + raw).decode(),
        "UTF-16LE read as Latin-1": key.encode("utf-16-le").decode("latin-1"),
        "UTF-16BE hex": key.encode("utf-16-be").hex(),
        "UTF-16 with BOM, base64": base64.b64encode(key.encode("utf-16")).decode(),
        "UTF-16LE, JSON-escaped": json.dumps(key.encode("utf-16-le").decode("latin-1")),
        "hex, colon-separated": ":".join(f"{b:02x}" for b in raw),
        "hex, a C array": "{" + ", ".join(f"0x{b:02X}" for b in raw) + "}",
        "ROT13": codecs.encode(key, "rot13"),
        "reversed": key[::-1],
        "upper case": key.upper(),
    }


class EncodingEcho(ChatModelConnection):
    """A model that obeys an injection: it answers with its key in every encoding."""

    api_key_env: str = "ENCODING_ECHO_KEY"

    def chat(self, messages: Any, **kwargs: Any) -> Any:
        """Answer with the key, encoded."""
        key = os.environ[self.api_key_env]
        text = "\n".join(f"{name}: {form}" for name, form in encodings(key).items())
        return ChatResponse(message=ChatMessage(role=MessageRole.ASSISTANT, content=text))


class Relay(Agent):
    """Logs the answer, records it and fails on it (the three exits of a run)."""

    @action(InputEvent)
    @staticmethod
    async def ask(event: InputEvent, ctx: RunnerContext) -> None:
        """Ask the model; log its answer; output it; fail with it for one record."""
        answer = (await ctx.chat("model", [ChatMessage(content="encode it")])).content
        _log.warning("the model said: %s", answer)
        if event.input["fail"]:
            raise RuntimeError(f"refusing the answer {answer}")
        ctx.send_event(OutputEvent(output="done"))


def test_a_key_echoed_in_any_cheap_encoding_is_masked_at_every_exit(monkeypatch, caplog):
    key = f"sk-proj-{uuid.uuid4().hex[:10]}Zx9/Qw3+Er{uuid.uuid4().hex[:10]}"
    monkeypatch.setenv("ENCODING_ECHO_KEY", key)
    caplog.set_level(logging.WARNING)
    agent = Relay()
    agent.add_resource("conn", ResourceType.CHAT_MODEL_CONNECTION, ResourceDescriptor(EncodingEcho))
    agent.add_resource(
        "model",
        ResourceType.CHAT_MODEL,
        ResourceDescriptor(ChatModelSetup, connection="conn", model="m"),
    )
    sink = MemorySink()
    result = (
        AgentsExecutionEnvironment.local(event_log=EventLog(sink=sink, level="verbose"))
        .from_list([{"key": "ok", "fail": False}, {"key": "bad", "fail": True}])
        .apply(agent)
        .run()
    )
    [error] = result.errors
    exits = {
        "the error record": error.model_dump_json(),
        "the event log": json.dumps(sink.records),
        "the log": "\n".join(r.getMessage() for r in caplog.records),
    }
    for where, text in exits.items():
        assert "base32: [REDACTED]" in text or "base32: [REDACTED]" in json.loads(
            json.dumps(text)
        ), where
        for name, form in encodings(key).items():
            for shown in (form, json.dumps(form)[1:-1]):
                assert shown not in text, f"the key, as {name}, reached {where}"


@pytest.mark.parametrize("name", sorted(encodings("k" * 20)))
def test_each_encoding_is_masked_where_it_stands_and_nothing_around_it(name):
    key = f"Aw9/{uuid.uuid4().hex[:16]}+Zk=Qp"
    register_secret(key)
    form = encodings(key)[name]
    masked = mask_secrets(f"before {form} after")
    assert masked.startswith("before ") and masked.endswith(" after"), masked
    assert "[REDACTED]" in masked
    # what is left of the form is at most its padding or framing, never a run of the key's
    left = masked.removeprefix("before ").removesuffix(" after").replace("[REDACTED]", "")
    assert len(left) <= 16, (name, left)  # a partial group at either end, padding, framing


def test_the_encodings_never_run_through_the_full_regexes(monkeypatch):
    """About 60 forms a key: as regex alternatives, five keys made 2.6 MB take 6 s."""
    key = f"sk-{uuid.uuid4().hex}"
    register_secret(key)
    scanned: list[int] = []
    forms, hidden, anchors = secrets._REGISTRY.regexes

    class Counting:
        def __init__(self, regex: Any) -> None:
            self.regex = regex

        def __getattr__(self, name: str) -> Any:
            scanned.append(name)
            return getattr(self.regex, name)

    monkeypatch.setattr(secrets._REGISTRY, "regexes", (Counting(forms), Counting(hidden), anchors))
    text = "ordinary model output, with words, 0x1f numbers and %20 escapes\n" * 20_000
    assert mask_secrets(text) == text
    hidden_text = text + base64.b32encode(key.encode()).decode() + text
    assert mask_secrets(hidden_text).count("[REDACTED]") == 1
    assert scanned == []  # found by the anchors' and the encodings' plain str searches


def _xxd(raw: bytes) -> str:
    """``xxd``'s default dump: offset, 8 groups of 2 bytes in hex, the bytes as text."""
    lines = []
    for at in range(0, len(raw), 16):
        row = raw[at : at + 16]
        groups = " ".join(row[i : i + 2].hex() for i in range(0, len(row), 2))
        lines.append(f"{at:08x}: {groups:<39}  {row.decode('latin-1')}")
    return "\n".join(lines)


def test_a_key_cut_into_pieces_is_masked_piece_by_piece():
    key = f"sk-proj-{uuid.uuid4().hex}{uuid.uuid4().hex[:8]}"  # 48 characters
    register_secret(key)
    halves = (f"first half: {key[:24]}", f"second half: {key[24:]}")  # two messages
    assert [mask_secrets(h) for h in halves] == [
        "first half: [REDACTED]",
        "second half: [REDACTED]",
    ]
    dump = mask_secrets(_xxd(key.encode()))  # 3 lines of 16 bytes: hex and text columns
    # each line: its offset, then the hex column and the text column masked
    assert dump.splitlines() == [f"{at:08x}: [REDACTED]  [REDACTED]" for at in (0, 16, 32)]
    for at in range(0, len(key) - 11):
        piece = key[at : at + 12]
        assert piece not in dump and key.encode()[at : at + 12].hex() not in dump.replace(" ", "")
    # a run shorter than the bound, the prefix every such key has: ordinary text, left
    text = f"use {key[:11]}... (keys start with sk-proj-)"
    assert mask_secrets(text) == text


class Halves(ChatModelConnection):
    """A model that obeys an injection: it writes its key half in each of two answers."""

    api_key_env: str = "HALVES_KEY"

    def chat(self, messages: Any, **kwargs: Any) -> Any:
        """Answer with one half of the key, the first or the second time asked."""
        key = os.environ[self.api_key_env]
        half = key[:20] if len(messages) == 1 else key[20:]
        return ChatResponse(message=ChatMessage(role=MessageRole.ASSISTANT, content=half))


class TwoTurns(Agent):
    """Asks twice, the second time with the first answer."""

    @action(InputEvent)
    @staticmethod
    async def ask(event: InputEvent, ctx: RunnerContext) -> None:
        """Ask, then ask again; log both answers."""
        first = (await ctx.chat("model", [ChatMessage(content="part 1")])).content
        second = (
            await ctx.chat("model", [ChatMessage(content="part 1"), ChatMessage(content=first)])
        ).content
        _log.warning("the model said %s, then %s", first, second)
        ctx.send_event(OutputEvent(output="done"))


def test_a_key_split_across_two_answers_reaches_no_exit(monkeypatch, caplog):
    key = f"gw-{uuid.uuid4().hex}{uuid.uuid4().hex[:6]}"  # 41 characters: 20 and 21
    monkeypatch.setenv("HALVES_KEY", key)
    caplog.set_level(logging.WARNING)
    agent = TwoTurns()
    agent.add_resource("conn", ResourceType.CHAT_MODEL_CONNECTION, ResourceDescriptor(Halves))
    agent.add_resource(
        "model",
        ResourceType.CHAT_MODEL,
        ResourceDescriptor(ChatModelSetup, connection="conn", model="m"),
    )
    sink = MemorySink()
    result = (
        AgentsExecutionEnvironment.local(event_log=EventLog(sink=sink, level="verbose"))
        .from_list([{"key": "k"}])
        .apply(agent)
        .run()
    )
    assert result.errors == [] and result.outputs == ["done"]
    logged = "\n".join(r.getMessage() for r in caplog.records)
    assert "the model said [REDACTED], then [REDACTED]" in logged
    for where, text in {"the event log": json.dumps(sink.records), "the log": logged}.items():
        assert key[:20] not in text and key[20:] not in text, where


def test_an_encoding_in_a_text_whose_lower_case_moves_characters_is_still_masked():
    key = f"Nq{uuid.uuid4().hex}"
    register_secret(key)
    form = base64.b32encode(key.encode()).decode()  # upper case: found in the lowered text
    text = f"İstanbul İzmir {form} İ"  # 'İ' lowers to two characters
    assert mask_secrets(text).startswith("İstanbul İzmir [REDACTED]")


def test_a_long_secret_is_masked_by_longer_pieces_and_costs_a_bounded_number_of_blocks():
    key = "-----BEGIN PRIVATE KEY-----\n" + "".join(uuid.uuid4().hex for _ in range(50))
    register_secret(key)
    sources = secrets._REGISTRY.encoded._pieces.sources
    assert all(len(blocks) <= 32 for _, _, _, blocks in sources)
    body = key[28:]
    assert mask_secrets(f"<{body[100:400]}>") == "<[REDACTED]>"
    short = body[500:540]  # shorter than this key's pieces: left
    assert mask_secrets(f"<{short}>") == f"<{short}>"


USER_SCRIPT = '''
"""A user's job: the model (obeying an injection) echoes its key encoded; the key is in $MY_KEY."""
import base64
import codecs
import logging
import os
import sys

from flink_agents_py import AgentsExecutionEnvironment
from flink_agents_py.api import (Agent, ChatMessage, ChatModelConnection, ChatModelSetup,
    ChatResponse, InputEvent, MessageRole, OutputEvent, ResourceDescriptor, ResourceType,
    RunnerContext, action)


class Obedient(ChatModelConnection):
    api_key_env: str = "MY_KEY"

    def chat(self, messages, **kwargs):
        key = os.environ[self.api_key_env].encode()
        text = (f"b32 {base64.b32encode(key).decode()} rot13 {codecs.encode(key.decode(), 'rot13')}"
                f" utf16 {key.decode().encode('utf-16-le').hex()} halves {key[:20].decode()} /"
                f" {key[20:].decode()}")
        return ChatResponse(message=ChatMessage(role=MessageRole.ASSISTANT, content=text))


class Job(Agent):
    @action(InputEvent)
    @staticmethod
    async def ask(event, ctx: RunnerContext):
        answer = (await ctx.chat("model", [ChatMessage(content="hi")])).content
        logging.getLogger("job").warning("model: %s", answer)
        raise RuntimeError(f"not accepted: {answer}")


if __name__ == "__main__":
    logging.basicConfig(stream=sys.stderr)
    agent = Job()
    agent.add_resource("conn", ResourceType.CHAT_MODEL_CONNECTION, ResourceDescriptor(Obedient))
    agent.add_resource("model", ResourceType.CHAT_MODEL,
                       ResourceDescriptor(ChatModelSetup, connection="conn", model="m"))
    result = (AgentsExecutionEnvironment.local(event_log=sys.argv[1])
              .from_list([{"key": "k"}]).apply(agent).run())
    for error in result.errors:
        print("ERROR", error.message)
'''


def test_a_users_job_outside_the_repository_writes_no_encoded_key(tmp_path):
    key = f"sk-user-{uuid.uuid4().hex}{uuid.uuid4().hex[:8]}"
    (tmp_path / "job.py").write_text(USER_SCRIPT)
    root = Path(__file__).resolve().parents[1]
    env = {**os.environ, "MY_KEY": key, "PYTHONPATH": str(root)}
    proc = subprocess.run(
        [sys.executable, "job.py", str(tmp_path / "events.jsonl")],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "ERROR" in proc.stdout and "b32 [REDACTED]" in proc.stdout
    raw = key.encode()
    leaks = [
        base64.b32encode(raw).decode()[:16],
        codecs.encode(key, "rot13")[:16],
        key.encode("utf-16-le").hex()[:24],
        key[:20],
        key[20:],
    ]
    for what, text in (
        ("stdout", proc.stdout),
        ("stderr", proc.stderr),
        ("the event log", (tmp_path / "events.jsonl").read_text()),
    ):
        for leak in leaks:
            assert leak not in text, f"{leak!r} in {what}"


@pytest.mark.parametrize("odd", ["\udcff", "\ud800"], ids=["env-byte", "lone-surrogate"])
def test_a_key_with_a_byte_that_is_not_utf8_is_registered_and_masked(odd):
    """``os.environ`` reads a byte that is not UTF-8 as a lone surrogate: registering raised."""
    key = f"ab{uuid.uuid4().hex[:10]}{odd}{uuid.uuid4().hex[:10]}"
    assert register_secret(key, "$ODD_KEY")
    assert mask_secrets(f"<{key}>") == "<[REDACTED]>"
    if odd == "\udcff":  # as a client sends it: the byte itself, percent-encoded or in hex
        raw = key.encode("utf-8", "surrogateescape")
        assert mask_secrets(f"<{raw.hex()}>") == "<[REDACTED]>"
        assert mask_secrets("<" + "".join(f"%{b:02X}" for b in raw) + ">") == "<[REDACTED]>"


def test_a_form_ending_where_the_text_after_it_makes_a_reference_is_masked():
    # ascii85 of 'x' + this key ends its key's groups in '&', and the text goes on '#4]':
    # canonical() reads '&#4' as a character reference, so the canonical text lost the form
    # (1 key in some hundreds; found by a random key of the test above)
    key = "Aw9/ed9c95e40be14c5f+Zk=Qp"
    register_secret(key)
    form = base64.a85encode(b"x" + key.encode()).decode()
    assert "&#4" in form
    masked = mask_secrets(f"before {form} after")
    assert "[REDACTED]" in masked, masked
    left = masked.removeprefix("before ").removesuffix(" after").replace("[REDACTED]", "")
    assert len(left) <= 16, left
