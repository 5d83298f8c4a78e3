"""Per-key state of the agent operator, and the interface hosts implement to keep it.

Everything here is plain data with a JSON form, so the Flink host can keep it in keyed state
and a checkpoint captures it. Live objects (coroutines, futures) are never stored: after a
restore they are rebuilt from this data (see ``AgentCore``).
"""

from __future__ import annotations

import copy
import enum
import re
from abc import ABC, abstractmethod
from collections.abc import Mapping
from typing import Any, TypeVar

import msgspec

from ...api import AgentsError

__all__ = ["CallKind", "CallRecord", "InflightAction", "Invocation", "WaitRecord", "RunState",
           "KeyState", "InMemoryKeyState", "StateFormatError", "PARKED_SUFFIX",
           "STATE_FORMAT_VERSION", "SUPPORTED_STATE_FORMATS"]

_R = TypeVar("_R", bound="_Record")


class CallKind(str, enum.Enum):
    """What made a durable call; kept in its record to detect a replay that diverges.

    A replay that reaches a recorded call identity with a call of another kind (or target,
    see ``CallRecord.target``) raises ``ReplayDivergenceError``.
    """

    FUNCTION = "function"
    """``durable_execute``/``durable_execute_async``: target is ``module:qualname``."""
    CHAT = "chat"
    """``ctx.chat``: target is the chat model setup's name."""
    MODEL = "model"
    """One model call of the built-in chat action: target is the chat model setup's name."""
    TOOL = "tool"
    """One tool call of the built-in tool call action: target is the tool's name."""
    SUBAGENT = "subagent"
    """An internal sub-agent call (``submit_subagent``): target is the sub-agent's name."""
    SUBAGENT_DEFERRED = "subagent_deferred"
    """A deferred external sub-agent call: target is the sub-agent's name."""
    SUBAGENT_SUBMIT = "subagent_submit"
    """An async external sub-agent's submit request: target is the sub-agent's name."""
    SUBAGENT_RESULT = "subagent_result"
    """An async external sub-agent's status polling and result fetch: target its name."""
    SUBAGENT_CANCEL = "subagent_cancel"
    """An async external sub-agent's cancel request: target is the sub-agent's name."""
    SUBAGENT_REFUSED = "subagent_refused"
    """A submit refused before any call (unknown name, not a sub-agent, cannot be built)."""
    WAIT = "wait"
    """``ctx.wait_for``: target is the correlation id; the outcome is the outside event's
    payload, or a ``WaitTimeoutError``."""
    SLEEP = "sleep"
    """``ctx.sleep``: target is ``""``; the outcome is ``None`` once the timer fired."""
    APPROVAL = "approval"
    """A tool call held for approval: target is the tool's name; the outcome is the
    answer's payload (``{"approved": ...}``), or a ``WaitTimeoutError``."""
    PATCH = "patch"
    """A versioning marker (``ctx.patched``): target is the change id; kept under the key
    ``patch:<change id>``, not at a call ordinal, with the branch taken as its value."""


class StateFormatError(AgentsError):
    """Stored run state that this version cannot read.

    A format version it does not know (state written by a later version), or data that does
    not fit the format (a field of another type, text that is not JSON: truncated or
    corrupted).

    Attributes:
        found: the format version found in the stored state (``None`` when it is missing
            and the data does not fit version 1 either).
        supported: the format versions this version reads.
        seq: the run's position in its key's sequence, when it could still be read from the
            damaged state (``None`` otherwise); hosts find the key's queue from it.
    """

    def __init__(self, message: str, found: Any = None,
                 supported: tuple[int, ...] = (), seq: int | None = None) -> None:
        super().__init__(message)
        self.found = found
        self.supported = supported
        self.seq = seq

    @property
    def written_later(self) -> bool:
        """Whether the state is of a later format version than this version reads.

        Such state is not damaged: every key of a job restored by an older version has it,
        so hosts fail the whole restore (restore with that version or later) instead of
        dropping runs key by key, as they do for state that is damaged.
        """
        found = self.found
        return (isinstance(found, int) and not isinstance(found, bool)
                and bool(self.supported) and found > max(self.supported))

    def __reduce__(self) -> tuple[Any, ...]:  # picklable, with its attributes
        return (type(self), (str(self), self.found, self.supported, self.seq))


