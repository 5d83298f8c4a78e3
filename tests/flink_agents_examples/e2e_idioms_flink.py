"""Runs ``ReviewMemoryAgent`` on Flink (a MiniCluster), as Flink Agents' DataStream e2e test
runs its agent (ours, not a copy): JSON lines mapped to pydantic records, keyed by a PyFlink
``KeySelector``, the outputs printed as JSON."""

from agents.e2e_idioms_agents import Review, ReviewMemoryAgent
from pyflink.common import Types
from pyflink.datastream import KeySelector, RuntimeExecutionMode, StreamExecutionEnvironment

from flink_agents_py.compat import AgentsExecutionEnvironment

LINES = ['{"id": 1, "review": "great", "review_score": 5.0}',
         '{"id": 2, "review": "broken", "review_score": 1.0}',
         '{"id": 1, "review": "still great", "review_score": 4.0}']


class ReviewIdSelector(KeySelector):
    """Keys a review by its id."""

    def get_key(self, value: Review) -> int:
        return value.id


def main() -> None:
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_runtime_mode(RuntimeExecutionMode.STREAMING)
    env.set_parallelism(1)
    reviews = env.from_collection(LINES, type_info=Types.STRING()).map(
        lambda line: Review.model_validate_json(line))
    agents_env = AgentsExecutionEnvironment.get_execution_environment(env=env)
    out = (agents_env.from_datastream(input=reviews, key_selector=ReviewIdSelector())
           .apply(ReviewMemoryAgent()).to_datastream())
    out.map(lambda item: "REVIEW " + item.model_dump_json(), Types.STRING()).print()
    agents_env.execute()


if __name__ == "__main__":
    main()
