"""Provider adapters against local servers speaking each provider's documented wire format.

Ollama (``POST /api/chat``), Anthropic (``POST /v1/messages``) and OpenAI-compatible
(``POST /v1/chat/completions``) servers are ``http.server`` threads that record every request;
the official SDKs talk to them. Nothing here reaches the internet. Also: tool rounds through a
provider (concurrent id-less calls, result normalization, failing tools, the round bound) and
the error an absent SDK gives.
"""

from __future__ import annotations

import asyncio
import base64
import dataclasses
import datetime
import enum
import json
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel
from support.probes import note, store
from support.providers import (
    WireServer,
    anthropic_reply,
    free_port,
    ollama_reply,
    only_answer,
    openai_reply,
    outputs_of,
    probe_agent,
    run_probe,
)

from flink_agents_py.api import (
    ChatMessage,
    MessageRole,
    ProviderError,
    ResourceDescriptor,
    ToolMetadata,
)
from flink_agents_py.integrations.chat_models import (
    AnthropicChatModel,
    OllamaChatModel,
    OpenAIChatModel,
)

pytest.importorskip("ollama")
pytest.importorskip("anthropic")
pytest.importorskip("openai")

pytestmark = pytest.mark.timeout(60)
ROOT = Path(__file__).resolve().parents[1]


def ollama(srv: WireServer, **kw: Any) -> ResourceDescriptor:
    return ResourceDescriptor(OllamaChatModel, host=srv.url, default_model="llama-test", **kw)


def anthropic_conn(srv: WireServer, **kw: Any) -> ResourceDescriptor:
    return ResourceDescriptor(AnthropicChatModel, base_url=srv.url,
                              api_key_env="FAP_TEST_ANTHROPIC_KEY", default_model="claude-test",
                              **kw)


def openai_conn(srv: WireServer, **kw: Any) -> ResourceDescriptor:
    return ResourceDescriptor(OpenAIChatModel, base_url=f"{srv.url}/v1",
                              api_key_env="FAP_TEST_OPENAI_KEY", default_model="gpt-test", **kw)


# ------------------------------------------------------------------------------ tools
async def stage(tag: str) -> dict:
    """A tool whose calls finish in reverse order: a waits for b and c, b waits for c.

    Args:
        tag: which call this is (a, b or c).
    """
    note(f"start {tag}")
    finished = store("finished", set)
    waits_for = {"a": {"b", "c"}, "b": {"c"}, "c": set()}[tag]
    deadline = time.monotonic() + 5
    while not waits_for <= finished:  # only possible when the calls run concurrently
        if time.monotonic() > deadline:
            raise TimeoutError(f"{tag} waited for {sorted(waits_for - finished)}: not concurrent")
        await asyncio.sleep(0.005)
    note(f"finish {tag}")
    finished.add(tag)
    return {"tag": tag}


def explode(why: str) -> str:
    """A tool that always fails.

    Args:
        why: the reason to give.
    """
    raise RuntimeError(f"the tool broke: {why}")


def price(item: str) -> float:
    """Price of an item.

    Args:
        item: what to price.
    """
    return {"tea": 7.0}.get(item, 1.0)


class Colour(enum.Enum):
    RED = "red"


class Product(BaseModel):
    sku: str
    added: datetime.date
    colour: Colour


@dataclasses.dataclass
class Stock:
    sku: str
    counts: tuple[int, ...]
    raw: bytes


_CYCLE: list[Any] = ["start"]
_CYCLE.append({"back": _CYCLE})
_SHARED = {"x": 1}

_NORMALIZE: dict[str, Any] = {
    "pydantic": Product(sku="t-1", added=datetime.date(2024, 5, 6), colour=Colour.RED),
    "dataclass": Stock(sku="t-1", counts=(1, 2), raw=b"\x00\xffok"),
    "bytes": b"\x89PNG\r\n",
    "datetime": datetime.datetime(2024, 5, 6, 7, 8, 9, tzinfo=datetime.timezone.utc),
    "enum_tuple": (Colour.RED, 1, "x"),
    "nan": {"scores": [1.0, float("nan")]},
    "inf": {"deep": {"ratio": float("inf")}},
    "int_key": {"by_id": {1: "one"}},
    "set": {"tags": {"a"}},
    "diamond": {"a": _SHARED, "b": [_SHARED]},
    "cycle": _CYCLE,
}


