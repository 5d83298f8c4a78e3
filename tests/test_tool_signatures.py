"""What a tool's signature tells the model, and what a model's call passes, for every way a
user writes a parameter.

Before this fix: ``Annotated[int, Field(ge=1, description=...)]`` lost its description and
its bound (``get_type_hints`` without ``include_extras``), in the schema and when checking a
call; ``Annotated[str, "text"]`` (Apache Flink Agents' form) and ``x: int = Field(3, ...)``
lost their descriptions, and a call leaving such an ``x`` out ran the function with the
``FieldInfo`` object as ``x``; a ``**kwargs`` tool given an extra argument failed with
``KeyError``; a parameter named ``_token`` or ``model_config`` made the schema fail (and
every call be refused); a reST docstring's ``:param x:`` fields were not read, and became
part of the description; a Google docstring's ``Note:`` or ``Keyword Args:`` section after
``Args:`` was read as more of the last argument's description; with ``from __future__
import annotations``, a static method tool's hint naming a model of its own class body
(``q: Query``) failed the plan (``NameError``), as it does not without the import; a NumPy
``w, h : int`` line described neither parameter. Similar
reports:
LangChain's ``Annotated`` and ``Field`` argument descriptions, pydantic-ai's docstring
formats (Google, NumPy, Sphinx), Flink Agents'
``create_schema_from_function`` (``Annotated`` text and ``Field`` defaults).
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
VENV_PY = ROOT / ".venv" / "bin" / "python"
PYTHON = VENV_PY if VENV_PY.exists() else Path(sys.executable)

pytestmark = pytest.mark.timeout(180)

SCRIPT = textwrap.dedent('''
    from __future__ import annotations

    import json
    from typing import Annotated

    from pydantic import BaseModel, Field

    from flink_agents_py import AgentsExecutionEnvironment
    from flink_agents_py.api import (Agent, ChatMessage, ChatModelSetup, InputEvent,
                                     OutputEvent, ResourceDescriptor, ResourceType, action,
                                     tool)
    from flink_agents_py.testing import model_from_function, tool_call, tool_calls


    def search(query: Annotated[str, Field(description="words to look for")],
               limit: Annotated[int, Field(ge=1, le=5)] = 3,
               lang: Annotated[str, "a language code"] = "en") -> str:
        """Search the catalogue."""
        return f"{query}/{limit}/{lang}"


    def count(n: int = Field(2, description="how many")) -> int:
        """Count."""
        return n * 10


    def tag(label: str, **extra: str) -> dict:
        """Tag a thing."""
        return {"label": label, **extra}


    def secret(_token: str, model_config: int = 1) -> str:
        """Use a token."""
        return f"{_token}:{model_config}"


    def rest(a: int, b: str = "x") -> str:
        """Join two values.

        :param a: the first value
        :param b: the second value,
            on two lines
        :returns: both
        """
        return f"{a}{b}"


    def scale(a: int, b: int = 0, **opts: int) -> int:
        """Scale a sum.

        Args:
            a: the first term.
            b: the second term.

        Note:
            Slow on big numbers.

        Keyword Args:
            factor: what to multiply by.

        Warning:
            Never on Sundays.
        """
        return (a + b) * opts.get("factor", 1)


    def box(w: int, h: int, label: str = "") -> str:
        """Draw a box.

        Parameters
        ----------
        w, h : int
            The width and the height.
        label : str, optional
            What to write in it.
        """
        return f"{w}x{h}{label}"


    CALLS = {
        "box": ("box", {"w": 2, "h": 3}),
        "scale": ("scale", {"a": 1, "b": 2, "factor": 3}),
        "find": ("find", {"q": {"text": "tea", "limit": "2"}}),
        "bound": ("search", {"query": "pen", "limit": 0}),
        "search": ("search", {"query": "pen"}),
        "count": ("count", {}),
        "tag": ("tag", {"label": "a", "colour": "red"}),
        "secret": ("secret", {"_token": "t", "model_config": 2}),
        "rest": ("rest", {"a": 1}),
    }
    OFFERED = {}


    def script(request):
        for t in request.tools:
            OFFERED[t.name] = {"description": t.description, "parameters": t.parameters}
        if not request.tool_results:
            name, args = CALLS[request.last_user_text]
            return tool_calls(tool_call(name, "c1", **args))
        return request.tool_results[-1].content


    class Shop(Agent):
        class Query(BaseModel):
            text: str
            limit: int = 1

        @tool
        @staticmethod
        def find(q: Query) -> str:
            """Find by a query the class body defines."""
            return f"{type(q).__name__}:{q.text}:{q.limit}"

        @action(InputEvent)
        @staticmethod
        async def ask(event, ctx):
            reply = await ctx.chat("model", [ChatMessage(content=event.input["case"])])
            ctx.send_event(OutputEvent(output={"case": event.input["case"],
                                               "answer": reply.message.content}))


    agent = Shop()
    agent.add_resource("conn", ResourceType.CHAT_MODEL_CONNECTION, model_from_function(script))
    agent.add_resource("model", ResourceType.CHAT_MODEL, ResourceDescriptor(
        ChatModelSetup, connection="conn", tools=list({n for n, _ in CALLS.values()})))
    for fn in (search, count, tag, secret, rest, scale, box):
        agent.add_resource(fn.__name__, ResourceType.TOOL, fn)
    outs = AgentsExecutionEnvironment.local().from_list(
        [{"key": c, "case": c} for c in CALLS]).apply(agent).collect()
    print(json.dumps({"answers": {o["case"]: o.get("answer", o) for o in outs},
                      "offered": OFFERED}))
''')


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> dict:
    home = tmp_path_factory.mktemp("user_tools")
    (home / "shop.py").write_text(SCRIPT)
    proc = subprocess.run([str(PYTHON), "shop.py"], cwd=home, capture_output=True,
                          text=True, timeout=150, env={"PYTHONPATH": str(ROOT), "PATH": ""})
    assert proc.returncode == 0, proc.stderr
    result: dict = json.loads(proc.stdout.strip().splitlines()[-1])
    return result


def test_annotated_fields_describe_and_bound_the_argument(run: dict) -> None:
    props = run["offered"]["search"]["parameters"]["properties"]
    assert props["query"]["description"] == "words to look for"
    assert (props["limit"]["minimum"], props["limit"]["maximum"]) == (1, 5)
    assert props["lang"]["description"] == "a language code"
    assert run["answers"]["search"] == "pen/3/en"
    # the bound is checked too: the model reads why, the function is not run
    assert run["answers"]["bound"].startswith("Error: ValueError: tool 'search'")
    assert "limit: Input should be greater than or equal to 1" in run["answers"]["bound"]


def test_a_field_default_is_its_value_and_describes_the_argument(run: dict) -> None:
    props = run["offered"]["count"]["parameters"]["properties"]
    assert props["n"] == {"default": 2, "description": "how many", "type": "integer"}
    assert run["answers"]["count"] == "20"


def test_a_kwargs_tool_takes_extra_arguments(run: dict) -> None:
    assert json.loads(run["answers"]["tag"]) == {"label": "a", "colour": "red"}


def test_parameters_named_as_pydantic_takes_no_field_are_offered_and_passed(run: dict) -> None:
    params = run["offered"]["secret"]["parameters"]
    assert set(params["properties"]) == {"_token", "model_config"}
    assert params["required"] == ["_token"]
    assert run["answers"]["secret"] == "t:2"


def test_rest_docstring_fields_describe_the_arguments(run: dict) -> None:
    offered = run["offered"]["rest"]
    assert offered["description"] == "Join two values."
    props = offered["parameters"]["properties"]
    assert props["a"]["description"] == "the first value"
    assert props["b"]["description"] == "the second value, on two lines"
    assert run["answers"]["rest"] == "1x"


def test_google_sections_after_args_end_the_last_description(run: dict) -> None:
    props = run["offered"]["scale"]["parameters"]["properties"]
    assert props["a"]["description"] == "the first term."
    assert props["b"]["description"] == "the second term."
    assert run["offered"]["scale"]["description"] == "Scale a sum."
    assert run["answers"]["scale"] == "9"


def test_a_hint_naming_a_model_of_the_agents_class_body_resolves(run: dict) -> None:
    props = run["offered"]["find"]["parameters"]
    assert props["properties"]["q"] == {"$ref": "#/$defs/Query"}
    assert run["answers"]["find"] == "Query:tea:2"


def test_numpy_lines_naming_several_parameters_describe_each(run: dict) -> None:
    props = run["offered"]["box"]["parameters"]["properties"]
    assert props["w"]["description"] == props["h"]["description"] == "The width and the height."
    assert props["label"]["description"] == "What to write in it."
    assert run["answers"]["box"] == "2x3"