STATE_FORMAT_VERSION = 1
"""The format version ``RunState.to_stored`` writes (field ``"v"``)."""

SUPPORTED_STATE_FORMATS: tuple[int, ...] = (1,)
"""The format versions ``RunState.from_stored`` reads; state without ``"v"`` is version 1."""


class _Record(msgspec.Struct, kw_only=True, repr_omit_defaults=True):
    """Base of the stored records: a msgspec struct (cheap to build on the hot path).

    With the pydantic-style conversions hosts and tests written against earlier versions use.
    """

    def to_builtins(self) -> dict[str, Any]:
        """The record as plain JSON-form data (values are kept as they are, not copied)."""
        raise NotImplementedError

    def model_dump(self, mode: str = "python") -> dict[str, Any]:
        """``to_builtins`` (pydantic's name, kept for existing callers)."""
        return self.to_builtins()

    def model_dump_json(self) -> str:
        """The record as JSON text (pydantic's name, kept for existing callers)."""
        from .._serde import dumps

        return dumps(self.to_builtins(), sort_keys=False).decode()

    def model_copy(self: _R, *, deep: bool = False) -> _R:
        """A copy of the record (``deep``: nested records and values copied too).

        Returns:
            The copy.
        """
        return copy.deepcopy(self) if deep else msgspec.structs.replace(self)

    @classmethod
    def model_validate(cls: type[_R], data: Any) -> _R:
        """Build the record from its JSON-form data (pydantic's name, kept).

        Returns:
            The record.

        Raises:
            StateFormatError: when ``data`` does not fit the record.
        """
        return _convert(data, cls)

    @classmethod
    def model_validate_json(cls: type[_R], text: str | bytes) -> _R:
        """Build the record from JSON text (pydantic's name, kept).

        Returns:
            The record.

        Raises:
            StateFormatError: when the text does not hold the record.
        """
        from .._serde import loads

        return _convert(loads(text), cls)


def _convert(data: Any, cls: type[_R]) -> _R:
    try:
        return msgspec.convert(data, cls)
    except msgspec.ValidationError as e:
        raise StateFormatError(f"stored {cls.__name__} does not fit the state format: {e}",
                               found=data.get("v") if isinstance(data, dict) else None,
                               supported=SUPPORTED_STATE_FORMATS) from e