def normalize_me(case: str) -> Any:
    """Return the value of one normalization case.

    Args:
        case: the case's name.
    """
    return _NORMALIZE[case]


# ------------------------------------------------------------------------------ Ollama
def test_ollama_concurrent_idless_calls_finish_out_of_order_and_pair_by_synthetic_ids(probes):

    def answer(req: dict[str, Any]) -> tuple[int, Any]:
        if req["n"] == 0:
            return 200, ollama_reply(tool_calls=[("stage", {"tag": t}) for t in "abc"])
        return 200, ollama_reply("all three done")

    with WireServer(answer) as srv:
        res = run_probe(probe_agent(ollama(srv), tools=["stage"], tool_fns=[stage]),
                        [{"key": "k", "q": "run the stages"}])
        ans = only_answer(res)
        first, second = srv.bodies("/api/chat")
    assert ans["error"] is None and ans["content"] == "all three done"
    # all three started before any finished, and they finished in reverse order
    stages = [n.split() for n in probes.notes()]
    starts = [i for i, (what, _) in enumerate(stages) if what == "start"]
    finishes = [(i, tag) for i, (what, tag) in enumerate(stages) if what == "finish"]
    assert len(starts) == 3 and max(starts) < min(i for i, _ in finishes)
    assert [tag for _, tag in finishes] == ["c", "b", "a"]
    # Ollama gave no ids: each call got a unique synthetic one, and each result its call's
    [calls] = outputs_of(res, "calls")
    ids = [c["id"] for c in calls["calls"]]
    assert all(ids) and len(set(ids)) == 3
    [results] = outputs_of(res, "results")
    for c in calls["calls"]:
        got = results["results"][c["id"]]
        assert (got["name"], got["ok"], got["content"]) == ("stage", True, c["arguments"])
    # the wire: tools offered, then the results in call order, each with its tool's name
    assert first["model"] == "llama-test" and first["stream"] is False
    assert [m["role"] for m in first["messages"]] == ["user"]
    [tool] = first["tools"]
    assert tool["type"] == "function" and tool["function"]["name"] == "stage"
    assert tool["function"]["parameters"]["properties"]["tag"]["type"] == "string"
    assert tool["function"]["parameters"]["required"] == ["tag"]
    assert [m["role"] for m in second["messages"]] == ["user", "assistant", "tool", "tool", "tool"]
    assert [c["function"] for c in second["messages"][1]["tool_calls"]] == [
        {"name": "stage", "arguments": {"tag": t}} for t in "abc"]
    assert [(m["tool_name"], json.loads(m["content"])) for m in second["messages"][2:]] == [
        ("stage", {"tag": t}) for t in "abc"]


def test_ollama_structured_output_uses_format_and_maps_options_and_usage():
    schema = {"type": "object", "properties": {"score": {"type": "integer"}},
              "required": ["score"]}
    with WireServer(lambda req: (200, ollama_reply('{"score": 4}'))) as srv:
        agent = probe_agent(ollama(srv, keep_alive="5m"), model="llama3.2:1b",
                            options={"temperature": 0.2, "max_tokens": 64, "think": False})
        ans = only_answer(run_probe(agent, [{"key": "k", "q": "rate it", "schema": schema}]))
        [body] = srv.bodies("/api/chat")
    assert ans["structured"] == {"score": 4} and ans["error"] is None
    assert ans["usage"] == {"input_tokens": 12, "output_tokens": 5}
    assert ans["finish_reason"] == "stop" and ans["model"] == "llama-test"
    assert body["format"] == schema
    assert body["model"] == "llama3.2:1b"
    assert body["options"] == {"temperature": 0.2, "num_predict": 64}
    assert body["keep_alive"] == "5m" and body["think"] is False


