"""Replay's order checks: a call handed the outcome recorded for another call diverges.

A replay answers a call from the record at its identity (its execution and position). When
the call's arguments are not those recorded there, they may have changed harmlessly, or the
call is another one, made out of place: these say when it is another recorded call's.

- ``reordered_call``: the arguments of another call of the same execution (calls made in
  another order);
- ``reordered_by_nested``: the same digest, with the nested objects' state recorded for a
  later call (``_identity.bound_and_nested``);
- ``retyped``: the same digest, with tuples where another call of the execution had
  them recorded (``_binding.sequence_kinds``: ``f((1, 2))`` and ``f([1, 2])``);
- ``moved_call``: the arguments of a call of a sibling execution, triggered by the same
  event (two actions' names swapped);
- ``_displaced_call``: the arguments recorded at an earlier position whose outcome the
  replay handed to a call of other arguments (``_note_displaced``): a call added before a
  recorded one, or calls in another order whose first out of place was never recorded.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ...api import ReplayDivergenceError
from ._binding import code_changed, sequence_kinds, shape_parts
from ._state import CallRecord, InflightAction

__all__ = ["check_displaced", "moved_call", "reordered_by_nested", "reordered_call",
           "replayed_elsewhere", "retyped"]


def reordered_call(call: Any, rec: CallRecord, calls: Mapping[str, CallRecord],
                   execution_id: str, action: str) -> ReplayDivergenceError | None:
    """The divergence of handing ``rec``'s outcome to ``call`` when their arguments differ.

    Other arguments alone replay (with a warning: they may have changed harmlessly); but
    when ``call`` has the arguments recorded for another call of the same kind and target in
    the execution, the calls came in another order, and the outcome is that other call's.

    Args:
        call: the call being made (``DurableCall``: ``call_id``, ``ordinal``, ``digest``,
            ``kind``, ``target``).
        rec: the record at its identity (another digest).
        calls: the execution's records, by ordinal.
        execution_id: the execution's identity.
        action: its action's name.

    Returns:
        The error to fail the action with, or ``None``.
    """
    for ordinal, other in calls.items():
        if other is not rec and other.digest == call.digest and other.kind is rec.kind \
                and other.target == rec.target and ordinal != str(call.ordinal) \
                and not code_changed(other.shape, call.shape) \
                and not _lagging(call, rec, other, ordinal):
            return _reordered(call, rec, f"{execution_id}/c{ordinal}", action)
    return None


def _lagging(call: Any, rec: CallRecord, earlier: CallRecord, ordinal: str) -> bool:
    """Whether ``call`` matching the record of an earlier call is its callable's state lagging.

    A bound method whose calls change its object (a client that logs in on its first call
    and keeps the token) makes, live, a first call with no token and later ones with it; a
    replay does not run the recorded calls, so each of them has the state of the first.
    When the passed arguments of the call, of its own record and of the earlier record are
    the same, they differ only in the callable's state: not a reordering (in the first call
    out of place of a reordering, the state is a later call's).

    Returns:
        Whether it is (records written before the passed arguments were kept never are).
    """
    passed = shape_parts(call.shape)[4]
    return ordinal.isdigit() and int(ordinal) < call.ordinal and bool(passed) \
        and passed == shape_parts(rec.shape)[4] == shape_parts(earlier.shape)[4]


def reordered_by_nested(call: Any, rec: CallRecord, calls: Mapping[str, CallRecord],
                        execution_id: str, action: str) -> ReplayDivergenceError | None:
    """The divergence of a call whose nested objects' state is a later recorded call's.

    The digest counts an object of the user's class inside a bound object by its type only
    (``_identity.bound_and_nested``): ``Shop(Item("apple")).get`` and
    ``Shop(Item("pear")).get`` have one digest, their shapes' last parts differ. Made in
    another order, the first call out of place has the state recorded for a later call of
    the same digest, and for no earlier one. The state of an object that calls change as
    they use it lags on a replay (the replayed calls do not run) behind the live run's: a
    state recorded for an earlier call too (a flag a call set and a later one cleared) is
    not taken for a reordering.

    Args:
        call: the call being made (same digest as ``rec``).
        rec: the record at its identity.
        calls: the execution's records, by ordinal.
        execution_id: the execution's identity.
        action: its action's name.

    Returns:
        The error to fail the action with, or ``None``.
    """
    now, was = shape_parts(call.shape)[3], shape_parts(rec.shape)[3]
    if not now or not was or now == was:
        return None
    later = ""
    for ordinal, other in calls.items():
        if ordinal.isdigit() and other.digest == call.digest and other.kind is rec.kind \
                and other.target == rec.target and shape_parts(other.shape)[3] == now:
            if int(ordinal) <= call.ordinal:
                return None  # an earlier call's state: a lagging one, or a repeated call
            later = later or ordinal
    return _reordered(call, rec, f"{execution_id}/c{later}", action) if later else None


def retyped(call: Any, rec: CallRecord, calls: Mapping[str, CallRecord],
                 execution_id: str, action: str) -> tuple[ReplayDivergenceError | None,
                                                          str | None]:
    """Whether ``call``, of ``rec``'s digest, has tuples and lists where ``rec`` had others.

    A tuple's JSON form is a list, so ``price((1, 2))`` and ``price([1, 2])`` have one
    digest (and so do ``partial(price, (1, 2))`` and ``partial(price, [1, 2])``); the
    argument shape keeps which was which (``_binding.sequence_kinds``). When
    another call of the same kind and target in the execution was recorded with the call's
    tuples and lists, the calls came in another order. When only what the callable binds
    differs, only a later call's record counts, and no other change is told (as
    ``reordered_by_nested``: an object's state, as calls change it, lags on a replay, whose
    recorded calls do not run). A record that did not keep them (an earlier version's) is
    not compared.

    Args:
        call: the call being made (the same digest as ``rec``).
        rec: the record at its identity.
        calls: the execution's records, by ordinal.
        execution_id: the execution's identity.
        action: its action's name.

    Returns:
        The divergence (calls in another order), else ``None``; and, when they differ but
        no other call was recorded with the call's, the text saying how (for the
        ``arguments changed`` warning), else ``None``.
    """
    was, now = sequence_kinds(rec.shape), sequence_kinds(call.shape)
    if not was or not now or was == now:
        return None, None
    passed = was.partition("|")[0] != now.partition("|")[0]
    for ordinal, other in calls.items():
        if other is not rec and other.digest == call.digest and other.kind is rec.kind \
                and other.target == rec.target and ordinal != str(call.ordinal) \
                and sequence_kinds(other.shape) == now \
                and (passed or ordinal.isdigit() and int(ordinal) > call.ordinal):
            return _reordered(call, rec, f"{execution_id}/c{ordinal}", action), None
    return None, _kinds_text(was, now) if passed else None


def _kinds_text(was: str, now: str) -> str:
    """Where the first tuple or list differs, for the ``arguments changed`` warning."""
    for place, old, new in zip(("the arguments", "what the callable binds"), was.split("|"),
                               now.split("|"), strict=False):
        at = next((i for i, (a, b) in enumerate(zip(old, new, strict=False)) if a != b), None)
        if at is not None and "#" not in old + new:  # (a long one is kept as its digest)
            names = {"T": "a tuple", "L": "a list", "Y": "bytes", "A": "a bytearray"}
            return (f"the arguments recorded in their JSON form, but {names[new[at]]} where "
                    f"{names[old[at]]} was recorded (the sequence {at + 1} of {len(new)} in "
                    f"{place})")
    return "the arguments recorded in their JSON form, but other tuples and lists, or bytes"


def moved_call(call: Any, rec: CallRecord, inflight: Mapping[str, InflightAction],
               execution_id: str) -> ReplayDivergenceError | None:
    """The divergence of a call whose arguments are those recorded by a sibling execution.

    Two actions triggered by one event, both in flight at the checkpoint, whose code the new
    version swapped between their names (or one renamed to the other's name) make, under
    each name, the other's calls: their arguments are those the other execution recorded,
    and its outcome is another call's. Only a call whose arguments changed is looked at.

    The other execution is marked (``InflightAction.diverged``): its replay fails too, even
    once this one's failure has dropped the records it would be compared with.

    Args:
        call: the call being made (another digest than ``rec``).
        rec: the record at its identity.
        inflight: the run's in-flight executions (``RunState.inflight``).
        execution_id: the call's execution.

    Returns:
        The error to fail the action with, or ``None``.
    """
    mine = inflight.get(execution_id)
    if mine is None:
        return None
    for other_id, other in inflight.items():
        if other_id == execution_id or other.scope != mine.scope or other.event != mine.event:
            continue
        for ordinal, done in other.calls.items():
            if done.digest == call.digest and done.kind is rec.kind \
                    and done.target == rec.target and not code_changed(done.shape, call.shape):
                other.diverged = (f"the new code made {call.call_id}, a call of action "
                                  f"{mine.action!r}, with the arguments recorded for "
                                  f"{other_id}/c{ordinal}: {_MOVED}")
                return ReplayDivergenceError(
                    call.call_id, mine.action, (rec.kind.value if rec.kind else "",
                                                rec.target or ""),
                    (call.kind.value, call.target),
                    detail=f"its arguments are those recorded for {other_id}/c{ordinal}, a "
                           f"call of action {other.action!r}, triggered by the same event: "
                           f"{_MOVED}")
    return None


_MOVED = ("the new code runs another action's code under this action's name (two actions' "
          "names swapped, or one renamed to another's); drain in-flight runs before such a "
          "change")


def _reordered(call: Any, rec: CallRecord, other: str, action: str) -> ReplayDivergenceError:
    return ReplayDivergenceError(
        call.call_id, action, (rec.kind.value if rec.kind else "", rec.target or ""),
        (call.kind.value, call.target),
        detail=f"its arguments are those recorded for {other}: the action makes its durable "
               "calls in another order than when they were recorded (e.g. it iterates over a "
               "set, whose order can change between processes); make the order deterministic "
               "(sorted(...))")


def _note_displaced(displaced: dict[str, str] | None, call: Any, rec: CallRecord,
                   calls: Mapping[str, CallRecord]) -> dict[str, str] | None:
    """Remember that ``rec``'s outcome goes to ``call``, whose arguments no record has.

    Such a call replays its position's record with the ``arguments changed`` warning: its
    arguments may have changed harmlessly. When a later call of the execution then has the
    arguments recorded there, that record was this later call's (``_displaced_call``). A
    call whose arguments another record has is not noted: those are the lagging state of
    its callable (``_lagging``), or a reordering already refused.

    Args:
        displaced: the execution's noted records, by digest (``None``: none yet).
        call: the call being replayed (another digest than ``rec``).
        rec: the record at its position.
        calls: the execution's records, by ordinal.

    Returns:
        ``displaced``, with ``rec`` noted when it is.
    """
    if not rec.digest or any(other.digest == call.digest for other in calls.values()):
        return displaced
    displaced = displaced if displaced is not None else {}
    displaced.setdefault(rec.digest, str(call.ordinal))
    return displaced


def _displaced_call(call: Any, displaced: dict[str, str], calls: Mapping[str, CallRecord],
                   execution_id: str, action: str) -> ReplayDivergenceError | None:
    """The divergence of a call whose recorded outcome a replay gave to another call.

    A replay hands a call the record at its position; when its arguments match no record,
    that is taken for a harmless change (``_note_displaced``). A later call with the
    arguments recorded there shows it was not: a call was added before the recorded one
    (``f("new")`` inserted before ``f("old")``), or the calls came in another order, and the
    earlier call got this one's outcome. The action fails rather than go on with it.

    Args:
        call: the call being made (at a position with another record, or with none).
        displaced: the execution's noted records, by digest.
        calls: the execution's records, by ordinal.
        execution_id: the execution's identity.
        action: its action's name.

    Returns:
        The error to fail the action with, or ``None``.
    """
    ordinal = displaced.get(call.digest)
    rec = calls.get(ordinal) if ordinal is not None else None
    if rec is None or rec.kind is not call.kind or rec.target != call.target \
            or code_changed(rec.shape, call.shape) or ordinal == str(call.ordinal):
        return None
    kind = rec.kind.value if rec.kind else ""
    return ReplayDivergenceError(
        call.call_id, action, (kind, rec.target or ""), (kind, call.target),
        detail=f"its arguments are those recorded for {execution_id}/c{ordinal}, whose "
               f"recorded outcome the replay already handed to {execution_id}/c{ordinal} "
               "made with other arguments: a call was added before the recorded one, or the "
               "calls come in another order, and that call got this one's outcome; branch "
               "with ctx.patched(...) to add a call for new runs only, and make the order "
               "deterministic (sorted(...))")


def check_displaced(ctx: Any, call: Any) -> None:
    """Fail ``ctx``'s execution when ``call``, made past its records, is a displaced one.

    ``_displaced_call`` for a call the execution has no record for at its position (the
    recorded calls were all handed out, one of them to a call of other arguments).

    Args:
        ctx: the action's execution (``ActionExecution``; it has noted displaced records).
        call: the call being made.

    Raises:
        ReplayDivergenceError: as ``_displaced_call`` says.
    """
    record = ctx._record
    err = _displaced_call(call, ctx.displaced, record.calls, ctx.execution_id, record.action)
    if err is not None:
        ctx._diverge(err)


def replayed_elsewhere(ctx: Any, call: Any, rec: CallRecord, reruns: bool
                       ) -> ReplayDivergenceError | None:
    """Check a call replayed with another digest than its record's; note it when it is new.

    Args:
        ctx: the action's execution (``ActionExecution``).
        call: the call being made, at ``rec``'s position.
        rec: the record there (another digest).
        reruns: ``rec`` holds no outcome and the call runs again (nothing is handed over).

    Returns:
        The error to fail the action with when ``call`` has the arguments of a record
        handed to an earlier call (``_displaced_call``), or ``None``.
    """
    record = ctx._record
    if ctx.displaced:
        err = _displaced_call(call, ctx.displaced, record.calls, ctx.execution_id,
                              record.action)
        if err is not None:
            return err
    if not reruns:
        ctx.displaced = _note_displaced(ctx.displaced, call, rec, record.calls)
    return None
