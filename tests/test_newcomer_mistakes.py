"""Mistakes a newcomer makes in a first agent, each run the way they run it: their own
module, in a directory of their own, with the venv's Python.

Each test is one place where a first hour got stuck on a message that did not say what was
wrong or where (found by writing agents from the README and the docs alone).
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytestmark = pytest.mark.timeout(120)

_HEAD = '''
from flink_agents_py import AgentsExecutionEnvironment
from flink_agents_py.api import *
from flink_agents_py.integrations.chat_models import ScriptedChatModel


def script(request):
    return "ok"
'''


def _run(tmp_path: Path, body: str, *args: str) -> subprocess.CompletedProcess[str]:
    """Write ``my_agent.py`` (the imports, a scripted model's function, ``body``) into
    ``tmp_path`` and run it there, as a user runs their script."""
    (tmp_path / "my_agent.py").write_text(_HEAD + textwrap.dedent(body))
    return subprocess.run([sys.executable, "my_agent.py", *args], cwd=tmp_path,
                          capture_output=True, text=True, timeout=280)


def test_ctx_chat_naming_the_connection_says_it_takes_the_setups_name(tmp_path):
    # before: "no chat_model resource named 'conn' (declared: llm)", while 'conn' was
    # plainly declared, one decorator above
    proc = _run(tmp_path, '''
        class A(Agent):
            @chat_model_connection
            @staticmethod
            def conn():
                return ResourceDescriptor(ScriptedChatModel, function="my_agent:script")

            @chat_model_setup
            @staticmethod
            def llm():
                return ResourceDescriptor(ChatModelSetup, connection="conn")

            @action(InputEvent)
            @staticmethod
            async def go(event, ctx):
                reply = await ctx.chat("conn", [ChatMessage(content="hi")])
                ctx.send_event(OutputEvent(output=reply.message.content))

            @action(InputEvent)
            @staticmethod
            def look(event, ctx):
                ctx.get_resource("llm", ResourceType.CHAT_MODEL_CONNECTION)

        result = AgentsExecutionEnvironment.local().from_list([{"key": "a"}]).apply(A()).run()
        for e in sorted(result.errors, key=lambda e: e.action):
            print(e.action, "|", e.message)
    ''')
    assert proc.returncode == 0, proc.stderr
    go, look = proc.stdout.strip().splitlines()
    assert go.startswith("go | ") and "'conn' is declared as a chat_model_connection" in go, go
    assert "ctx.chat and ChatRequestEvent name a chat model setup" in go, go
    assert "(declared: llm)" in go, go
    assert "'llm' is declared as a chat_model resource" in look, look
    assert "ctx.chat" not in look, look  # the hint is for the setup-for-connection mix-up only


@pytest.mark.parametrize(("field", "said"), [
    ("id: int", "name yours otherwise (e.g. 'ticket_id')"),
    ("attributes: list", "name yours otherwise (e.g. 'ticket_attributes')"),
    ("type: str = 'ticket'", "write EVENT_TYPE = 'x' (a class constant)"),
    ("attachments: dict", "name yours otherwise"),
])
def test_an_event_declaring_a_field_every_event_has_is_refused_at_its_class(
        tmp_path, field, said):
    # before: the class was taken; the job then failed when the event was sent, deep in
    # the runtime ("unable to parse string as an integer" from pydantic for 'id: int', a
    # whole local run raising; "'list' object has no attribute 'items'" for 'attributes'),
    # and 'type: str = ...' was silently not the routing type
    proc = _run(tmp_path, f'''
        class Ticket(Event):
            {field}
            text: str = ""
    ''')
    assert proc.returncode == 1
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("flink_agents_py.api._errors.UsageError: Ticket declares a field "
                           f"{field.split(':')[0]!r}, which every Event has"), last
    assert said in last, last
    assert 'my_agent.py", line 10, in <module>' in proc.stderr, proc.stderr  # the class line


def test_an_event_with_its_own_fields_and_event_type_still_routes(tmp_path):
    proc = _run(tmp_path, '''
        class Ticket(Event):
            EVENT_TYPE = "ticket"
            ticket_id: int
            tags: list[str] = []

        class A(Agent):
            @action(InputEvent)
            @staticmethod
            def go(event, ctx):
                ctx.send_event(Ticket(ticket_id=3, tags=["x"]))

            @action("ticket")
            @staticmethod
            def got(event, ctx):
                ctx.send_event(OutputEvent(output=[event.type, event.ticket_id, event.tags]))

        print(AgentsExecutionEnvironment.local().from_list([{"key": "a"}]).apply(A()).collect())
    ''')
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[['ticket', 3, ['x']]]"


def test_a_scripted_model_given_its_function_itself_answers_by_it(tmp_path):
    # before: every chat failed with "ResourceError: cannot build ...ScriptedChatModel from
    # its descriptor: 1 validation error ... function  Input should be a valid string"
    proc = _run(tmp_path, '''
        def answer(request):
            return "re: " + request.last_user_text

        class A(Agent):
            @chat_model_connection
            @staticmethod
            def conn():
                return ResourceDescriptor(ScriptedChatModel, function=answer)

            @chat_model_setup
            @staticmethod
            def llm():
                return ResourceDescriptor(ChatModelSetup, connection="conn")

            @action(InputEvent)
            @staticmethod
            async def go(event, ctx):
                reply = await ctx.chat("llm", [ChatMessage(content=event.input["text"])])
                ctx.send_event(OutputEvent(output=reply.message.content))

        result = AgentsExecutionEnvironment.local().from_list(
            [{"key": "a", "text": "hi"}]).apply(A()).run()
        print(result.outputs, [e.message for e in result.errors])
        print(ScriptedChatModel(function=answer).function,
              ScriptedChatModel(function=lambda r: "x").calls)
    ''')
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == ["['re: hi'] []", "__main__:answer 0"]


@pytest.mark.flink
@pytest.mark.timeout(300)
def test_a_scripted_model_given_its_function_itself_answers_on_a_minicluster(tmp_path):
    # the function, defined in the user's script (__main__), reaches the Flink workers
    proc = _run(tmp_path, '''
        from pyflink.common import Types
        from flink_agents_py.flink import create_stream_environment

        def answer(request):
            return "re: " + request.last_user_text

        class A(Agent):
            @chat_model_connection
            @staticmethod
            def conn():
                return ResourceDescriptor(ScriptedChatModel, function=answer)

            @chat_model_setup
            @staticmethod
            def llm():
                return ResourceDescriptor(ChatModelSetup, connection="conn")

            @action(InputEvent)
            @staticmethod
            async def go(event, ctx):
                reply = await ctx.chat("llm", [ChatMessage(content=event.input["text"])])
                ctx.send_event(OutputEvent(output=reply.message.content))

        if __name__ == "__main__":
            env = create_stream_environment(parallelism=1)
            ds = env.from_collection([{"key": "a", "text": "hi"}],
                                     type_info=Types.PICKLED_BYTE_ARRAY())
            agents = AgentsExecutionEnvironment.flink(env)
            job = agents.from_datastream(ds).apply(A())
            with job.to_datastream().execute_and_collect("scripted") as outputs:
                print(list(outputs))
    ''')
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.strip().splitlines()[-1] == "['re: hi']", proc.stdout


def test_a_setup_offering_a_function_put_on_the_class_without_tool_says_to_decorate_it(
        tmp_path):
    # before: "names tool 'lookup', which is not declared (tools: none)", with the function
    # right there on the class (as the tutorial puts check_stock, which has @tool)
    proc = _run(tmp_path, '''
        def lookup(order_id: str) -> str:
            """Look an order up.

            Args:
                order_id: the order.
            """
            return "shipped"

        class A(Agent):
            @chat_model_connection
            @staticmethod
            def conn():
                return ResourceDescriptor(ScriptedChatModel, function="my_agent:script")

            @chat_model_setup
            @staticmethod
            def llm():
                return ResourceDescriptor(ChatModelSetup, connection="conn",
                                          tools=["lookup", "missing"])

            lookup = staticmethod(lookup)

            @action(InputEvent)
            @staticmethod
            def go(event, ctx):
                pass

        AgentsExecutionEnvironment.local().from_list([{"key": "a"}]).apply(A())
    ''')
    assert proc.returncode == 1
    assert ("names tool 'lookup', which is not declared (tools: none); 'lookup' is a "
            "function on the agent class, but not a tool: decorate it with @tool"
            in proc.stderr), proc.stderr
    missing = next(line for line in proc.stderr.splitlines() if "'missing'" in line)
    assert "decorate" not in missing and "go" not in missing, missing


def test_a_durable_call_used_before_it_is_awaited_says_to_await_it(tmp_path):
    # before: "'DurableCall' object is not subscriptable", and an output printed as
    # "<flink_agents_py.runtime.context._calls.DurableCall object at 0x7f...>"
    proc = _run(tmp_path, '''
        def lookup(order_id):
            return {"status": "shipped"}

        class A(Agent):
            @action(InputEvent)
            @staticmethod
            async def go(event, ctx):
                call = ctx.durable_execute_async(lookup, "o1")
                ctx.send_event(OutputEvent(output=str(call)))
                ctx.send_event(OutputEvent(output=call["status"]))

        result = AgentsExecutionEnvironment.local().from_list([{"key": "a"}]).apply(A()).run()
        print(result.outputs)
        print([e.message for e in result.errors])
    ''')
    assert proc.returncode == 0, proc.stderr
    outputs, errors = proc.stdout.strip().splitlines()
    assert outputs == "[]", outputs  # the failed action sent nothing
    assert "DurableCall is not subscriptable: it is ctx.durable_execute_async(lookup, ...), " \
           "not awaited; await it first" in errors, errors
    assert repr_of_a_call() == "<DurableCall r0/go/c0 of m:f: not done>"


def repr_of_a_call() -> str:
    from flink_agents_py.runtime.context._calls import DurableCall

    return repr(DurableCall("r0/go/c0", 0, target="m:f"))


def test_a_prompt_placeholder_no_value_fills_is_warned_of_once(tmp_path):
    # before: "You triage tickets about {product}." reached the model as written, without a
    # word, when ctx.chat gave no prompt_args or misspelt the name
    proc = _run(tmp_path, '''
        def echo(request):
            return request.messages[0].content

        class A(Agent):
            @chat_model_connection
            @staticmethod
            def conn():
                return ResourceDescriptor(ScriptedChatModel, function="my_agent:echo")

            @chat_model_setup
            @staticmethod
            def llm():
                return ResourceDescriptor(ChatModelSetup, connection="conn",
                                          prompt="About {product} for {{literal}}; {tone}.")

            @action(InputEvent)
            @staticmethod
            async def go(event, ctx):
                reply = await ctx.chat("llm", [ChatMessage(content="hi")],
                                       prompt_args=event.input["args"])
                ctx.send_event(OutputEvent(output=reply.message.content))

        records = [{"key": "a", "args": {}}, {"key": "b", "args": {}},
                   {"key": "c", "args": {"prodcut": "tea", "tone": "calm"}},
                   {"key": "d", "args": {"product": "tea", "tone": "calm"}}]
        job = AgentsExecutionEnvironment.local(max_in_flight=1).from_list(records)
        for out in job.apply(A()).collect():
            print(out)
    ''')
    assert proc.returncode == 0, proc.stderr
    assert "About tea for {literal}; calm." in proc.stdout  # filled: no warning for it
    warnings = [line for line in proc.stderr.splitlines() if "no value for the prompt" in line]
    assert warnings == [
        "WARNING flink_agents_py.prompts: "
        "chat model setup 'llm': no value for the prompt's placeholder(s) {product}, {tone} "
        "(values given: none); they go to the model as written. Pass them: ctx.chat('llm', "
        "messages, prompt_args={'product': ...}), or a sub-agent's input field 'product'",
        "WARNING flink_agents_py.prompts: "
        "chat model setup 'llm': no value for the prompt's placeholder(s) {product} (values "
        "given: prodcut, tone); they go to the model as written. Pass them: ctx.chat('llm', "
        "messages, prompt_args={'product': ...}), or a sub-agent's input field 'product'",
    ], proc.stderr  # once per setup and missing names (keys a and b: one line)


def _refused_port() -> int:
    import socket

    with socket.socket() as s:  # bound, then closed: nothing listens there
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_a_chat_whose_server_does_not_answer_names_the_url_it_posted_to(tmp_path):
    # before: "ProviderError: chat completion failed: APIConnectionError: Connection error."
    # naming no server, so a wrong port or host in base_url could not be seen
    port = _refused_port()
    proc = _run(tmp_path, f'''
        from flink_agents_py.integrations.chat_models import OpenAIChatModel

        class A(Agent):
            @chat_model_connection
            @staticmethod
            def conn():
                return ResourceDescriptor(OpenAIChatModel, default_model="m",
                                          base_url="http://127.0.0.1:{port}/v1")

            @chat_model_setup
            @staticmethod
            def llm():
                return ResourceDescriptor(ChatModelSetup, connection="conn")

            @action(InputEvent)
            @staticmethod
            async def go(event, ctx):
                reply = await ctx.chat("llm", [ChatMessage(content="hi")])
                ctx.send_event(OutputEvent(output=reply.message.content))

        result = AgentsExecutionEnvironment.local().from_list([{{"key": "a"}}]).apply(A()).run()
        print([e.message for e in result.errors])
    ''')
    assert proc.returncode == 0, proc.stderr
    assert f"Connection error. (POST http://127.0.0.1:{port}/v1/chat/completions)" \
        in proc.stdout, proc.stdout


def test_the_other_providers_name_the_url_too_when_nothing_answers(monkeypatch):
    pytest.importorskip("anthropic")
    pytest.importorskip("ollama")
    from flink_agents_py.api import ChatMessage, ProviderError
    from flink_agents_py.integrations.chat_models import AnthropicChatModel, OllamaChatModel
    from flink_agents_py.integrations.embedding_models import (
        OllamaEmbeddingModel,
        OpenAIEmbeddingModel,
    )

    monkeypatch.setenv("NEWCOMER_KEY", "k")
    port = _refused_port()
    root = f"http://127.0.0.1:{port}"
    cases = [
        (AnthropicChatModel(base_url=root, default_model="m", api_key_env="NEWCOMER_KEY",
                            max_retries=0), f"(POST {root}/v1/messages)"),
        (OllamaChatModel(host=root, default_model="m"), f"(POST {root}/api/chat)"),
    ]
    for conn, said in cases:
        with pytest.raises(ProviderError) as e:
            conn.chat([ChatMessage(content="hi")])
        assert str(e.value).endswith(said), str(e.value)
    for embed, said in [
        (OpenAIEmbeddingModel(base_url=f"{root}/v1", api_key_env="NEWCOMER_KEY"),
         f"(POST {root}/v1/embeddings)"),
        (OllamaEmbeddingModel(base_url=root), f"(POST {root}/api/embed)")]:
        with pytest.raises(ProviderError) as e:
            embed.embed_texts(["hi"])
        assert str(e.value).endswith(said), str(e.value)


def test_applying_the_agent_class_instead_of_an_instance_says_to_call_it(tmp_path):
    # before: "expected an Agent instance, got type", which names neither the class nor
    # the fix
    proc = _run(tmp_path, '''
        from flink_agents_py.testing import check_replay_safety

        class Triage(Agent):
            @action(InputEvent)
            @staticmethod
            def go(event, ctx):
                pass

        for attempt in (lambda: AgentsExecutionEnvironment.local().from_list([]).apply(Triage),
                        lambda: check_replay_safety(Triage, [{"key": "a"}]),
                        lambda: AgentsExecutionEnvironment.local().from_list([]).apply(3)):
            try:
                attempt()
            except PlanError as e:
                print(e.problems[0])
    ''')
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == [
        "expected an Agent instance, got the class Triage itself: pass an instance, Triage()",
        "expected an Agent instance, got the class Triage itself: pass an instance, Triage()",
        "expected an Agent instance, got int"]


def test_a_misspelt_yaml_key_is_named_with_the_key_it_likely_meant(tmp_path):
    # before: "unknown key 'promt' for chat model setup ChatModelSetup; allowed keys: " and
    # 21 names to search for the one meant
    (tmp_path / "agents.yaml").write_text(textwrap.dedent('''\
        agents:
          - name: triage
            actoins:
              - {name: start, function: my_agent:script, on: [InputEvent]}
            chat_model_connections:
              - name: conn
                clazz: flink_agents_py.integrations.chat_models.ScriptedChatModel
                function: my_agent:script
            chat_model_setups:
              - name: llm
                connection: conn
                promt: "Review {product}"
                colour: blue
        '''))
    proc = _run(tmp_path, '''
        from flink_agents_py.yaml import YamlError, load_agent

        try:
            load_agent("agents.yaml")
        except YamlError as e:
            for p in e.details:
                print(p.message.split("; allowed")[0])
    ''')
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == [
        "unknown key 'actoins' (did you mean 'actions'?) in an agent entry",
        "unknown key 'promt' (did you mean 'prompt'?) for chat model setup ChatModelSetup",
        "unknown key 'colour' for chat model setup ChatModelSetup"]


def test_a_misspelt_descriptor_argument_names_the_argument_it_likely_meant(tmp_path):
    # before: "... takes no argument 'base_ulr' (it takes: api_key_env, ...)" and the list
    proc = _run(tmp_path, '''
        from flink_agents_py.integrations.chat_models import OpenAIChatModel

        class A(Agent):
            @chat_model_connection
            @staticmethod
            def conn():
                return ResourceDescriptor(OpenAIChatModel, base_ulr="http://127.0.0.1:1/v1")

            @chat_model_setup
            @staticmethod
            def llm():
                return ResourceDescriptor(ChatModelSetup, connection="conn", promt="Hi",
                                          colour="blue")

            @action(InputEvent)
            @staticmethod
            def go(event, ctx):
                pass

        try:
            AgentsExecutionEnvironment.local().from_list([]).apply(A())
        except PlanError as e:
            for p in sorted(e.problems):
                print(p.split(" (it takes")[0])
    ''')
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == [
        "chat_model resource 'llm': flink_agents_py.api._chat_models.ChatModelSetup takes no "
        "argument 'colour', 'promt' (did you mean 'prompt'?)",
        "chat_model_connection resource 'conn': flink_agents_py.integrations.chat_models."
        "_openai.OpenAIChatModel takes no argument 'base_ulr' (did you mean 'base_url'?)"]


def test_an_unread_error_line_says_where_the_action_raised(tmp_path):
    # before: "unread error record (...): key 'a', input 1, r1/go: ValueError: bad n", the
    # only line a Flink job's console shows for it, with no file or line to open
    proc = _run(tmp_path, '''
        class A(Agent):
            @action(InputEvent)
            @staticmethod
            async def go(event, ctx):
                if event.input["n"] == 2:
                    raise ValueError("bad n")
                ctx.send_event({"not": "an event"} if event.input["n"] == 3 else
                               OutputEvent(output=event.input["n"]))

        records = [{"key": "a", "n": 1}, {"key": "a", "n": 2}, {"key": "a", "n": 3}]
        print(AgentsExecutionEnvironment.local().from_list(records).apply(A()).collect())
    ''')
    assert proc.returncode == 0, proc.stderr
    unread = [line for line in proc.stderr.splitlines()
              if line.startswith("WARNING flink_agents_py.errors: unread error")]
    here = tmp_path / "my_agent.py"
    assert unread[0].endswith(f"r1/go: ValueError: bad n (at {here}:15, in go)"), unread
    # raised inside the library (send_event refusing a dict): the user's line that called it
    assert unread[1].endswith(f"(at {here}:16, in go)"), unread


def test_a_sampling_option_given_to_a_connection_or_setup_says_where_it_goes(tmp_path):
    # before: "... takes no argument 'temperature' (it takes: ...)", naming no place for it
    proc = _run(tmp_path, '''
        from flink_agents_py.integrations.chat_models import OpenAIChatModel

        class A(Agent):
            @chat_model_connection
            @staticmethod
            def conn():
                return ResourceDescriptor(OpenAIChatModel, base_url="http://127.0.0.1:1/v1",
                                          temperatur=0.2)

            @chat_model_setup
            @staticmethod
            def llm():
                return ResourceDescriptor(ChatModelSetup, connection="conn", max_tokens=300)

            @action(InputEvent)
            @staticmethod
            def go(event, ctx):
                pass

        try:
            AgentsExecutionEnvironment.local().from_list([]).apply(A())
        except PlanError as e:
            for p in sorted(e.problems):
                print(p.split(" (it takes")[0])
    ''')
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == [
        "chat_model resource 'llm': flink_agents_py.api._chat_models.ChatModelSetup takes no "
        "argument 'max_tokens' (max_tokens: a model option, given in its options={...})",
        "chat_model_connection resource 'conn': flink_agents_py.integrations.chat_models."
        "_openai.OpenAIChatModel takes no argument 'temperatur' (temperature: a model option, "
        "given in the chat model setup's options={...})"]
