"""Start-up (issue 31): what a Flink job's client and its Python workers load before the
first record, and that what they put off still works the same when it is used."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

DEFERRED = {  # module -> the models whose pydantic schema is built at their first use
    "flink_agents_py.api._messages": ["ChatMessage", "ChatResponse", "TokenUsage", "ToolCall",
                                      "ToolResult"],
    "flink_agents_py.api._events": ["ChatRequestEvent", "ChatResponseEvent",
                                    "ToolRequestEvent", "ToolResponseEvent"],
    "flink_agents_py.api._vector_stores": ["Collection", "ContextRetrievalRequestEvent",
                                           "ContextRetrievalResponseEvent", "Document",
                                           "VectorStoreQuery", "VectorStoreQueryResult"],
    "flink_agents_py.api._embeddings": ["EmbeddingResult", "EmbeddingTokenUsage"],
    "flink_agents_py.api._budgets": ["Budget", "ModelPrice"],
    "flink_agents_py.api._flow": ["FlowControl", "RateLimitInfo"],
    "flink_agents_py.api._tools": ["ToolMetadata", "ToolSpec"],
    "flink_agents_py.api._subagents": ["RunStatus", "SubagentResult"],
    "flink_agents_py.api._long_term_memory": ["MemorySetItem"],
    "flink_agents_py.api._prompts": ["Prompt"],
}


def run_fresh(code: str, cwd: Path) -> dict:
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], cwd=cwd,
                          env={**os.environ, "PYTHONPATH": str(ROOT)},
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_a_flink_jobs_client_does_not_load_the_local_runner(tmp_path):
    # what a Flink job's script imports (the docs' and the start-up benchmark's way)
    pytest.importorskip("pyflink")
    out = run_fresh("""
        import json, sys
        from flink_agents_py import AgentsExecutionEnvironment
        from flink_agents_py.flink import create_stream_environment
        from flink_agents_py.api import Agent, InputEvent, OutputEvent, action
        before = sorted(m for m in sys.modules if m.startswith("flink_agents_py.local"))
        env = AgentsExecutionEnvironment.local()  # still there when asked for
        print(json.dumps({"before": before, "local": type(env).__name__}))
    """, tmp_path)
    assert out == {"before": [], "local": "LocalExecutionEnvironment"}


def test_a_worker_builds_no_schema_for_models_an_echo_agent_never_uses(tmp_path):
    pytest.importorskip("pyflink")
    out = run_fresh(f"""
        import importlib, json
        import flink_agents_py.flink._operator, flink_agents_py.flink._fresh
        from flink_agents_py.observability import HostObservability
        deferred = {json.dumps(DEFERRED)}
        built = [f"{{m}}.{{n}}" for m, names in deferred.items() for n in names
                 if getattr(importlib.import_module(m), n).__pydantic_complete__]
        print(json.dumps({{"built": built}}))
    """, tmp_path)
    assert out["built"] == []


def test_the_models_built_at_first_use_validate_and_refuse_as_before(tmp_path):
    # a user's module, run from outside the repository: first use builds each model
    (tmp_path / "job.py").write_text(textwrap.dedent("""
        import json
        from pydantic import ValidationError
        from flink_agents_py.api import (
            Budget, ChatMessage, ChatRequestEvent, ChatResponse, Document, Prompt, ToolCall)

        msg = ChatMessage(role="user", content="hi")
        req = ChatRequestEvent("model", [msg])
        call = ToolCall(id="c1", name="add", arguments={"a": 1})
        errors = []
        for build in (lambda: Budget(max_token=10),
                      lambda: ChatMessage(role="nobody", content="x"),
                      lambda: Document(content=3)):
            try:
                build()
            except ValidationError as e:
                errors.append(str(e))
        print(json.dumps({
            "role": msg.role, "messages": [m.content for m in req.messages],
            "type": req.type, "call": call.name,
            "prompt": Prompt.from_text("be {tone}").format_string(tone="brief"),
            "response": ChatResponse(message=msg).message.content,
            "schema": sorted(ChatMessage.model_json_schema()["properties"]),
            "errors": errors}))
    """))
    out = run_fresh("import runpy; runpy.run_path('job.py')", tmp_path)
    assert out["role"] == "user" and out["messages"] == ["hi"] and out["call"] == "add"
    assert out["type"] == "ChatRequestEvent" and out["prompt"] == "be brief"
    assert out["response"] == "hi" and {"role", "content"} <= set(out["schema"])
    assert len(out["errors"]) == 3 and "did you mean 'max_tokens'" in out["errors"][0]
