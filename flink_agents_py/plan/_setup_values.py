"""Plan-build check of a chat model setup's argument values, as the YAML loader checks them.

``ResourceDescriptor(ChatModelSetup, connection=..., budget=dict(max_token=10))`` passed
the plan (the argument names were right) and failed every record with pydantic's long
error when the setup was built. The plan now validates a setup's arguments as its class
(its ``budget``, ``fallbacks``, ``error_policy``...) and a connection's ``flow_control``
alone (a connection is not built on the client: it may read API keys), naming the
resource, the field and, for a misspelt key, the name it likely meant.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ValidationError

from ..api import ChatModelSetup, FlowControl, ResourceError, ResourceType
from ..api.internal import cut_masked, described, import_qualified, unknown_key_message

__all__ = ["check_setup_values"]


def check_setup_values(resources: Mapping[ResourceType, Mapping[str, Any]],
                       problems: list[str]) -> None:
    """Add a problem for each invalid value of a chat model setup or a connection's flow.

    Only resources declared by a descriptor are checked (a declared instance was validated
    when it was built).

    Args:
        resources: the agent's compiled resources (``ResourcePlan`` by type and name).
        problems: where each problem is added.
    """
    for rtype, what in ((ResourceType.CHAT_MODEL, "chat_model"),
                        (ResourceType.CHAT_MODEL_CONNECTION, "chat_model_connection")):
        for name, rp in resources.get(rtype, {}).items():
            if rp._instance is not None:
                continue
            try:
                cls = import_qualified(rp.descriptor.clazz)
            except ResourceError:
                continue  # reported by the reference checks, or at build
            if not (isinstance(cls, type) and issubclass(cls, BaseModel)):
                continue
            args = rp.descriptor.arguments
            if rtype is ResourceType.CHAT_MODEL and issubclass(cls, ChatModelSetup):
                own = _own_arguments(cls, args)
                for key in ("tools", "subagents"):
                    if isinstance(own.get(key), str):
                        del own[key]  # one string: the reference checks say how to list it
                _validate(f"{what} resource {name!r}", cls, own, (), problems,
                          keep_missing=not getattr(cls, "ARGUMENT_ALIASES", None))
            elif rtype is ResourceType.CHAT_MODEL_CONNECTION and "flow_control" in args \
                    and "flow_control" in cls.model_fields:
                _validate(f"{what} resource {name!r}", FlowControl, args["flow_control"],
                          ("flow_control",), problems, keep_missing=True)


def _own_arguments(cls: type[BaseModel], args: Mapping[str, Any]) -> dict[str, Any]:
    """The arguments that are ``cls``'s fields (a compat class's renamed ones left out).

    A renamed argument is checked by name already, and validating it here would log its
    "dropped" warning twice.

    Returns:
        The arguments named by a field's name or alias.
    """
    names = set(cls.model_fields)
    names.update(f.alias for f in cls.model_fields.values() if isinstance(f.alias, str))
    return {k: v for k, v in args.items() if k in names}


def _validate(where: str, cls: type[BaseModel], value: Any, prefix: tuple[str, ...],
              problems: list[str], keep_missing: bool) -> None:
    try:
        cls.model_validate(value)
    except ValidationError as err:
        for d in err.errors():
            if d["type"] == "missing" and not keep_missing:
                continue  # given under a renamed argument, which this check leaves out
            loc = (*prefix, *d["loc"])
            shown = ".".join(map(str, loc)) or "arguments"
            if d["type"] == "extra_forbidden":
                problems.append(f"{where}: {shown}: {unknown_key_message(cls, d['loc'])}")
            else:
                problems.append(f"{where}: {shown}: {d['msg']} (got {_short(d['input'])})")
    except Exception as err:  # noqa: BLE001 - a class refusing its arguments otherwise
        problems.append(f"{where}: cannot build {cls.__name__}: {described(err)}")


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else cut_masked(text, 77) + "..."