def test_ollama_http_errors_become_provider_errors_retryable_by_status():
    statuses = iter([503, 429, 400, 404])
    with WireServer(lambda req: (next(statuses), {"error": "nope"})) as srv:
        conn = OllamaChatModel(host=srv.url)
        got = []
        for _ in range(4):
            with pytest.raises(ProviderError) as e:
                conn.chat([ChatMessage(content="hi")])
            got.append((e.value.status_code, e.value.retryable, "nope" in str(e.value)))
    assert got == [(503, True, True), (429, True, True), (400, False, True), (404, False, True)]
    with pytest.raises(ProviderError) as e:  # nothing listens there: retryable
        OllamaChatModel(host=f"http://127.0.0.1:{free_port()}").chat([ChatMessage(content="x")])
    assert e.value.retryable and e.value.status_code is None


def test_ollama_tool_round_bound_ends_the_chat_with_a_clear_error():
    def reply(req):
        return 200, ollama_reply(tool_calls=[("price", {"item": "tea"})])

    with WireServer(reply) as srv:
        res = run_probe(probe_agent(ollama(srv), tools=["price"], tool_fns=[price],
                                    max_tool_rounds=2), [{"key": "k", "q": "loop"}])
        ans = only_answer(res)
        n_requests = len(srv.requests)
    assert ans["content"] is None
    assert "max_tool_rounds=2" in ans["error"] and "still asks for tools" in ans["error"]
    assert n_requests == 3 and len(outputs_of(res, "results")) == 2


def test_a_failing_tool_becomes_a_tool_message_and_the_chat_goes_on():
    def answer(req: dict[str, Any]) -> tuple[int, Any]:
        if req["n"] == 0:
            return 200, ollama_reply(tool_calls=[("explode", {"why": "gremlins"}),
                                                 ("price", {"item": "tea"})])
        return 200, ollama_reply("tea is 7, the other tool failed")

    with WireServer(answer) as srv:
        res = run_probe(probe_agent(ollama(srv), tools=["explode", "price"],
                                    tool_fns=[explode, price]), [{"key": "k", "q": "go"}])
        ans = only_answer(res)
        second = srv.bodies("/api/chat")[1]
    assert ans["error"] is None and ans["content"].startswith("tea is 7")
    boom, ok = second["messages"][2:]
    assert boom["tool_name"] == "explode"
    assert boom["content"] == "Error: RuntimeError: the tool broke: gremlins"
    assert (ok["tool_name"], ok["content"]) == ("price", "7.0")


_EXPECTED_NORMALIZED: dict[str, Any] = {
    "pydantic": {"sku": "t-1", "added": "2024-05-06", "colour": "red"},
    "dataclass": {"sku": "t-1", "counts": [1, 2], "raw": base64.b64encode(b"\x00\xffok").decode()},
    "bytes": base64.b64encode(b"\x89PNG\r\n").decode(),
    "datetime": "2024-05-06T07:08:09+00:00",
    "enum_tuple": ["red", 1, "x"],
    "diamond": {"a": {"x": 1}, "b": [{"x": 1}]},  # one object twice is not a cycle
}
_EXPECTED_REFUSED: dict[str, list[str]] = {
    "nan": ["nan", "$.scores[1]"],
    "inf": ["inf", "$.deep.ratio"],
    "int_key": ["map key 1", "$.by_id", "not a string"],
    "set": ["set", "$.tags"],
    "cycle": ["cycle", "$[1].back"],
}


