"""Answer questions.jsonl: ``python main.py`` (local runner) or ``python main.py flink``.

``flink`` runs a Flink job on a MiniCluster in this process. On a cluster (``flink run``,
see docs/how-to/run-on-flink.md) the TaskManagers read questions.jsonl from the same path.
"""

import json
import sys
from pathlib import Path

from flink_agents_py import AgentsExecutionEnvironment
from flink_agents_py.io import read_json_lines

from my_agent import WeatherAgent, by_user

QUESTIONS = Path(__file__).resolve().with_name("questions.jsonl")


def show(row: dict) -> None:
    """Print an answer as JSON; a bad input line or a failed record to stderr."""
    if row.get("kind") == "error":  # a line that is not a JSON record
        print(f"bad input in {QUESTIONS.name}: {row['error']}", file=sys.stderr)
    elif "error_type" in row:  # an action that raised, or a record its key selector refused
        print(f"failed (key {row['key']!r}): {row['error_type']}: {row['message']}",
              file=sys.stderr)
    else:
        print(json.dumps(row))


def run_local() -> None:
    """Run the agent in this process; show the bad lines, the answers, the failed records."""
    lines = list(read_json_lines(QUESTIONS))
    records = [line.record for line in lines if line.error is None]
    env = AgentsExecutionEnvironment.local()
    result = env.from_list(records, key_selector=by_user).apply(WeatherAgent()).run()
    for row in [*(line.error for line in lines if line.error), *result.outputs,
                *(error.model_dump(mode="json") for error in result.errors)]:
        show(row)


def run_flink() -> None:
    """Run the agent as a Flink job; show each answer, bad line and failed record."""
    from flink_agents_py.flink import create_stream_environment, read_lines_file

    env = create_stream_environment(parallelism=1)
    questions = read_lines_file(env, QUESTIONS)  # Flink's FileSource: rewound on a restore
    job = AgentsExecutionEnvironment.flink(env).from_datastream(questions.records,
                                                               key_selector=by_user)
    job.apply(WeatherAgent())
    rows = job.to_datastream().union(job.errors_datastream(), questions.errors)
    with rows.execute_and_collect("weather-agent") as results:
        for row in results:
            show(row)


if __name__ == "__main__":
    run_flink() if sys.argv[1:] == ["flink"] else run_local()
