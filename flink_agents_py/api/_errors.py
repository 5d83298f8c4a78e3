"""The error hierarchy of flink-agents-py: one root, specific subclasses."""

from __future__ import annotations

from typing import Any

from ._secrets import cut_masked, mask_secrets

__all__ = [
    "AgentsError",
    "PlanError",
    "DuplicateNameError",
    "ActionError",
    "ResourceNotFoundError",
    "ResourceError",
    "ProviderError",
    "NotInActionContextError",
    "ChatResponseError",
    "DurableExecutionError",
    "ReplayDivergenceError",
    "SerializationError",
    "UnsupportedAwaitError",
    "UnfinishedRunError",
    "UsageError",
    "AgentAlreadyAppliedError",
    "MissingApiKeyError",
]


class AgentsError(Exception):
    """Root of every error this package raises on purpose.

    Known secrets in its text arguments are masked when it is made (``api.mask_secrets``):
    a provider that echoes the API key in its error cannot put it into the message.
    """

    def __init__(self, *args: Any) -> None:
        super().__init__(*(mask_secrets(a) if isinstance(a, str) else a for a in args))


class PlanError(AgentsError):
    """An agent cannot be compiled into a plan.

    Args:
        problems: every problem found, each a sentence naming the culprit. All problems are
            collected before raising so a user fixes them in one pass.
    """

    def __init__(self, problems: list[str]) -> None:
        self.problems = list(problems)
        lines = "\n".join(f"  - {p}" for p in self.problems)
        super().__init__(f"invalid agent plan ({len(self.problems)} problem(s)):\n{lines}")


class DuplicateNameError(PlanError, ValueError):
    """An agent was given a second action, or a second resource of one type, under one name.

    Raised by ``Agent.add_action`` / ``add_resource`` at the call, as Apache Flink Agents
    raises its ``ValueError`` there; a ``PlanError`` too, so code catching plan errors
    still catches it. A name clash between a decorated method and an added one is found
    when the plan is built (a ``PlanError`` listing it).

    Args:
        problem: the sentence naming the name and what to do.
    """

    def __init__(self, problem: str) -> None:
        self.problems = [problem]
        AgentsError.__init__(self, problem)


class ActionError(AgentsError):
    """An action raised; carries the action name and the identity of its execution."""

    def __init__(self, action: str, execution_id: str, cause: BaseException) -> None:
        self.action = action
        self.execution_id = execution_id
        self.cause_type = type(cause).__name__
        super().__init__(f"action {action!r} ({execution_id}) failed: {self.cause_type}: {cause}")


class ResourceNotFoundError(AgentsError, KeyError):
    """No resource of the asked type is registered under the asked name."""

    def __str__(self) -> str:  # KeyError quotes its argument; keep the sentence readable
        return str(self.args[0]) if self.args else "resource not found"


class ResourceError(AgentsError):
    """A resource could not be built from its descriptor, or was declared wrongly."""


class ProviderError(AgentsError):
    """A chat model provider failed.

    Args:
        message: what failed.
        status_code: the provider's HTTP status code when there was one.
        retryable: whether a retry may succeed (timeouts, 408, 429, 5xx); by default, what
            ``status_code`` says (408, 429 and 5xx: yes), as the failure is classified for
            fallbacks (``error_class``): ``error_policy="retry"`` then retries a 5xx raised
            by a connection of one's own, as it does a built-in connection's.
        rate_limit: what the provider's answer said about its limits (a ``RateLimitInfo``:
            ``Retry-After``, the rate-limit headers), when it said anything.
        quota_exhausted: a 429 saying the account's quota is used up (OpenAI's
            ``insufficient_quota``): no throttle to wait out, so neither held by flow
            control nor retried.
    """

    def __init__(self, message: str, *, status_code: int | None = None,
                 retryable: bool | None = None, rate_limit: Any = None,
                 quota_exhausted: bool = False):
        self.status_code = status_code
        if retryable is None:
            retryable = status_code is not None and (status_code in (408, 429)
                                                     or status_code >= 500)
        self.retryable = retryable and not quota_exhausted
        self.rate_limit = rate_limit
        self.quota_exhausted = quota_exhausted
        super().__init__(message if status_code is None else f"{message} (status {status_code})")

    @property
    def retry_after_s(self) -> float | None:
        """How long the provider asked to wait before the next request, in seconds."""
        return getattr(self.rate_limit, "retry_after_s", None)


class NotInActionContextError(AgentsError):
    """A call that needs a running action was made outside one."""


class ChatResponseError(AgentsError):
    """A chat ended in failure; ``reason`` says why."""

    def __init__(self, reason: str) -> None:
        self.reason = reason
        super().__init__(reason)