@pytest.mark.parametrize("case", list(_NORMALIZE))
def test_tool_results_are_normalized_to_json_through_a_real_chat(case):
    def answer(req: dict[str, Any]) -> tuple[int, Any]:
        if req["n"] == 0:
            return 200, ollama_reply(tool_calls=[("normalize_me", {"case": case})])
        return 200, ollama_reply("seen")

    with WireServer(answer) as srv:
        res = run_probe(probe_agent(ollama(srv), tools=["normalize_me"],
                                    tool_fns=[normalize_me]), [{"key": "k", "q": case}])
        ans = only_answer(res)
        tool_msg = srv.bodies("/api/chat")[1]["messages"][-1]
    assert ans["error"] is None  # refused or not, the chat goes on
    [results] = outputs_of(res, "results")
    [result] = results["results"].values()
    if case in _EXPECTED_NORMALIZED:
        assert result["ok"] and result["content"] == _EXPECTED_NORMALIZED[case]
        expected = _EXPECTED_NORMALIZED[case]  # a text as itself, anything else as JSON
        sent = tool_msg["content"] if isinstance(expected, str) else json.loads(tool_msg["content"])
        assert sent == expected
    else:
        assert not result["ok"]
        assert tool_msg["content"].startswith("Error: SerializationError: result of tool "
                                              "'normalize_me'")
        for part in _EXPECTED_REFUSED[case]:
            assert part in result["error"], (part, result["error"])


