"""Validate a document's data with ``DocumentSpec``; report each pydantic error at its line.

Pydantic reports every error of a document at once, each with a location (``loc``). A
location names a place of the data, except for the tags of discriminated unions
(``("subagents", 0, "internal", "colour")``), which ``_walk`` removes by following the
models along the location. Each error is reported once, in words of the document (``an
action entry needs 'function'``, ``unknown key 'x' in an agent entry; allowed keys: ...``),
at the line of its place (a missing key: the line of its entry; an unknown key: its own).

So that the checks after the models (imports, classes, references) still see every entry
that is sound, the culprit is then pruned from the data and the data validated again, until
it is valid: an unknown key is removed, a bad optional value removed (the default applies),
a bad or missing ``name`` replaced by a placeholder (``<agents[1]>``; the entry is checked,
not kept), and any other bad entry dropped, with its name remembered so references to it are
not reported as unknown. Only the first round's errors are reported: later ones follow from
the pruning.
"""

from __future__ import annotations

import types
from dataclasses import dataclass, field
from typing import Annotated, Any, Union, get_args, get_origin

from pydantic import BaseModel, Discriminator, Tag, ValidationError

from ._errors import Loc, loc_path, quoted, unknown_key
from ._nodes import Parsed, Report, Tracked, describe, original_loc
from ._specs import DocumentSpec, field_keys

__all__ = ["Validated", "validate_document"]

_MAX_ROUNDS = 8


@dataclass
class Validated:
    """A valid (possibly pruned) document.

    Attributes:
        spec: the document's models; list indexes are those of the pruned data.
        dropped: names of the entries dropped, by their list's location in the file.
    """

    spec: DocumentSpec
    dropped: dict[Loc, set[str]] = field(default_factory=dict)


@dataclass
class _Step:
    """Where an error is: ``loc`` without union tags, the innermost model and its field."""

    loc: Loc
    model: type[BaseModel] | None  # None: an entry of a union that has no tag
    entry: int  # loc[:entry] is the model's entry
    field: str | None  # the model's field the error is in, None: the entry itself
    what: str


def validate_document(parsed: Parsed, report: Report) -> Validated | None:
    """Validate ``parsed.data``, reporting every problem; ``None`` when nothing is left.

    Args:
        parsed: the document's data (pruned in place).
        report: receives the problems.

    Returns:
        The valid remainder, or ``None`` when the document itself is unusable.
    """
    data = parsed.data
    dropped: dict[Loc, set[str]] = {}
    for round_ in range(_MAX_ROUNDS):
        try:
            spec = DocumentSpec.model_validate(data)
        except ValidationError as err:
            steps = [(_walk(tuple(e["loc"])), e) for e in err.errors()]
            if round_ == 0:
                for step, e in steps:
                    _report(step, e, data, parsed, report)
            if not _prune(data, steps, dropped):
                return None
            continue
        return Validated(spec, dropped)
    return None


# --------------------------------------------------------------------------- locations


def _walk(loc: Loc) -> _Step:
    """Follow ``loc`` through the models: drop union tags, find the innermost entry."""
    t: Any = DocumentSpec
    clean: list[str | int] = []
    model: type[BaseModel] | None = DocumentSpec
    entry, fld = 0, None
    parts = list(loc)
    while parts:
        t = _unwrap(t)
        part = parts.pop(0)
        if isinstance(t, dict):  # a discriminated union: ``part`` is the tag
            t = t.get(part, Any)
            continue
        if isinstance(t, type) and issubclass(t, BaseModel):
            model, entry, fld = t, len(clean), None
            for name, info in t.model_fields.items():
                if part in field_keys(name, info):
                    fld, t = name, info.annotation
                    break
            else:
                fld, t = str(part), Any
        elif get_origin(t) in (tuple, list) and isinstance(part, int):
            t = get_args(t)[0]
        else:
            t = Any
        clean.append(part)
    t = _unwrap(t)
    if isinstance(t, dict):
        model, entry, fld = None, len(clean), None
    elif isinstance(t, type) and issubclass(t, BaseModel):
        model, entry, fld = t, len(clean), None
    what = getattr(model, "WHAT", "an entry") if model is not None else "a sub-agent entry"
    return _Step(tuple(clean), model, entry, fld, what)