class CallRecord(_Record, kw_only=True, repr_omit_defaults=True):
    """The record of one durable call of an action execution.

    Attributes:
        digest: digest of the call's function name and arguments (a warning is logged when a
            replay's digest differs; replay still goes by identity).
        kind: what made the call (``None`` in records written before kinds were kept: those
            replay without a divergence check).
        target: the function's ``module:qualname``, or the tool, model or sub-agent name.
        done: whether the outcome is recorded; ``False`` means started, outcome unknown.
        ok: the call returned (``True``) or raised (``False``).
        value: the JSON form of the result.
        error_type: ``module:qualname`` of the raised exception.
        error_message: its message.
        error_args: the exception's ``args`` (when they have a JSON form), so a replay
            rebuilds it as it was raised (``str`` and ``args`` equal), not from its message.
        error_attrs: its JSON-form instance attributes (``status_code``...), restored too.
        traceback: its traceback, bounded and redacted (``runtime._failures``), kept so the
            original file and line survive a restore and reach whoever sees the failure.
        callees: for a function call through a callable whose name does not say what it
            runs (a lambda, a nested function, a decorator's wrapper, a wrapper object), the
            ``module:qualname`` of the functions it calls (``_callees.callees``); a replay
            whose callable calls others diverges. ``None``: not kept (a module-level
            function, a framework call, a record written before callees were kept).
        shape: for a function call, how its argument values bind to the function's
            parameters (``_outcomes.argument_shape``): the same values bound otherwise (two
            arguments swapped) diverge on replay; for a lambda or nested function, what
            its code does too (a third part, ``_outcomes.code_of``). ``None``: not kept.
    A journal keeps a ``_journaled.JournaledCall``: the record and which run attempt made it.
    """

    digest: str
    kind: CallKind | None = None
    target: str | None = None
    done: bool = False
    ok: bool = True
    value: Any = None
    error_type: str | None = None
    error_message: str | None = None
    error_args: list[Any] | None = None
    error_attrs: dict[str, Any] | None = None
    traceback: str | None = None
    callees: list[str] | None = None
    shape: str | None = None

    def to_builtins(self) -> dict[str, Any]:
        """The record as plain JSON-form data (its value is kept as it is, not copied)."""
        return {"digest": self.digest, "kind": self.kind.value if self.kind is not None else None,
                "target": self.target, "done": self.done, "ok": self.ok, "value": self.value,
                "error_type": self.error_type, "error_message": self.error_message,
                "error_args": self.error_args, "error_attrs": self.error_attrs,
                "traceback": self.traceback, "callees": self.callees, "shape": self.shape}

    def to_json(self) -> str:
        """The record as JSON text, however deep its value (journals store records so).

        Returns:
            The JSON text.
        """
        return self.model_dump_json()

    @classmethod
    def from_json(cls, text: str | bytes) -> CallRecord:
        """Rebuild a record from ``to_json`` text (or a pydantic-era ``model_dump_json``).

        Returns:
            The record.

        Raises:
            StateFormatError: when the text does not hold a call record.
        """
        return cls.model_validate_json(text)


class InflightAction(_Record, kw_only=True, repr_omit_defaults=True, omit_defaults=True):
    """An action execution that has started and not completed.

    Attributes:
        action: the action's name in the plan of its scope.
        event: the JSON form of the triggering event.
        scope: the invocation (chat or internal sub-agent call) the action belongs to;
            ``None`` for the agent's own event flow.
        calls: durable call records by ordinal (as a string, for JSON).
        memory_ops: how many short-term and sensory memory operations (reads and writes)
            the execution has made, at most (a re-executed one counts again from 0).
        memory_undo: what undoes the memory writes other actions of its scope committed
            while it was in flight, ``[ops, memory name, path, old value]`` (no old value:
            the path was absent), oldest first: a re-executed action's operation number
            ``n < ops`` came before that write in the first execution, and sees it undone
            (``context._memory.ActionMemory``).
        siblings: the actions its event triggered, when there were several (``None``: only
            this one); a restore starts those the new code adds (``core._siblings``).
        diverged: why its replay diverges, found by a sibling's (the new code runs another
            action's code under its name: ``_order.moved_call``); ``None``: nothing found.
    """

    action: str
    event: dict[str, Any]
    scope: str | None = None
    calls: dict[str, CallRecord] = {}
    memory_ops: int = 0
    memory_undo: list[list[Any]] = []
    siblings: list[str] | None = None
    diverged: str | None = None

    def to_builtins(self) -> dict[str, Any]:
        """The record as plain JSON-form data."""
        data: dict[str, Any] = {
            "action": self.action, "event": self.event, "scope": self.scope,
            "calls": {k: c.to_builtins() for k, c in self.calls.items()}}
        if self.memory_ops:
            data["memory_ops"] = self.memory_ops
        if self.memory_undo:
            data["memory_undo"] = self.memory_undo
        if self.siblings is not None:
            data["siblings"] = self.siblings
        if self.diverged is not None:
            data["diverged"] = self.diverged
        return data