# ------------------------------------------------------------------------------ Anthropic
def test_anthropic_wire_system_top_level_tool_use_and_tool_result_blocks(monkeypatch):
    monkeypatch.setenv("FAP_TEST_ANTHROPIC_KEY", "sk-ant-test")

    def answer(req: dict[str, Any]) -> tuple[int, Any]:
        if req["n"] == 0:
            return 200, anthropic_reply([
                {"type": "text", "text": "Checking."},
                {"type": "tool_use", "id": "toolu_01", "name": "price", "input": {"item": "tea"}},
                {"type": "tool_use", "id": "toolu_02", "name": "explode", "input": {"why": "x"}},
            ], stop_reason="tool_use")
        return 200, anthropic_reply([{"type": "text", "text": "Tea costs 7."}], n=1)

    with WireServer(answer) as srv:
        agent = probe_agent(anthropic_conn(srv), tools=["price", "explode"],
                            tool_fns=[price, explode], prompt="You are terse.",
                            options={"temperature": 0})
        res = run_probe(agent, [{"key": "k", "q": "price of tea?"}])
        ans = only_answer(res)
        first, second = srv.requests
    assert ans["error"] is None and ans["content"] == "Tea costs 7."
    assert ans["usage"] == {"input_tokens": 21, "output_tokens": 8}
    assert ans["finish_reason"] == "end_turn" and ans["model"] == "claude-test"
    assert first["path"] == "/v1/messages"
    auth = first["headers"].get("x-api-key") or first["headers"]["authorization"]
    assert auth.removeprefix("Bearer ") == "sk-ant-test"  # the SDK's 2.x line sends a bearer
    assert "anthropic-version" in first["headers"]
    b0 = first["body"]
    assert b0["system"] == "You are terse."  # top level, not a message
    assert b0["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "price of tea?"}]}]
    assert b0["max_tokens"] == 1024 and b0["temperature"] == 0 and b0["model"] == "claude-test"
    assert [t["name"] for t in b0["tools"]] == ["price", "explode"]
    assert b0["tools"][0]["input_schema"]["properties"]["item"]["type"] == "string"
    assert b0["tools"][0]["description"] == "Price of an item."
    assert "tool_choice" not in b0
    b1 = second["body"]
    assert [m["role"] for m in b1["messages"]] == ["user", "assistant", "user"]
    assert b1["messages"][1]["content"] == [
        {"type": "text", "text": "Checking."},
        {"type": "tool_use", "id": "toolu_01", "name": "price", "input": {"item": "tea"}},
        {"type": "tool_use", "id": "toolu_02", "name": "explode", "input": {"why": "x"}},
    ]
    ok, failed = b1["messages"][2]["content"]
    assert ok == {"type": "tool_result", "tool_use_id": "toolu_01", "content": "7.0"}
    assert failed["tool_use_id"] == "toolu_02" and failed["is_error"] is True
    assert failed["content"] == "Error: RuntimeError: the tool broke: x"
    assert b1["system"] == "You are terse."


SCORE = {"type": "object", "properties": {"score": {"type": "integer", "minimum": 1}},
         "required": ["score"]}


def test_anthropic_structured_output_is_a_forced_tool(monkeypatch):
    monkeypatch.setenv("FAP_TEST_ANTHROPIC_KEY", "sk-ant-test")
    reply = anthropic_reply([{"type": "tool_use", "id": "toolu_9", "name": "structured_output",
                              "input": {"score": 5}}], stop_reason="tool_use")
    with WireServer(lambda req: (200, reply)) as srv:
        ans = only_answer(run_probe(probe_agent(anthropic_conn(srv)),
                                    [{"key": "k", "q": "rate", "schema": SCORE}]))
        [req] = srv.requests
    assert ans["error"] is None
    assert ans["structured"] == {"score": 5} and json.loads(ans["content"]) == {"score": 5}
    body = req["body"]
    assert body["tools"] == [{"name": "structured_output",
                              "description": "Give your final answer with this tool.",
                              "input_schema": SCORE}]
    assert body["tool_choice"] == {"type": "tool", "name": "structured_output"}


def test_anthropic_structured_output_with_tools_and_a_non_object_schema(monkeypatch):
    monkeypatch.setenv("FAP_TEST_ANTHROPIC_KEY", "sk-ant-test")
    schema = {"type": "array", "items": {"$ref": "#/$defs/Tag"},
              "$defs": {"Tag": {"type": "string"}}}

    def answer(req: dict[str, Any]) -> tuple[int, Any]:
        if req["n"] == 0:
            return 200, anthropic_reply([{"type": "tool_use", "id": "toolu_1", "name": "price",
                                          "input": {"item": "tea"}}], stop_reason="tool_use")
        return 200, anthropic_reply([{"type": "tool_use", "id": "toolu_2",
                                      "name": "structured_output",
                                      "input": {"value": ["cheap", "green"]}}], n=1)

    with WireServer(answer) as srv:
        ans = only_answer(run_probe(
            probe_agent(anthropic_conn(srv), tools=["price"], tool_fns=[price]),
            [{"key": "k", "q": "tags?", "schema": schema}]))
        first, second = srv.bodies()
    assert ans["error"] is None and ans["structured"] == ["cheap", "green"]
    assert first["tool_choice"] == {"type": "any"}  # may call price first
    out_tool = first["tools"][-1]
    assert out_tool["name"] == "structured_output"
    assert out_tool["input_schema"] == {
        "type": "object",
        "properties": {"value": {"type": "array", "items": {"$ref": "#/$defs/Tag"}}},
        "required": ["value"], "$defs": {"Tag": {"type": "string"}}}
    assert second["messages"][-1]["content"][0]["type"] == "tool_result"


def test_anthropic_errors_and_missing_key(monkeypatch):
    monkeypatch.delenv("FAP_TEST_ANTHROPIC_KEY", raising=False)
    with pytest.raises(ProviderError, match=r"\$FAP_TEST_ANTHROPIC_KEY"):
        AnthropicChatModel(api_key_env="FAP_TEST_ANTHROPIC_KEY").chat([ChatMessage(content="x")])
    # the key is read when the client is made: setting it later works
    monkeypatch.setenv("FAP_TEST_ANTHROPIC_KEY", "sk-ant-test")
    statuses = iter([529, 400])
    err = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
    with WireServer(lambda req: (next(statuses), err)) as srv:
        conn = AnthropicChatModel(base_url=srv.url, api_key_env="FAP_TEST_ANTHROPIC_KEY")
        with pytest.raises(ProviderError) as e:
            conn.chat([ChatMessage(content="x")])
        assert (e.value.status_code, e.value.retryable) == (529, True)
        with pytest.raises(ProviderError) as e:
            conn.chat([ChatMessage(content="x")])
        assert (e.value.status_code, e.value.retryable) == (400, False)


def test_anthropic_merges_adjacent_turns_and_collects_system_messages():
    from flink_agents_py.integrations.chat_models._anthropic import to_anthropic_messages

    system, wire = to_anthropic_messages([
        ChatMessage(role=MessageRole.SYSTEM, content="A."),
        ChatMessage(content="one"),
        ChatMessage(role=MessageRole.SYSTEM, content="B."),
        ChatMessage(content="two"),
    ])
    assert system == "A.\n\nB."
    assert wire == [{"role": "user", "content": [{"type": "text", "text": "one"},
                                                 {"type": "text", "text": "two"}]}]


# ------------------------------------------------------------------------------ OpenAI
def test_openai_wire_tools_ids_response_format_and_usage(monkeypatch):
    monkeypatch.setenv("FAP_TEST_OPENAI_KEY", "sk-test")

    def answer(req: dict[str, Any]) -> tuple[int, Any]:
        if req["n"] == 0:
            return 200, openai_reply(None, [("call_1", "price", {"item": "tea"})])
        return 200, openai_reply('{"score": 3}', n=1)

    with WireServer(answer) as srv:
        res = run_probe(probe_agent(openai_conn(srv), tools=["price"], tool_fns=[price],
                                    prompt="Be brief.", options={"seed": 1}),
                        [{"key": "k", "q": "rate tea", "schema": SCORE}])
        ans = only_answer(res)
        first, second = srv.requests
    assert ans["error"] is None and ans["structured"] == {"score": 3}
    assert ans["usage"] == {"input_tokens": 9, "output_tokens": 4}
    assert first["path"] == "/v1/chat/completions"
    assert first["headers"]["authorization"] == "Bearer sk-test"
    b0 = first["body"]
    assert b0["model"] == "gpt-test" and b0["seed"] == 1
    assert [m["role"] for m in b0["messages"]] == ["system", "user"]
    assert b0["tools"][0]["function"]["name"] == "price"
    assert b0["response_format"] == {"type": "json_schema",
                                     "json_schema": {"name": "output", "schema": SCORE}}
    msgs = second["body"]["messages"]
    assert [m["role"] for m in msgs] == ["system", "user", "assistant", "tool"]
    assert msgs[2]["tool_calls"][0]["id"] == "call_1"
    assert msgs[3] == {"role": "tool", "content": "7.0", "tool_call_id": "call_1"}


def test_openai_switches_to_json_object_when_the_server_rejects_json_schema(monkeypatch):
    monkeypatch.setenv("FAP_TEST_OPENAI_KEY", "sk-test")

    def answer(req: dict[str, Any]) -> tuple[int, Any]:
        if req["body"]["response_format"]["type"] == "json_schema":  # as llama-cpp-python answers
            return 500, {"error": {"message": "Input should be 'text' or 'json_object': "
                                              "'json_schema'", "type": "internal_server_error"}}
        return 200, openai_reply('{"score": 2}')

    with WireServer(answer) as srv:
        conn = OpenAIChatModel(base_url=f"{srv.url}/v1", api_key_env="FAP_TEST_OPENAI_KEY")
        for _ in range(2):
            r = conn.chat([ChatMessage(content="x")], output_schema=SCORE)
            assert r.message.content == '{"score": 2}'
        formats = [b["response_format"] for b in srv.bodies()]
    assert formats == [
        {"type": "json_schema", "json_schema": {"name": "output", "schema": SCORE}},
        {"type": "json_object", "schema": SCORE},
        {"type": "json_object", "schema": SCORE},  # remembered
    ]


def test_openai_errors_and_timeouts_are_provider_errors(monkeypatch):
    monkeypatch.setenv("FAP_TEST_OPENAI_KEY", "sk-test")

    def answer(req: dict[str, Any]) -> tuple[int, Any]:
        if req["n"] == 0:
            return 429, {"error": {"message": "slow down"}}
        if req["n"] == 1:
            return 401, {"error": {"message": "bad key"}}
        time.sleep(1.0)
        return 200, openai_reply("late")

    with WireServer(answer) as srv:
        conn = OpenAIChatModel(base_url=f"{srv.url}/v1", api_key_env="FAP_TEST_OPENAI_KEY",
                               timeout_s=0.3)
        got = []
        for _ in range(3):
            with pytest.raises(ProviderError) as e:
                conn.chat([ChatMessage(content="x")])
            got.append((e.value.status_code, e.value.retryable))
    assert got == [(429, True), (401, False), (None, True)]


def test_connections_work_from_more_than_one_event_loop(monkeypatch):
    monkeypatch.setenv("FAP_TEST_OPENAI_KEY", "sk-test")
    with WireServer(lambda req: (200, openai_reply("hi"))) as srv:
        conn = OpenAIChatModel(base_url=f"{srv.url}/v1", api_key_env="FAP_TEST_OPENAI_KEY")
        answers = [conn.chat([ChatMessage(content="x")]).message.content for _ in range(2)]
        assert answers == ["hi"] * 2


# ------------------------------------------------------------------------------ extras
def test_missing_sdks_fail_with_the_extra_to_install():
    code = textwrap.dedent("""
        import json, sys
        for m in ("openai", "ollama", "anthropic", "mcp"):
            sys.modules[m] = None  # 'import m' now raises ImportError
        import flink_agents_py, flink_agents_py.api
        import flink_agents_py.integrations.chat_models as cm
        import flink_agents_py.integrations.mcp as mcp_int
        from flink_agents_py import AgentsExecutionEnvironment
        from flink_agents_py.api import (
            ChatMessage, ChatModelSetup, ResourceDescriptor, ResourceType)
        sys.path.insert(0, "tests")
        from support.providers import ChatProbe
        out = {}
        for name, conn in [("openai", cm.OpenAIChatModel()), ("ollama", cm.OllamaChatModel()),
                           ("anthropic", cm.AnthropicChatModel())]:
            try:
                conn.chat([ChatMessage(content="x")])
            except ImportError as e:
                out[name] = str(e)
        try:
            mcp_int.McpServer(command=["true"]).open()
        except ImportError as e:
            out["mcp"] = str(e)
        agent = ChatProbe()
        agent.add_resource("conn", ResourceType.CHAT_MODEL_CONNECTION,
                           ResourceDescriptor(cm.OllamaChatModel))
        agent.add_resource("model", ResourceType.CHAT_MODEL,
                           ResourceDescriptor(ChatModelSetup, connection="conn"))
        res = (AgentsExecutionEnvironment.local().from_list([{"key": "a", "q": "hi"}])
               .apply(agent).run())
        out["chat"] = [o["error"] for o in res.outputs if o["kind"] == "answer"]
        print(json.dumps(out))
    """)
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    for extra in ("openai", "ollama", "anthropic", "mcp"):
        assert f"pip install 'flink-agents-py[{extra}]'" in out[extra], out
        assert "is not installed" in out[extra]
    [chat_error] = out["chat"]
    assert chat_error.startswith("ImportError") and "flink-agents-py[ollama]" in chat_error


def test_provider_connections_accept_tool_metadata_and_sync_chat(monkeypatch):
    """The blocking ``chat`` of an async-first connection, with a tool offered."""
    monkeypatch.setenv("FAP_TEST_ANTHROPIC_KEY", "k")
    tool = ToolMetadata(name="price", description="d",
                        parameters={"type": "object", "properties": {}})
    reply = anthropic_reply([{"type": "tool_use", "id": "t1", "name": "price", "input": {}}])
    with WireServer(lambda req: (200, reply)) as srv:
        r = AnthropicChatModel(base_url=srv.url, api_key_env="FAP_TEST_ANTHROPIC_KEY").chat(
            [ChatMessage(content="x")], tools=[tool])
    assert [(c.id, c.name, c.arguments) for c in r.message.tool_calls] == [("t1", "price", {})]
    assert r.finish_reason == "tool_calls"