def _unwrap(t: Any) -> Any:
    """Strip ``Annotated`` and ``| None``; a discriminated union becomes ``{tag: model}``."""
    while True:
        origin = get_origin(t)
        if origin is Annotated:
            inner, *meta = get_args(t)
            if any(isinstance(m, Discriminator) for m in meta):
                return {m.tag: get_args(a)[0] for a in get_args(inner)
                        for m in get_args(a)[1:] if isinstance(m, Tag)}
            t = inner
        elif origin in (Union, types.UnionType):
            members = [a for a in get_args(t) if a is not type(None)]
            if len(members) != 1:
                return t
            t = members[0]
        else:
            return t


# --------------------------------------------------------------------------- messages


def _report(step: _Step, e: Any, data: Any, parsed: Parsed, report: Report) -> None:
    where = original_loc(data, step.loc)
    if any(where[: len(u)] == u for u in parsed.unreadable):
        return  # its value could not be read: reported already
    kind, got = e["type"], e.get("input")
    if kind == "missing" and step.model is not None:
        key = step.loc[-1]
        report.add(step.loc[: step.entry], f"{step.what} needs {quoted(key)}")
    elif kind == "extra_forbidden" and step.model is not None:
        names = [info.alias or name for name, info in step.model.model_fields.items()]
        report.add(step.loc, f"{unknown_key(step.loc[-1], names)} in {step.what}; allowed keys: "
                             f"{', '.join(names)}", at_key=True)
    elif step.field is None and kind in ("model_type", "model_attributes_type", "dict_type"):
        report.add(step.loc, f"{step.what} must be a mapping, got {describe(got)}")
    elif kind == "invalid_key":
        report.add(step.loc[:-1], f"a key must be a name, got {describe(step.loc[-1])}",
                   line=report.index.line(where, at_key=True))
    elif kind in ("tuple_type", "list_type"):
        report.add(step.loc, f"must be a list, got {describe(got)}")
    else:
        report.add(step.loc, e["msg"])


# --------------------------------------------------------------------------- pruning


def _prune(data: Any, steps: list[tuple[_Step, Any]], dropped: dict[Loc, set[str]]) -> bool:
    """Remove each error's culprit from ``data``; ``False`` when the document itself goes."""
    renames: dict[Loc, str] = {}
    removals: dict[Loc, None] = {}
    drops: dict[Loc, None] = {}
    for step, e in steps:
        entry = step.loc[: step.entry]
        model = step.model
        if e["type"] == "extra_forbidden":
            removals[step.loc] = None
        elif model is not None and step.field == "name" and "name" in model.model_fields \
                and entry:
            renames[entry] = f"<{loc_path(original_loc(data, entry))}>"
        elif model is not None and step.field in model.model_fields \
                and not model.model_fields[step.field].is_required():
            removals[step.loc[: step.entry + 1]] = None
        else:
            if not entry:
                return False
            drops[entry] = None
    # Resolve every target before changing anything: dropping shifts later indexes.
    targets = [(_get(data, entry), placeholder) for entry, placeholder in renames.items()]
    parents = [(_get(data, loc[:-1]), loc[-1]) for loc in removals]
    victims: dict[int, tuple[Tracked, set[int]]] = {}
    for entry in drops:
        parent, index = _get(data, entry[:-1]), entry[-1]
        if isinstance(parent, Tracked) and isinstance(index, int) and index < len(parent):
            item = parent[index]
            if isinstance(item, dict) and isinstance(item.get("name"), str):
                dropped.setdefault(original_loc(data, entry[:-1]), set()).add(item["name"])
            victims.setdefault(id(parent), (parent, set()))[1].add(index)
        elif isinstance(parent, dict):
            parents.append((parent, index))
    for target, placeholder in targets:
        if isinstance(target, dict):
            target["name"] = placeholder
    for parent, key in parents:
        if isinstance(parent, dict):
            parent.pop(key, None)
    for parent, indexes in victims.values():
        for index in sorted(indexes, reverse=True):
            parent.drop(index)
    return True


def _get(data: Any, loc: Loc) -> Any:
    for part in loc:
        if isinstance(data, dict):
            data = data.get(part)
        elif isinstance(data, list) and isinstance(part, int) and 0 <= part < len(data):
            data = data[part]
        else:
            return None
    return data
