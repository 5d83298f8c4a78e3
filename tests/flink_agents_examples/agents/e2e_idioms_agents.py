"""Agents written the way Apache Flink Agents' own e2e tests write them (ours, not copies).

Each uses only Flink Agents' API names (imported from ``flink_agents_py.compat``): a custom
event class with its own ``__init__``, short-term memory counters and ``MemoryRef``s passed in
events, a ``@tool`` fetched as a resource and called, ``durable_execute_async`` of a local
function, and a chat model connection and setup written against Flink Agents' base classes
(``chat`` returning a ``ChatMessage`` with an OpenAI-form tool call; a setup with its own
``open``, ``model_kwargs`` and ``chat`` that fills its prompt). Kept in a module of their own,
as Flink Agents requires of agent classes run on Flink.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any, ClassVar

from pydantic import BaseModel

from flink_agents_py.compat import (
    Agent,
    BaseChatModelConnection,
    BaseChatModelSetup,
    ChatMessage,
    ChatRequestEvent,
    ChatResponseEvent,
    Event,
    EventType,
    InputEvent,
    MessageRole,
    OutputEvent,
    Prompt,
    ResourceDescriptor,
    ResourceType,
    RunnerContext,
    ToolType,
    action,
    chat_model_connection,
    chat_model_setup,
    prompt,
    tool,
)


class Review(BaseModel):
    """One input record."""

    id: int
    review: str
    review_score: float
    memory_info: dict | None = None


class ReviewKeySelector:
    """Keys a ``Review`` by its id (a PyFlink ``KeySelector`` on Flink)."""

    def get_key(self, value: Review) -> int:
        return value.id


class RefEvent(Event):
    """A custom event carrying one value (here a ``MemoryRef``)."""

    EVENT_TYPE: ClassVar[str] = "_ref_event"

    def __init__(self, value: Any) -> None:
        super().__init__(type=RefEvent.EVENT_TYPE, attributes={"value": value})

    @classmethod
    def from_event(cls, event: Event) -> RefEvent:
        return cls(value=event.attributes["value"])

    @property
    def value(self) -> Any:
        return self.attributes["value"]


class ReviewMemoryAgent(Agent):
    """Counts a key's reviews in short-term memory and passes each review by reference."""

    @tool
    @staticmethod
    def mark(text: str) -> str:
        """Mark a text as seen by the tool.

        Parameters
        ----------
        text : str
            The text to mark
        """
        return text + " [marked]"

    @action(EventType.InputEvent)
    @staticmethod
    async def remember(event: Event, ctx: RunnerContext) -> None:
        def audit(item: Review, total: int) -> bool:  # a local function, run durably
            return item.id > 0 and total > 0

        item = Review.model_validate(InputEvent.from_event(event).input)
        stm = ctx.short_term_memory
        total = (stm.get("status.total_reviews") or 0) + 1
        stm.set("status.total_reviews", total)
        audited = await ctx.durable_execute_async(audit, item, total)
        item.review += f" (audited={audited})"
        item.memory_info = {"total_reviews": total}
        ref = stm.set(f"items.item_{item.id}", item.model_dump(mode="json"))
        ctx.send_event(RefEvent(value=ref))

    @action(RefEvent.EVENT_TYPE)
    @staticmethod
    def emit(event: Event, ctx: RunnerContext) -> None:
        ref = RefEvent.from_event(event).value
        item = Review.model_validate(ctx.short_term_memory.get(ref))
        marker = ctx.get_resource("mark", ResourceType.TOOL)
        item.review = marker.call(item.review)
        seen = ctx.short_term_memory.get("items").get_field_names()
        item.memory_info = {**(item.memory_info or {}), "items": seen}
        ctx.send_event(OutputEvent(output=item))


class EchoToolConnection(BaseChatModelConnection):
    """Asks for ``add`` when the task is a sum, then echoes the whole conversation."""

    def chat(self, messages: Sequence[ChatMessage], tools: list | None = None,
             **kwargs: Any) -> ChatMessage:
        last = messages[-1].content
        if "sum" in last:
            assert tools is not None and tools[0].name == "add"
            return ChatMessage(role=MessageRole.ASSISTANT, content=last, tool_calls=[{
                "id": uuid.uuid4(), "type": ToolType.FUNCTION,
                "function": {"name": "add", "arguments": {"a": 1, "b": 2}}}])
        return ChatMessage(role=MessageRole.ASSISTANT,
                           content="\n".join(m.content for m in messages))


class TaskPromptSetup(BaseChatModelSetup):
    """Fills its prompt for a task, resolves its tools by name, asks its connection."""

    def open(self) -> None:
        pass

    @property
    def model_kwargs(self) -> dict[str, Any]:
        return {}

    def chat(self, messages: Sequence[ChatMessage], prompt_args: dict[str, Any] | None = None,
             **kwargs: Any) -> ChatMessage:
        connection = self.resource_context.get_resource(self.connection,
                                                        ResourceType.CHAT_MODEL_CONNECTION)
        if self.prompt is not None and "sum" in messages[-1].content:
            template = self.resource_context.get_resource(self.prompt, ResourceType.PROMPT)
            messages = template.format_messages(
                role=MessageRole.USER, **{k: str(v) for k, v in (prompt_args or {}).items()})
        tools = [self.resource_context.get_resource(t, ResourceType.TOOL) for t in self.tools]
        return connection.chat(messages, tools=tools, **kwargs)


class TaskChatAgent(Agent):
    """Sends a chat request to a setup of its own class; the answer is the output."""

    @prompt
    @staticmethod
    def task_prompt() -> Prompt:
        return Prompt.from_text(text="Please call the appropriate tool to do this task: {task}")

    @chat_model_connection
    @staticmethod
    def echo_connection() -> ResourceDescriptor:
        return ResourceDescriptor(
            clazz=f"{EchoToolConnection.__module__}.{EchoToolConnection.__name__}")

    @chat_model_setup
    @staticmethod
    def task_model() -> ResourceDescriptor:
        return ResourceDescriptor(
            clazz=f"{TaskPromptSetup.__module__}.{TaskPromptSetup.__name__}",
            connection="echo_connection", model="mock", prompt="task_prompt", tools=["add"])

    @tool
    @staticmethod
    def add(a: int, b: int) -> int:
        """Calculate the sum of a and b.

        Parameters
        ----------
        a : int
            The first operand
        b : int
            The second operand
        """
        return a + b

    @action(EventType.InputEvent)
    @staticmethod
    def ask(event: Event, ctx: RunnerContext) -> None:
        task = InputEvent.from_event(event).input["task"]
        ctx.short_term_memory.set("task", task)
        ctx.send_event(ChatRequestEvent(
            model="task_model", messages=[ChatMessage(role=MessageRole.USER, content=task)],
            prompt_args={"task": task}))

    @action(EventType.ChatResponseEvent)
    @staticmethod
    def answer(event: Event, ctx: RunnerContext) -> None:
        response = ChatResponseEvent.from_event(event).response
        ctx.send_event(OutputEvent(output={"task": ctx.short_term_memory.get("task"),
                                           "answer": response.content}))