class Invocation(_Record, kw_only=True, repr_omit_defaults=True):
    """An open subgraph call: a chat (``ctx.chat``) or an internal sub-agent call.

    Its id (the key of ``RunState.invocations``) is the caller's durable call id, so two
    callers that look identical still get distinct, replay-stable invocations. Its events
    route privately (see ``AgentCore``); it completes when none of its actions is in flight,
    and its result becomes the caller's durable call outcome.

    Attributes:
        kind: ``CallKind.CHAT`` or ``CallKind.SUBAGENT`` (stored as ``"chat"``, ``"subagent"``).
        name: the chat model setup, or the sub-agent's registered name.
        caller: the calling action execution's id.
        caller_scope: the scope the caller runs in.
        ordinal: the caller's durable call ordinal this invocation answers.
        env: the scope whose resources and memory the invocation's actions use (a chat uses
            its caller's; an internal sub-agent its own, so ``env`` is its own id).
        plan_path: sub-agent names from the root plan to the plan of ``env``.
        outputs: collected results (``ChatResponseEvent`` JSON, or ``OutputEvent`` outputs).
        failed: why the invocation failed (an action of it raised), once it has.
        failed_traceback: the failing action's traceback (bounded, redacted).
        cancelled: the caller cancelled it.
        memory: the sub-agent's short-term memory, isolated to this call.
        sensory: the sub-agent's sensory memory, isolated to this call.
    """

    kind: CallKind
    name: str
    caller: str
    caller_scope: str | None = None
    ordinal: int
    env: str | None = None
    plan_path: list[str] = []
    outputs: list[Any] = []
    failed: str | None = None
    failed_traceback: str | None = None
    cancelled: bool = False
    memory: dict[str, Any] = {}
    sensory: dict[str, Any] = {}

    def to_builtins(self) -> dict[str, Any]:
        """The record as plain JSON-form data."""
        return {"kind": self.kind.value, "name": self.name, "caller": self.caller,
                "caller_scope": self.caller_scope, "ordinal": self.ordinal, "env": self.env,
                "plan_path": self.plan_path, "outputs": self.outputs, "failed": self.failed,
                "failed_traceback": self.failed_traceback, "cancelled": self.cancelled,
                "memory": self.memory, "sensory": self.sensory}


class WaitRecord(_Record, kw_only=True, repr_omit_defaults=True):
    """An open (or closed) wait of a run: a ``wait_for``, a ``sleep`` or a held tool call.

    Kept in ``RunState.waits`` by correlation id (a sleep's is ``#sleep/<call id>``) until
    the run completes, so an event that comes again, or late, is told from an unknown one.

    Attributes:
        call_id: the waiting durable call's id (``<execution id>/c<ordinal>``).
        caller: the waiting action execution's id.
        ordinal: the call's ordinal in that execution.
        deadline_ms: when it times out (a sleep: ends), in the host clock's milliseconds
            (processing time on Flink); ``None``: never.
        timeout_s: the timeout (a sleep's length) it was opened with, in seconds.
        status: ``"open"``, ``"delivered"``, ``"timed_out"`` or ``"cancelled"`` (its
            sub-agent call was cancelled); ``"early"``: not a wait but
            an outside event that arrived before its wait opened, held for it (``call_id``
            empty, ``caller`` where it arrived, ``deadline_ms`` when it is given up);
            ``"polling"``: not a wait but the deadline of an async sub-agent's
            ``timeout_s`` (``#poll/<call id>``, wall-clock ms), kept across restores.
        payload: an ``"early"`` event's payload (``None`` otherwise).
    """

    call_id: str
    caller: str
    ordinal: int
    deadline_ms: int | None = None
    timeout_s: float | None = None
    status: str = "open"
    payload: Any = None

    def to_builtins(self) -> dict[str, Any]:
        """The record as plain JSON-form data."""
        return {"call_id": self.call_id, "caller": self.caller, "ordinal": self.ordinal,
                "deadline_ms": self.deadline_ms, "timeout_s": self.timeout_s,
                "status": self.status, "payload": self.payload}