class DurableExecutionError(AgentsError):
    """A durable call cannot be recorded or replayed (see the message for which call)."""


class ReplayDivergenceError(DurableExecutionError):
    """A replayed action made a different durable call than the one recorded at its place.

    Durable calls are matched to their records by identity (the action execution and the
    call's position in it). Each record keeps what made it: the call's kind (a function, a
    chat, a tool, a sub-agent call...) and its target (the function's qualified name, the
    tool, model or sub-agent name). When a replay reaches a recorded identity with a call of
    another kind or target, the code no longer does what it did before the restore (it was
    changed, or it branches on something that is not recorded): handing the recorded outcome
    to this other call would be a wrong answer, so the action fails with this error instead.
    Arguments-only changes are not divergences (the recorded outcome is replayed, with a
    warning), except when the arguments are those recorded for another call of the same
    function in the execution: the calls came in another order (``detail`` says so). See
    ``docs/concepts/replay-divergence.md``.

    Attributes:
        call_id: the identity of the durable call (``<execution id>/c<ordinal>``).
        action: the name of the action whose execution diverged.
        recorded: ``(kind, target)`` of the recorded call.
        current: ``(kind, target)`` of the call being made now.
        detail: what diverged, when it is not the kind or target (``None`` otherwise).
    """

    def __init__(self, call_id: str, action: str, recorded: tuple[str, str],
                 current: tuple[str, str], detail: str | None = None) -> None:
        self.call_id = call_id
        self.action = action
        self.recorded = recorded
        self.current = current
        self.detail = detail
        what = (f"recorded {recorded[0]} {recorded[1]!r}, now calling {current[0]} "
                f"{current[1]!r}" if detail is None else detail)
        super().__init__(
            f"replay of action {action!r} diverged at durable call {call_id}: {what}; the "
            "recorded outcome is not handed to a different call (keep the order of durable "
            "calls stable; to deploy changed code with runs in flight, guard the changed "
            "calls with ctx.patched('<change-id>') or drain in-flight runs first: see "
            "docs/concepts/replay-divergence.md)")

    def __reduce__(self) -> tuple[Any, ...]:  # picklable, like the other errors
        return (type(self), (self.call_id, self.action, self.recorded, self.current,
                             self.detail))


class SerializationError(DurableExecutionError, TypeError):
    """A value that must be stored (event, memory, durable argument or result) has no JSON form.

    The message names the value's place (``where``) and the offending type. It is a
    ``TypeError`` too, as ``json.dumps`` raises for such a value and as Flink Agents' memory
    refuses one (``except TypeError`` around ``memory.set`` catches it).
    """


class UnsupportedAwaitError(AgentsError, TypeError):
    """An action awaited something the runtime cannot make durable.

    Actions are stepped by the operator, not by an asyncio event loop: await only the futures
    a ``RunnerContext`` returns, and run other asynchronous code through
    ``ctx.durable_execute_async``.
    """


class EventChainLimitError(AgentsError):
    """An action sent an event at the end of a chain of more than ``limit`` actions.

    Each event an action sends triggers actions that may send events again; a chain that
    never ends (an action triggering itself, two actions ping-ponging) would otherwise run
    forever inside one callback, blocking every key of the operator and its checkpoints.
    The sending action fails with this error instead, like a recursion limit. A ReAct chat
    with 50 tool rounds is a chain of about 100 actions. The message is a few lines however
    long the chain: the limit, the key, the chain's last actions and event types, and how
    to raise the limit.

    Args:
        execution_id: the sending action execution (its id shows the chain).
        limit: the longest chain allowed, in actions.
        key: the run's key, when known.
        event_types: the type of the event that triggered the sending action, then of the
            event it was sending, when known.

    Attributes:
        execution_id: the sending action execution.
        limit: the longest chain allowed, in actions (``LIMIT`` by default).
    """

    LIMIT = 1000
    """The longest chain of actions in a run, each triggered by an event the previous sent.

    Read when an action sends an event: set it (``EventChainLimitError.LIMIT = 5000``) in
    the module that defines the agent, so that Flink's Python workers, which import that
    module, set it too."""

    SHOWN = 4
    """How many of the chain's last actions the message names."""

    def __init__(self, execution_id: str, limit: int = LIMIT, *, key: Any = None,
                 event_types: tuple[str, ...] = ()) -> None:
        self.execution_id = execution_id
        self.limit = limit
        self.key = key
        self.event_types = tuple(event_types)
        actions = execution_id.split("/")[1::2]  # run id, action, event id, action, ...
        last = actions[-self.SHOWN:]
        tail = " -> ".join(last)
        more = f"... -> {tail}" if len(actions) > len(last) else tail
        where = f" for key {cut_masked(repr(key), 80)}" if key is not None else ""
        sending = ""
        if len(self.event_types) == 2:
            sending = (f"; {last[-1] if last else 'the action'}, triggered by a "
                       f"{self.event_types[0]}, was sending a {self.event_types[1]}")
        super().__init__(
            f"event chain longer than {limit} actions{where}: the chain's last actions "
            f"{more}{sending}. An action that triggers itself (or actions triggering each "
            f"other) without end? Stop the chain with a condition, or keep a count in "
            f"memory. For a longer chain, raise the limit: EventChainLimitError.LIMIT = "
            f"{limit * 5} in the agent's module")

    def __reduce__(self) -> tuple[Any, ...]:  # picklable, like the other errors
        return (_chain_limit_error, (self.execution_id, self.limit, self.key,
                                     self.event_types))


