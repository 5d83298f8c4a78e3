"""Runs the ported ``ParallelChatAgent`` on the local runner (ours, not a Flink Agents file).

Flink Agents' driver for it (``parallel_chat_request_example.py``) reads and writes PyFlink
tables (``from_table`` / ``to_table``), which this project does not offer yet; this driver
feeds the same record through Flink Agents' local ``from_list`` / ``to_list`` pattern.
"""

from agents.custom_types_and_resources import ollama_server_descriptor
from agents.parallel_chat_agent import INPUT_TEXT, ParallelChatAgent

from flink_agents_py.compat import AgentsExecutionEnvironment, ResourceType


def main() -> None:
    agents_env = AgentsExecutionEnvironment.get_execution_environment()
    agents_env.add_resource("ollama_server", ResourceType.CHAT_MODEL_CONNECTION,
                            ollama_server_descriptor)
    output = agents_env.from_list([{"key": 1, "value": {"id": 1, "text": INPUT_TEXT}}]).apply(
        ParallelChatAgent()).to_list()
    agents_env.execute()
    print(f"OUTPUT rows: {output}")


if __name__ == "__main__":
    main()