class RunState(_Record, kw_only=True, repr_omit_defaults=True):
    """The in-flight run of one key: the processing of one input record.

    Hosts store it with ``to_stored`` and read it back with ``from_stored``, the one place
    the stored format (and its version) is decoded.

    Attributes:
        seq: the input's position in its key's sequence (0-based).
        input: the input record (kept for error records and re-entry).
        inflight: started, uncompleted action executions by execution id, in start order.
        invocations: open chat and sub-agent calls by id.
        sensory: the run's sensory memory.
        waits: the run's waits by correlation id (``ctx.wait_for``, ``ctx.sleep``, tool
            calls held for approval), open and closed.
        siblings_kept: its records say which actions their events triggered
            (``InflightAction.siblings``; a run stored by an earlier version does not).
        ltm_done: the ``exec_tag`` of each finished action execution of the run that used
            long-term memory: a read sees the run's own writes only from these (and its
            own earlier ones), not from an execution that ended after the checkpoint this
            run was restored from (``None``: stored by an earlier version, which did not
            keep them).
        source: where its input was read, when its source says so (``from_kafka``: ``"topic T
            partition P offset O"``), for its error records; ``None`` otherwise.
        calls_started: how many durable calls its run tree started (``CallLimitError``).
        parked: every action in flight waits for an outside event or a timer, and no call
            runs: the host keeps nothing of the run in memory (last field, so a host can
            tell a parked run from its stored text's end without parsing it).
    """

    seq: int
    input: Any = None
    inflight: dict[str, InflightAction] = {}
    invocations: dict[str, Invocation] = {}
    sensory: dict[str, Any] = {}
    waits: dict[str, WaitRecord] = {}
    siblings_kept: bool = False
    ltm_done: list[str] | None = None
    source: str | None = None
    calls_started: int = 0
    parked: bool = False

    def to_builtins(self) -> dict[str, Any]:
        """The run as plain JSON-form data (without the format version)."""
        return {"seq": self.seq, "input": self.input,
                "inflight": {k: a.to_builtins() for k, a in self.inflight.items()},
                "invocations": {k: i.to_builtins() for k, i in self.invocations.items()},
                "sensory": self.sensory,
                "waits": {k: w.to_builtins() for k, w in self.waits.items()},
                "siblings_kept": self.siblings_kept, "ltm_done": self.ltm_done,
                "source": self.source, "calls_started": self.calls_started,
                "parked": self.parked}

    def to_stored(self) -> str:
        """The run as the JSON text a host keeps in keyed state (format ``"v"`` included).

        Returns:
            JSON text that ``from_stored`` reads back.
        """
        try:  # the records' fields in declaration order, as ``to_builtins`` lists them
            raw = _ENCODER.encode(self)
        except Exception:  # noqa: BLE001 - e.g. nested deeper than the encoder goes
            from .._serde import dumps

            data = self.to_builtins()
            data["v"] = STATE_FORMAT_VERSION
            return dumps(data, sort_keys=False).decode()
        return raw[:-1].decode() + _VERSION_MEMBER

    @classmethod
    def from_stored(cls, raw: str | bytes | Mapping[str, Any]) -> RunState:
        """Decode a run a host stored: ``to_stored`` text, or that text already parsed.

        Args:
            raw: JSON text or bytes, or the parsed JSON object. A missing ``"v"`` means
                format 1 (state written before formats were versioned).

        Returns:
            The run.

        Raises:
            StateFormatError: naming the version found and the versions supported, when the
                state was written in a format this version does not know (by a later one),
                or when the data does not fit its format.
        """
        from .._serde import loads

        if isinstance(raw, (str, bytes, bytearray)):
            try:
                data = loads(raw)
            except ValueError as e:  # (msgspec's and json's decode errors are ValueErrors)
                raise StateFormatError(
                    f"stored run state is not JSON text (truncated or corrupted, "
                    f"{len(raw):,} chars): {e}", supported=SUPPORTED_STATE_FORMATS,
                    seq=_salvaged_seq(raw)) from e
        else:
            data = raw
        if not isinstance(data, Mapping):
            raise StateFormatError(
                f"stored run state is a {type(data).__name__}, not a JSON object",
                supported=SUPPORTED_STATE_FORMATS)
        version = data.get("v", 1)
        if version not in SUPPORTED_STATE_FORMATS or isinstance(version, bool):
            raise StateFormatError(
                f"stored run state has format version {version!r}, which this version of "
                f"flink-agents-py cannot read (it reads versions "
                f"{', '.join(map(str, SUPPORTED_STATE_FORMATS))}); the state was written by a "
                "later version: restore it with that version or later",
                found=version, supported=SUPPORTED_STATE_FORMATS, seq=_salvaged_seq(data))
        try:
            return _convert(data, cls)
        except StateFormatError as e:
            e.seq = _salvaged_seq(data)
            raise


