"""Runs the agents of ``agents/e2e_idioms_agents.py`` on the local runner (ours).

Written as a Flink Agents program is (its imports replaced by ``flink_agents_py.compat``):
the environment configured through ``get_config()``, records appended to the list after
``from_list(...)``, outputs printed one per line.
"""

from agents.e2e_idioms_agents import Review, ReviewMemoryAgent, TaskChatAgent

from flink_agents_py.compat import (
    AgentExecutionOptions,
    AgentsExecutionEnvironment,
    ErrorHandlingStrategy,
)


def main() -> None:
    env = AgentsExecutionEnvironment.get_execution_environment()
    env.get_config().set(AgentExecutionOptions.ERROR_HANDLING_STRATEGY,
                         ErrorHandlingStrategy.RETRY)
    env.get_config().set(AgentExecutionOptions.MAX_RETRIES, 2)

    reviews: list[dict] = []
    review_out = env.from_list(reviews).apply(ReviewMemoryAgent()).to_list()
    reviews.append({"key": 1, "value": Review(id=1, review="great", review_score=5.0)})
    reviews.append({"key": 2, "value": {"id": 2, "review": "broken", "review_score": 1.0}})
    reviews.append({"key": 1, "value": Review(id=1, review="still great", review_score=4.0)})

    tasks = [{"key": "t1", "value": {"task": "calculate the sum of 1 and 2."}},
             {"key": "t2", "value": {"task": "say hello"}}]
    task_out = env.from_list(tasks).apply(TaskChatAgent()).to_list()
    env.execute()

    for row in review_out:
        for key, item in row.items():
            print(f"REVIEW {key} {item.model_dump_json()}")
    for row in task_out:
        for key, out in row.items():
            print(f"TASK {key} {out['answer']!r}")


if __name__ == "__main__":
    main()