def _chain_limit_error(execution_id: str, limit: int, key: Any,
                       event_types: tuple[str, ...]) -> EventChainLimitError:
    """Unpickles an ``EventChainLimitError`` (its keyword arguments)."""
    return EventChainLimitError(execution_id, limit, key=key, event_types=event_types)


class CallLimitError(AgentsError):
    """A record's run started more than ``limit`` durable calls (its sub-agents' included).

    One record can start work that multiplies: a model asking for many tool calls, an
    action starting many calls, sub-agents whose runs start calls and sub-agents of their
    own. Every durable call the run tree starts counts (model and tool calls, sub-agent,
    chat and wait calls; replayed ones are not started again and do not count), kept in the
    run's state so a restore goes on counting. The action starting the call past the limit
    fails with this error, as does every later call of the run: the record ends on the error
    output, naming its key and the limit, and the key's next record runs.

    Args:
        limit: the most calls a run starts.
        key: the run's key, when known.
        execution_id: the action execution that started the call past the limit.

    Attributes:
        limit: the most calls a run starts (``LIMIT`` by default).
        key: the run's key.
    """

    LIMIT = 10_000
    """The most durable calls one record's run tree starts.

    Read when a call starts: set it (``CallLimitError.LIMIT = 50_000``) in the module that
    defines the agent, so that Flink's Python workers, which import that module, set it too."""

    def __init__(self, limit: int = LIMIT, key: Any = None, execution_id: str = "") -> None:
        self.limit, self.key, self.execution_id = limit, key, execution_id
        where = f" for key {cut_masked(repr(key), 80)}" if key is not None else ""
        super().__init__(
            f"the run of one input record{where} started more than {limit} durable calls "
            f"(model, tool, sub-agent calls of the run and of its sub-agents' runs; "
            f"{execution_id or 'an action'} was starting one more). A model or an action "
            f"fanning out without end? For larger runs raise the limit: "
            f"CallLimitError.LIMIT = {limit * 5} in the agent's module")

    def __reduce__(self) -> tuple[Any, ...]:  # picklable, like the other errors
        return (CallLimitError, (self.limit, self.key, self.execution_id))


class UnfinishedRunError(AgentsError):
    """A run that could not finish at the end of input, given up with an error record.

    Not raised to the caller: the operator (or the local runner) sends one error row per
    such run to the error output, with the run's key, its input's position (``seq``), the
    actions still in flight, and a message saying what each waits for, then clears the run
    and goes on with the key's next input. A run gets here only when it is busy with nothing
    in flight and nothing delivered: nothing can ever move it on (a broken invariant of the
    runtime, e.g. a call whose outcome never came back). Runs that wait for an outside event
    or a timer are not given up this way: their waits time out at the end of input
    (``WaitTimeoutError``).
    """


class UnreadErrorsError(AgentsError):
    """Records went to the agent's error output and the program never read it.

    Raised by ``execute()`` of a ``flink_agents_py.compat`` environment when the run ends,
    after every other record ran (on the local runner, and on Flink when the job runs on a
    local MiniCluster: a cluster's job is left as built, its error rows in the TaskManagers'
    logs): Apache Flink Agents fails the job at a failed action, so a program written for it
    expects ``execute()`` to fail rather than end quietly without those records' outputs.
    Each such record was also logged at WARNING as it came. A program that reads the error
    output (``errors_datastream()`` on Flink) handles them itself and never gets this error.

    Attributes:
        count: how many error records went unread.
        errors: the first few of them (``ErrorRecord``, or its JSON form from Flink).
    """

    def __init__(self, message: str, count: int = 0, errors: list[Any] | None = None) -> None:
        super().__init__(message)
        self.count = count
        self.errors = list(errors or [])

    def __reduce__(self) -> tuple[Any, ...]:
        return (UnreadErrorsError, (str(self), self.count, self.errors))


