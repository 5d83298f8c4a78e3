"""A starter agent: answers weather questions with a chat model that calls a tool.

The model is scripted (``scripted_model`` plays it), so everything runs offline and the
same way every time; ``model_connection`` says how to swap in a real one.
"""

import json

from flink_agents_py.api import (
    Agent,
    ChatMessage,
    ChatModelSetup,
    InputEvent,
    OutputEvent,
    ResourceDescriptor,
    RunnerContext,
    ToolCall,
    action,
    chat_model_connection,
    chat_model_setup,
    tool,
)
from flink_agents_py.integrations.chat_models import ScriptedChatModel, ScriptedRequest

WEATHER = {"paris": "sunny, 21 degrees", "oslo": "snowing, -3 degrees"}


def by_user(record: dict) -> str:
    """The key of a record: one user's questions are answered in order, users concurrently."""
    return record["user"]


def scripted_model(request: ScriptedRequest) -> ToolCall | str:
    """Play the model: call get_weather for the question's last word, then answer.

    Returns:
        The tool call, then (with its result) the answer.

    Raises:
        ValueError: when the chat no longer offers get_weather (change the ToolCall
            below when you rename or replace the tool).
    """
    offered = [t.name for t in request.tools]
    if "get_weather" not in offered:
        raise ValueError(f"scripted_model calls get_weather, but the chat offers {offered}: "
                         "change scripted_model's ToolCall to the tool you offer")
    if not request.tool_results:
        city = request.last_user_text.rstrip("?").split()[-1]
        return ToolCall(id="weather-1", name="get_weather", arguments={"city": city})
    result = request.tool_results[0].content  # what get_weather returned, as JSON
    try:
        found = json.loads(result)
    except ValueError:  # the tool failed: the text says why
        return f"get_weather failed: {result}"
    return f"{found['city']}: {found['weather']}."


class WeatherAgent(Agent):
    """Answers one question per input record, ``{"user": ..., "text": ...}``."""

    @tool
    @staticmethod
    def get_weather(city: str) -> dict:
        """Today's weather in a city.

        Args:
            city: the city's name, e.g. "Paris".

        Returns:
            The city and its weather ("unknown" for a city it does not know).
        """
        return {"city": city, "weather": WEATHER.get(city.lower(), "unknown")}

    @chat_model_connection
    @staticmethod
    def model_connection() -> ResourceDescriptor:
        """How to reach the model: here, the scripted one."""
        # A real model instead, e.g. any OpenAI-compatible server (the key is read from
        # OPENAI_API_KEY): from flink_agents_py.integrations.chat_models import OpenAIChatModel
        # return ResourceDescriptor(OpenAIChatModel, base_url="https://api.openai.com/v1",
        #                           default_model="gpt-4o-mini")
        # Ollama, Anthropic, an embedded llama.cpp model: docs/how-to/choose-a-model.md
        # the script by "module:function" (this module's name, e.g. "my_agent")
        return ResourceDescriptor(ScriptedChatModel, function=f"{__name__}:scripted_model")

    @chat_model_setup
    @staticmethod
    def assistant() -> ResourceDescriptor:
        """Which connection, prompt and tools a chat uses."""
        return ResourceDescriptor(ChatModelSetup, connection="model_connection",
                                  tools=["get_weather"],
                                  prompt="Answer questions about the weather; use get_weather.")

    @action(InputEvent)
    @staticmethod
    async def answer(event: InputEvent, ctx: RunnerContext) -> None:
        """Ask the model (tool round included) and send the answer."""
        question = event.input["text"]
        # a durable call: after a restore it is replayed from Flink's keyed state, not re-run
        reply = await ctx.chat("assistant", [ChatMessage(content=question)])
        ctx.send_event(OutputEvent(output={"user": ctx.key, "question": question,
                                           "answer": reply.message.content}))
