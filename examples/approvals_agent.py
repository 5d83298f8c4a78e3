"""The agent of ``approvals_kafka.py``: a support assistant whose emails need approval.

An offline, scripted "model" asks for one ``send_email`` per request, to the request's
address; the tool is declared with ``requires_approval=True``, so each call is held and an
``ApprovalRequest`` goes to the outputs until a reviewer answers on the approvals topic. The
tool "sends" by appending a JSON line to the outbox file named by ``APPROVALS_OUTBOX`` (so a
test can count what was sent).
"""

from __future__ import annotations

import json
import os
from typing import Any

from flink_agents_py.api import (
    Agent,
    ChatMessage,
    ChatModelSetup,
    FunctionTool,
    InputEvent,
    MessageRole,
    OutputEvent,
    ResourceDescriptor,
    ResourceType,
    RunnerContext,
    ToolCall,
    action,
    chat_model_connection,
    chat_model_setup,
)
from flink_agents_py.integrations.chat_models import ScriptedChatModel
from flink_agents_py.testing import ScriptedRequest

OUTBOX_ENV = "APPROVALS_OUTBOX"
TIMEOUT_ENV = "APPROVALS_TIMEOUT_S"
SMS_TIMEOUT_ENV = "APPROVALS_SMS_TIMEOUT_S"


def send_email(to: str, body: str) -> str:
    """Send an email to a customer.

    Args:
        to: the address.
        body: the text.

    Returns:
        A receipt.
    """
    outbox = os.environ.get(OUTBOX_ENV)
    if outbox:
        with open(outbox, "a") as f:
            f.write(json.dumps({"to": to, "body": body}) + "\n")
    return f"sent to {to}"


def send_sms(to: str, body: str) -> str:
    """Send a text message to a customer (appended to the outbox too).

    Args:
        to: the number.
        body: the text.

    Returns:
        A receipt.
    """
    return send_email(to, body).replace("sent to", "texted")


def assistant_script(request: ScriptedRequest) -> Any:
    """The offline model: first a tool call, then a summary of what came back.

    The call is ``send_sms`` when the request's ``channel`` is ``"sms"``, else
    ``send_email``.

    Returns:
        The assistant's message.
    """
    results = request.tool_results
    if not results:
        ask = json.loads(request.messages[-1].content)
        tool = "send_sms" if ask.get("channel") == "sms" else "send_email"
        return ChatMessage(role=MessageRole.ASSISTANT, tool_calls=[ToolCall(
            id="message-1", name=tool, arguments={"to": ask["to"], "body": ask["text"]})])
    return "; ".join(str(m.content) for m in results)


class SupportAgent(Agent):
    """Asks the assistant to answer a request by email; outputs what happened."""

    @chat_model_connection
    @staticmethod
    def offline() -> ResourceDescriptor:
        """The scripted, offline connection."""
        return ResourceDescriptor(ScriptedChatModel, function=f"{__name__}:assistant_script")

    @chat_model_setup
    @staticmethod
    def assistant() -> ResourceDescriptor:
        """The chat setup, offered the email and text message tools."""
        return ResourceDescriptor(ChatModelSetup, connection="offline",
                                  tools=["send_email", "send_sms"])

    @action(InputEvent)
    @staticmethod
    async def on_request(event: InputEvent, ctx: RunnerContext) -> None:
        """Chat about the request (the email waits for approval inside), output the answer."""
        request = event.input
        response = await ctx.chat("assistant", [ChatMessage(content=json.dumps(
            {"to": request["to"], "text": request["text"],
             "channel": request.get("channel", "email")}))])
        ctx.send_event(OutputEvent(output={"kind": "answer", "key": ctx.key,
                                           "answer": response.message.content}))


def build_agent() -> SupportAgent:
    """The agent, its tools held for approval.

    Timeouts from ``APPROVALS_TIMEOUT_S`` (emails, default a day) and
    ``APPROVALS_SMS_TIMEOUT_S`` (text messages, default an hour).

    Returns:
        The agent.
    """
    agent = SupportAgent()
    for name, env, default in (("send_email", TIMEOUT_ENV, 24 * 3600.0),
                               ("send_sms", SMS_TIMEOUT_ENV, 3600.0)):
        timeout = os.environ.get(env)
        agent.add_resource(name, ResourceType.TOOL, ResourceDescriptor(
            FunctionTool, func=f"{__name__}:{name}", requires_approval=True,
            approval_timeout_s=float(timeout) if timeout else default))
    return agent