class UsageError(AgentsError, TypeError):
    """The API was used in a way that cannot work; the message says what to write instead.

    Raised when an agent is declared (a bare ``@action`` without event types) and when an
    action misuses its context (a plain ``def`` action that leaves ``ctx.chat(...)`` or
    another durable future un-awaited).
    """


class AgentAlreadyAppliedError(UsageError, RuntimeError):
    """A second ``apply`` on one input (a ``RuntimeError`` too, as Apache Flink Agents raises).

    Raised at the second call, by the local runner's job and the Flink builder alike: before,
    the second agent silently replaced the first on the local runner, and added a second
    operator beside the first on Flink. The message names both agents and how to run two.
    """


def already_applied(first: str, second: Any, source: str) -> str:
    """The message of ``AgentAlreadyAppliedError``: both agents, and the two ways on.

    Args:
        first: the applied agent (its plan's ``module:qualname``, or a name).
        second: what the second ``apply`` was given.
        source: the input's method (``from_list``, ``from_datastream``).

    Returns:
        The message.
    """
    shown = first.rpartition(":")[2] or "an agent"
    named = second if isinstance(second, str) else getattr(second, "agent", None)
    other = named.rpartition(":")[2] if isinstance(named, str) and named \
        else type(second).__name__
    chain = ("run() it, then from_list(<its outputs>)" if source == "from_list"
             else "from_datastream(<its to_datastream()>)")
    return (f"apply({other}): this input already has the agent {shown} applied; one agent "
            f"runs on an input (as in Apache Flink Agents), and a second apply would replace "
            f"or duplicate it. Give each agent its own {source}(...).apply(...), or feed the "
            f"first agent's outputs to the second: {chain}.apply({other})")


class SubagentInputError(AgentsError, ValueError):
    """A sub-agent call's input does not follow the sub-agent's declared input schema.

    Raised for a chat model's ``_subagent_<name>`` call before anything is submitted (no
    child run starts with the input); the model gets the message back as the tool call's
    error, so it can correct its arguments. An action's own ``ctx.submit_subagent`` is not
    checked (as in Flink Agents: the schema tells a model what to send). The message names
    the sub-agent, each field (as a JSON path) and what is wrong with it.
    """


class UnkeyedRecordError(AgentsError, ValueError):
    """A dict record with no ``"key"`` field, read with no ``key_selector``.

    Not raised to the caller: the runner sends the record to its error output (an error
    row with ``action="<key_selector>"`` and this message), as any record its key selector
    fails on, and goes on with the next record. The message names the record's fields and
    how to key it.
    """


class MissingApiKeyError(ResourceError, ProviderError):
    """A resource needs an API key that its environment variable does not hold.

    Raised when the operator opens (before the first record), naming the variable and the
    resource, instead of a provider's 401 for every record.

    Args:
        message: what is missing and how to provide it.
        env_var: the environment variable that should hold the key.
        resource: the name of the resource that needs it.
    """

    def __init__(self, message: str, *, env_var: str = "", resource: str = "") -> None:
        self.env_var = env_var
        self.resource = resource
        ProviderError.__init__(self, message)

    def __reduce__(self) -> tuple[Any, ...]:  # picklable (a Flink job may ship it)
        return (_missing_key, (str(self), self.env_var, self.resource))


def _missing_key(message: str, env_var: str, resource: str) -> MissingApiKeyError:
    return MissingApiKeyError(message, env_var=env_var, resource=resource)


def shown_key(key: Any, limit: int = 200) -> str:
    """``repr(key)`` for an error message, cut at ``limit`` characters.

    Returns:
        The text; for a key whose ``repr`` raises, its type and that it failed, so that
        saying what is wrong with the key never fails in turn (the record still reaches the
        error output).
    """
    try:
        text = repr(key)
    except Exception as e:  # noqa: BLE001 - a key whose repr fails is still reported
        return f"<{type(key).__name__}: repr failed: {type(e).__name__}>"
    return text if len(text) <= limit else f"{cut_masked(text, limit)}... ({len(text):,} chars)"


def too_deep(connection: Any, error: RecursionError) -> str:
    """The error of a call whose connection ran out of stack reading the server's answer.

    A body nested deeper than a JSON reader's stack (``[[[[...`` 100,000 levels, within the
    answer size bound) made the SDKs' JSON readers raise ``RecursionError``, which left the
    call (a chat, an embedding) as no provider's error does.

    Returns:
        The message of the ``ProviderError`` (not retryable) raised, naming the connection.
    """
    return (f"{type(connection).__name__} {connection.resource_name!r}: the server's answer "
            f"is nested too deeply for a JSON reader (RecursionError: {str(error)[:200]}): it "
            "was not read")