_SEQ_AT_START = re.compile(rb'\A\s*\{\s*"seq"\s*:\s*(\d{1,18})[\s,}]')


def _salvaged_seq(stored: Any) -> int | None:
    """The ``seq`` of damaged stored run state, when it can still be read (else ``None``)."""
    if isinstance(stored, Mapping):
        seq = stored.get("seq")
        return seq if isinstance(seq, int) and not isinstance(seq, bool) and seq >= 0 else None
    if isinstance(stored, str):
        stored = stored.encode("utf-8", "surrogatepass")
    found = _SEQ_AT_START.match(bytes(stored)) if isinstance(stored, (bytes, bytearray)) \
        else None
    return int(found.group(1)) if found else None


_ENCODER = msgspec.json.Encoder()
_VERSION_MEMBER = f',"v":{STATE_FORMAT_VERSION}}}'
PARKED_SUFFIX = f'"parked":true{_VERSION_MEMBER}'
"""How the stored text of a parked run ends (see ``RunState.parked``)."""
"""What ``to_stored`` appends to the run's JSON object: the format version, last."""


class KeyState(ABC):
    """What the core needs of one key's state; each host implements it.

    A ``KeyState`` is valid only during the host callback it was made for (Flink's keyed
    state is scoped to the current key). The core mutates ``run`` and ``memory`` in place and
    calls ``flush`` before returning, so a host may write back once per callback.
    """

    @property
    @abstractmethod
    def run(self) -> RunState | None:
        """The in-flight run, or ``None`` when the key is idle."""

    @run.setter
    @abstractmethod
    def run(self, value: RunState | None) -> None: ...

    @property
    @abstractmethod
    def memory(self) -> dict[str, Any]:
        """The key's short-term memory (a JSON tree)."""

    @memory.setter
    @abstractmethod
    def memory(self, value: dict[str, Any]) -> None: ...

    @abstractmethod
    def push_input(self, record: Any, source: str | None = None) -> None:
        """Queue an input record behind the ones already queued for this key.

        ``source`` is where it was read (``RunState.source``): a host that keeps it gives it
        back in ``popped_source`` when the record is popped.
        """

    popped_source: str | None = None
    """Where the record the last ``pop_input`` gave was read (``None``: not kept)."""

    @abstractmethod
    def pop_input(self) -> tuple[int, Any] | None:
        """Dequeue the oldest queued record as ``(seq, record)``; ``None`` when none."""

    @abstractmethod
    def queued(self) -> int:
        """How many records are queued (not counting the in-flight run's)."""

    def flush(self) -> None:  # noqa: B027 - optional hook
        """Write back what changed (the Flink host does; in-memory state needs nothing)."""


class InMemoryKeyState(KeyState):
    """Key state in plain Python objects (the local runner's and the tests').

    ``run`` and ``memory`` are plain attributes here (no property call on the hot path).
    """

    run: RunState | None = None  # shadows the abstract property
    memory: dict[str, Any] = {}  # shadows it too (each instance sets its own)

    def __init__(self) -> None:
        self.run = None
        self.memory = {}
        self._queue: list[Any] = []
        self._head = self._next_seq = 0

    def push_input(self, record: Any, source: str | None = None) -> None:
        self._queue.append(record)

    def pop_input(self) -> tuple[int, Any] | None:
        queue, head, n = self._queue, self._head, len(self._queue)
        if head >= n:
            return None
        record, queue[head] = queue[head], None
        self._head = head = head + 1
        if head == n or head > 1024 and head * 2 > n:  # drop the popped slots: a key gone
            del queue[:head]  # idle keeps none (only ``_next_seq``)
            self._head = 0
        self._next_seq += 1
        return self._next_seq - 1, record

    def queued(self) -> int:
        return len(self._queue) - self._head
