"""Flink Agents' RAG example's helper (ported: tests/flink_agents_examples/rag_agent_example.py)."""
