"""The agent's tests (``python -m pytest`` in this folder): offline, on the local runner."""

from flink_agents_py import AgentsExecutionEnvironment
from flink_agents_py.testing import check_replay_safety

from my_agent import WeatherAgent, by_user

QUESTIONS = [
    {"user": "ana", "text": "What is the weather in Paris?"},
    {"user": "bo", "text": "Do I need a coat in Oslo?"},
    {"user": "ana", "text": "And in Lima?"},
]


def test_answers_with_the_weather_tool() -> None:
    """Each question gets the tool's answer for its city."""
    env = AgentsExecutionEnvironment.local()
    outputs = env.from_list(QUESTIONS, key_selector=by_user).apply(WeatherAgent()).collect()
    answers = {o["question"]: o["answer"] for o in outputs}
    assert answers == {"What is the weather in Paris?": "Paris: sunny, 21 degrees.",
                       "Do I need a coat in Oslo?": "Oslo: snowing, -3 degrees.",
                       "And in Lima?": "Lima: unknown."}
    assert [o["question"] for o in outputs if o["user"] == "ana"] == [
        "What is the weather in Paris?", "And in Lima?"]


def test_replay_safe() -> None:
    """Crashed at every point a checkpoint could be taken, it recovers without calling again."""
    check_replay_safety(WeatherAgent(), QUESTIONS, key_selector=by_user).assert_ok()
