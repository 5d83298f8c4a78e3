"""Answer questions.jsonl: ``python main.py`` (local runner) or ``python main.py flink``.

``flink`` runs a Flink job on a MiniCluster in this process. On a cluster (``flink run``,
see docs/how-to/run-on-flink.md) the TaskManagers read questions.jsonl from the same path.
"""

import json
import sys
from pathlib import Path

from flink_agents_py import AgentsExecutionEnvironment

from my_agent import WeatherAgent, by_user

QUESTIONS = Path(__file__).resolve().with_name("questions.jsonl")


def show(row: dict) -> None:
    """Print an answer as JSON; a failed record (an action that raised) to stderr."""
    if "error_type" in row:  # an ErrorRecord, as both runners report failures
        print(f"failed: {row['key']!r}: {row['error_type']}: {row['message']}", file=sys.stderr)
    else:
        print(json.dumps(row))


def run_local() -> None:
    """Run the agent in this process; show each answer, then the failed records."""
    records = [json.loads(line) for line in QUESTIONS.read_text().splitlines() if line.strip()]
    env = AgentsExecutionEnvironment.local()
    result = env.from_list(records, key_selector=by_user).apply(WeatherAgent()).run()
    for row in [*result.outputs, *(e.model_dump(mode="json") for e in result.errors)]:
        show(row)


def run_flink() -> None:
    """Run the agent as a Flink job; show each answer and failed record as it comes."""
    from pyflink.common import Types, WatermarkStrategy
    from pyflink.datastream.connectors.file_system import FileSource, StreamFormat

    from flink_agents_py.flink import create_stream_environment

    env = create_stream_environment(parallelism=1)
    lines = FileSource.for_record_stream_format(StreamFormat.text_line_format(),
                                                str(QUESTIONS)).build()
    records = env.from_source(lines, WatermarkStrategy.no_watermarks(), "questions").map(
        json.loads, output_type=Types.PICKLED_BYTE_ARRAY())
    job = AgentsExecutionEnvironment.flink(env).from_datastream(records, key_selector=by_user)
    job.apply(WeatherAgent())
    rows = job.to_datastream().union(job.errors_datastream())
    with rows.execute_and_collect("weather-agent") as results:
        for row in results:
            show(row)


if __name__ == "__main__":
    run_flink() if sys.argv[1:] == ["flink"] else run_local()
