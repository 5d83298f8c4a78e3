"""Tools: Python functions offered to chat models, with JSON Schema from their signature.

The schema comes from ``inspect.signature`` and type hints through pydantic's public
``create_model``/``model_json_schema``; argument descriptions come from a Google-style
docstring's ``Args:`` section, a NumPy-style ``Parameters`` section (a header underlined
with dashes, as Apache Flink Agents' examples write them) or reST ``:param name:`` fields.
"""

from __future__ import annotations

import inspect
import sys
import warnings
import weakref
from collections.abc import Callable, Sequence
from typing import Annotated, Any, ClassVar, get_args, get_origin, get_type_hints

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    ValidationError,
    create_model,
    field_validator,
)
from pydantic.fields import FieldInfo

from ._resources import Resource, ResourceType, import_qualified, qualified_name
from ._secrets import mask_secrets
from ._tool_docs import docstring_parts as _docstring_parts
from ._tool_docs import warn_of_tool_docs
from ._tool_metadata import ToolMetadata
from ._tool_response import ToolResponse
from ._typed_dicts import pydantic_ready

__all__ = ["ToolMetadata", "ToolSpec", "FunctionTool", "tool", "RESERVED_TOOL_PREFIX",
           "UNREADABLE_ARGUMENTS", "offered_tool_name", "refuse_unreadable_arguments"]

RESERVED_TOOL_PREFIX = "_subagent_"
"""Callable names with this prefix delegate to sub-agents; no tool may carry it."""

UNREADABLE_ARGUMENTS = "__unreadable_arguments__"
"""The one key of the arguments a connection gives a tool call whose arguments it could not
read as one JSON object; its value says what was wrong. The tool refuses the call, telling
the model why, so the model can call it again (the chat goes on)."""


def refuse_unreadable_arguments(tool_name: str, arguments: dict[str, Any]) -> None:
    """Refuse a call whose arguments the connection could not read (``UNREADABLE_ARGUMENTS``).

    Args:
        tool_name: the tool's name, for the message.
        arguments: the call's arguments.

    Raises:
        ValueError: worded for the model, when ``arguments`` are the unreadable ones.
    """
    problem = arguments.get(UNREADABLE_ARGUMENTS) if len(arguments) == 1 else None
    if isinstance(problem, str):
        raise ValueError(f"tool {tool_name!r} was called with arguments that {problem}; call "
                         "it again with its arguments as one JSON object (no markdown fences, "
                         "no text around it)")


class ToolSpec(BaseModel):
    """The frozen spec that ``@tool`` attaches to a function (``fn.__tool_spec__``).

    Attributes:
        name: the tool name.
        description: for the model.
        requires_approval: each call the model makes is held until approved (see ``tool``).
        approval_timeout_s: how long a held call waits for its answer, in seconds.
    """

    model_config = ConfigDict(frozen=True, defer_build=True)

    name: str
    description: str = ""
    requires_approval: bool = False
    approval_timeout_s: float | None = None


def _annotated_description(annotation: Any) -> str | None:
    """The text of ``Annotated[T, "text"]`` (Flink Agents' form of an argument description)."""
    if get_origin(annotation) is Annotated:
        return next((m for m in get_args(annotation)[1:] if isinstance(m, str)), None)
    return None


def _type_hints(fn: Callable[..., Any]) -> dict[str, Any]:
    """``fn``'s type hints, ``Annotated`` kept, names of its enclosing classes in scope.

    A string hint (``from __future__ import annotations``) of a static method naming a
    model defined in the same class body (``q: Query``) resolves as it does without the
    import: in the class's namespace, then the module's.

    Returns:
        Parameter name -> hint.

    Raises:
        NameError: a hint names what neither scope has.
    """
    try:
        return get_type_hints(fn, include_extras=True)
    except NameError:
        owners = getattr(fn, "__qualname__", "").split(".")[:-1]
        scope: Any = sys.modules.get(getattr(fn, "__module__", None) or "")
        localns: dict[str, Any] = {}
        for part in owners if "<locals>" not in owners else ():
            scope = getattr(scope, part, None)
            if not isinstance(scope, type):
                break
            localns.update(vars(scope))  # an inner class's names shadow an outer one's
        if not localns:
            raise
        return get_type_hints(fn, localns=localns, include_extras=True)


def _parameter_fields(fn: Callable[..., Any], skip: tuple[str, ...] = ()
                      ) -> tuple[dict[str, Any], dict[str, str]]:
    """Pydantic fields of ``fn``'s named parameters, and each field's parameter name.

    A parameter's type hint keeps its ``Annotated`` metadata (a ``Field``'s description and
    constraints, or a plain text description); a default that is a ``Field(...)`` is that
    field; else a description comes from the docstring. A parameter named as pydantic takes
    no field (``_private``, ``model_config``, ``schema``) is a field under another name with
    the parameter's name as its alias, so the schema and the arguments use the parameter's.

    Args:
        fn: the function.
        skip: parameter names to leave out.

    Returns:
        ``(fields for create_model, {field name: parameter name})``.
    """
    _, arg_docs = _docstring_parts(fn)
    hints = _type_hints(fn)
    params = inspect.signature(fn).parameters
    fields: dict[str, Any] = {}
    names: dict[str, str] = {}
    for index, (name, param) in enumerate(params.items()):
        if name in skip or param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            continue
        annotation = pydantic_ready(hints.get(name, Any))  # a typing.TypedDict on 3.11
        doc = _annotated_description(annotation) or arg_docs.get(name)
        field_name = name
        if name.startswith("_") or hasattr(BaseModel, name):
            field_name = f"p{index}_"
            while field_name in params:
                field_name += "_"
        alias = None if field_name == name else name
        if isinstance(param.default, FieldInfo):
            info = param.default
            if alias is not None or (doc and not info.description):
                info = FieldInfo.merge_field_infos(
                    info, **({"alias": alias} if alias else {}),
                    **({"description": doc} if doc and not info.description else {}))
        else:
            default = ... if param.default is param.empty else param.default
            given: dict[str, Any] = {"description": doc, "alias": alias}
            info = Field(default, **{k: v for k, v in given.items()
                                     if v is not None})  # (None would hide Annotated's)
        fields[field_name] = (annotation, info)
        names[field_name] = name
    return fields, names


def schema_for_function(fn: Callable[..., Any], skip: tuple[str, ...] = ()) -> dict[str, Any]:
    """Return the JSON Schema (an object schema) of ``fn``'s keyword arguments.

    Args:
        fn: the function; its parameters need type hints (unannotated ones are ``Any``).
        skip: parameter names to leave out (arguments the framework injects).

    Returns:
        ``{"type": "object", "properties": {...}, "required": [...]}`` as pydantic renders it.
    """
    fields, _ = _parameter_fields(fn, skip)
    model = create_model(f"{fn.__name__}_args", **fields)
    schema = model.model_json_schema()
    schema.pop("title", None)
    for prop in schema.get("properties", {}).values():
        prop.pop("title", None)
    return schema


def _arguments_model(fn: Callable[..., Any]) -> type[BaseModel] | None:
    """A pydantic model of ``fn``'s keyword arguments, to check and convert a model's call.

    Lax, as JSON from a model needs: ``"3"`` for an ``int``, a number for a ``str``, an object
    for a pydantic model parameter (given as that model); but never ``NaN`` or an infinity
    for a float (``"NaN"``, ``"inf"``), which JSON has not and which pass a comparison.
    Arguments the function does not take are refused unless it has ``**kwargs``.

    Args:
        fn: the tool's function.

    Returns:
        The model, or ``None`` when one cannot be built from the signature (the arguments
        then go to the function as they are).
    """
    try:
        fields, names = _parameter_fields(fn)
        params = inspect.signature(fn).parameters
        open_ended = any(p.kind is p.VAR_KEYWORD for p in params.values())
        # no NaN or infinity for a float (JSON has none; pydantic's lax mode reads "NaN",
        # "inf"): a check such as ``amount > 100`` is False for NaN, so it let a call through
        config = ConfigDict(extra="allow" if open_ended else "forbid",
                            arbitrary_types_allowed=True, coerce_numbers_to_str=True,
                            allow_inf_nan=False)
        with warnings.catch_warnings():  # a parameter named like a BaseModel attribute
            warnings.simplefilter("ignore")
            model = create_model(f"{getattr(fn, '__name__', 'tool')}_arguments",
                                 __config__=config, **fields)
        model.__tool_parameters__ = names  # type: ignore[attr-defined]
        model.__tool_field_defaults__ = [  # type: ignore[attr-defined]
            f for f, p in names.items() if isinstance(params[p].default, FieldInfo)]
        model.__tool_positional__ = [  # type: ignore[attr-defined]
            p for p in params.values() if p.kind is p.POSITIONAL_ONLY]
        return model
    except Exception:  # noqa: BLE001 - an unusual callable: its arguments are passed as given
        return None


_ARGUMENT_MODELS: weakref.WeakKeyDictionary[Any, type[BaseModel] | None] = (
    weakref.WeakKeyDictionary())
"""``_arguments_model`` of each tool function, built on its first call (kept out of the
tool resource, which is pickled to Flink's workers)."""


def _cached_arguments_model(fn: Callable[..., Any]) -> type[BaseModel] | None:
    try:
        return _ARGUMENT_MODELS[fn]
    except KeyError:
        model = _ARGUMENT_MODELS[fn] = _arguments_model(fn)
        return model
    except TypeError:  # not weakly referenceable (a builtin): built each time
        return _arguments_model(fn)


def _decoded_texts(arguments: dict[str, Any], error: ValidationError) -> dict[str, Any] | None:
    """``arguments`` with each failed one that is an array's or object's JSON text decoded.

    Returns:
        The arguments (``None``: no failed argument is such text).
    """
    from ._messages import strict_json  # (it imports this module)

    decoded = dict(arguments)
    for item in error.errors():
        loc = item.get("loc") or ()
        name = loc[0] if loc and isinstance(loc[0], str) else None
        text = arguments.get(name) if name is not None else None
        if name is None or not isinstance(text, str) or text.lstrip()[:1] not in ("[", "{"):
            continue
        try:  # strict: no NaN, no infinity, no RecursionError for text nested too deeply
            value = strict_json(text)
        except ValueError:
            continue
        if isinstance(value, (list, dict)):
            decoded[name] = value
    return decoded if decoded != arguments else None


def _validated(model: type[BaseModel], arguments: dict[str, Any]) -> BaseModel | None:
    """``arguments`` validated by ``model`` (``None``: they do not fit)."""
    try:
        return model.model_validate(arguments)
    except ValidationError:
        return None


def _problems(error: ValidationError) -> str:
    """Each failed argument of ``error`` as ``path: message (got value)``, ``;``-separated."""
    parts = []
    for item in error.errors()[:10]:
        path = ".".join(str(p) for p in item.get("loc", ())) or "(arguments)"
        shown = mask_secrets(repr(item.get("input")))[:80]  # masked whole, then cut
        got = "" if item.get("type") == "missing" else f" (got {shown})"
        parts.append(f"{path}: {item.get('msg')}{got}")
    return "; ".join(parts)


class FunctionTool(Resource):
    """A tool backed by a Python function (plain or ``async``).

    Attributes:
        func: the function as ``module:qualname`` (so the plan stays data).
        name: the tool name (defaults to the function's name).
        description: for the model (defaults to the docstring's summary).
        requires_approval: hold each call for approval (see ``tool``).
        approval_timeout_s: how long a held call waits for its answer, in seconds
            (``None``: until answered, or all input ends).
        injected_args: parameters the runtime fills, not the model (Apache Flink Agents'
            ``InjectedArg``): name -> ``{"source": "config" | "sensory_memory" |
            "short_term_memory", "key": ...}``; left out of the schema the model is given.
            Added to the function's own (``__injected_args__``, set by ``compat.tool``).
    """

    RESOURCE_TYPE: ClassVar[ResourceType] = ResourceType.TOOL

    func: str
    name: str = ""
    description: str = ""
    requires_approval: bool = False
    approval_timeout_s: float | None = Field(default=None, gt=0, le=1e9)
    injected_args: dict[str, dict[str, str]] = Field(default_factory=dict)

    # added after tools were recorded in durable calls' arguments: out of their JSON form
    # (and so of the calls' digests) while empty (``runtime._serde.OMIT_EMPTY``)
    __json_omit_empty__: ClassVar[tuple[str, ...]] = ("injected_args",)

    _fn: Callable[..., Any] | None = PrivateAttr(default=None)

    @field_validator("approval_timeout_s", mode="before")
    @classmethod
    def _seconds_not_a_bool(cls, value: Any) -> Any:
        """Refuse ``True``/``False``: pydantic would take ``True`` as 1 second; ``@tool`` does not.

        Returns:
            ``value``, to be validated as a number of seconds.

        Raises:
            ValueError: when it is a bool.
        """
        if isinstance(value, bool):
            raise ValueError(f"approval_timeout_s must be a number of seconds, got {value!r}")
        return value

    @classmethod
    def from_function(cls, fn: Callable[..., Any], name: str | None = None) -> FunctionTool:
        """Wrap ``fn``; keeps the function object so local (non-importable) functions work.

        Returns:
            The tool.

        Raises:
            TypeError: when ``fn`` is a callable without a ``module:qualname`` of its own (a
                ``functools.partial``, an object with ``__call__``): a plan names code so.
        """
        # (a function made by exec in a namespace with no __name__ has __module__ None: kept,
        # as the function object itself is what a local run calls)
        if not all(isinstance(getattr(fn, a, None), str) for a in ("__qualname__", "__name__")) \
                or not isinstance(getattr(fn, "__module__", None), (str, type(None))):
            raise TypeError(
                f"a tool must be a function (def or async def), got a {type(fn).__name__} "
                f"object, which has no module:qualname for the plan to name it by: wrap it "
                f"in a function of its own (def my_tool(...): ...) with a docstring and type "
                f"hints")
        spec: ToolSpec | None = getattr(fn, "__tool_spec__", None)
        summary, _ = _docstring_parts(fn)
        inst = cls(
            func=qualified_name(fn),
            name=name or (spec.name if spec else fn.__name__),
            description=(spec.description if spec and spec.description else summary),
            requires_approval=spec.requires_approval if spec else False,
            approval_timeout_s=spec.approval_timeout_s if spec else None,
        )
        inst._fn = fn
        warn_of_tool_docs(fn, inst.injections(), spec.description if spec else "")
        return inst

    @property
    def function(self) -> Callable[..., Any]:
        """The Python function (imported from ``func`` on first use)."""
        if self._fn is None:
            self._fn = import_qualified(self.func)
        return self._fn

    @property
    def tool_name(self) -> str:
        """The name the tool is offered under: ``name``, else the function's ``__name__``."""
        return self.name or self.function.__name__

    @property
    def metadata(self) -> ToolMetadata:
        """Name, description and argument schema for a chat model."""
        return ToolMetadata(
            name=self.tool_name,
            description=self.description,
            parameters=schema_for_function(self.function, skip=tuple(self.injections())),
        )

    def injections(self) -> dict[str, dict[str, str]]:
        """The parameters the runtime fills: the function's own, then ``injected_args``."""
        return {**(getattr(self.function, "__injected_args__", None) or {}),
                **self.injected_args}

    def approval(self) -> tuple[bool, float | None]:
        """Whether each call is held for approval, and how long it waits (seconds).

        What this resource declares (``requires_approval``, ``approval_timeout_s``), else what
        ``@tool`` declared on the function: a function marked ``@tool(requires_approval=True)``
        is held however the tool is declared (a ``ResourceDescriptor``, YAML).

        Returns:
            ``(held, timeout_s)``; ``timeout_s`` ``None``: until answered.
        """
        spec: ToolSpec | None = getattr(self.function, "__tool_spec__", None)
        held = self.requires_approval or bool(spec is not None and spec.requires_approval)
        timeout = self.approval_timeout_s
        if timeout is None and spec is not None:
            timeout = spec.approval_timeout_s
        return held, timeout

    def call(self, *args: Any, **kwargs: Any) -> Any:
        """Call the function directly (Flink Agents' ``Tool.call``), in this thread.

        Inside an action this is not a durable call: wrap it in ``ctx.durable_execute`` when
        it has effects a replay must not repeat.

        Returns:
            What the function returns.
        """
        return self.function(*args, **kwargs)

    def checked_arguments(self, arguments: dict[str, Any]) -> dict[str, Any]:
        """``arguments`` (a model's call, decoded JSON) checked and converted by the signature.

        Each argument is validated against its parameter's type hint, as pydantic does in lax
        mode: ``"3"`` becomes ``3`` for an ``int``, an object becomes the pydantic model a
        parameter is annotated with, a number becomes text for a ``str``. Arguments the model
        left out keep the function's defaults. An argument that does not fit because it
        came as the JSON text of an array or object (some providers encode nested values
        twice) is that array or object, when it fits so.

        Args:
            arguments: the arguments the model gave.

        Returns:
            The arguments to call the function with.

        Raises:
            ValueError: naming the tool and each argument that does not fit (a missing one, a
                wrong type, one the function does not take), so the model can correct it.
        """
        refuse_unreadable_arguments(self.tool_name, arguments)
        model = _cached_arguments_model(self.function)
        if model is None:
            return arguments
        try:
            checked = model.model_validate(arguments)
        except ValidationError as e:
            decoded = _decoded_texts(arguments, e)
            found = None if decoded is None else _validated(model, decoded)
            if found is None:
                raise ValueError(f"tool {self.tool_name!r} was called with arguments that do "
                                 f"not fit its parameters: {_problems(e)}") from None
            checked = found
        # (the fields set include the extra arguments a ``**kwargs`` function takes)
        parameters: dict[str, str] = model.__tool_parameters__  # type: ignore[attr-defined]
        values = {parameters[name]: checked.__dict__[name]
                  for name in checked.model_fields_set if name in parameters}
        for name in model.__tool_field_defaults__:  # type: ignore[attr-defined]
            if name not in checked.model_fields_set:  # the value of ``= Field(...)``, not it
                values[parameters[name]] = checked.__dict__[name]
        values.update(checked.model_extra or {})
        return values

    async def acall(self, **arguments: Any) -> Any:
        """Call the tool with ``arguments`` checked by ``checked_arguments``.

        Sync functions run in a worker thread; what one returns that is awaitable (a
        decorator hid an ``async def``) is awaited. Positional-only parameters (``def f(a,
        /)``) are passed by position.

        Returns:
            What the function returns (a ``ToolResponse``'s ``result``).

        Raises:
            ToolFailure: the function returned ``ToolResponse.failure(...)``.
        """
        import asyncio

        arguments = self.checked_arguments(arguments)
        fn = self.function
        model = _cached_arguments_model(fn)  # (its signature read once)
        positional = _positional_only(getattr(model, "__tool_positional__", ()), arguments)
        if inspect.iscoroutinefunction(fn):
            result = await fn(*positional, **arguments)
        else:
            result = await asyncio.to_thread(fn, *positional, **arguments)
            result = await result if inspect.isawaitable(result) else result
        # Flink Agents' ToolResponse: its result, or its failure raised (the model is told)
        return result.unwrapped() if isinstance(result, ToolResponse) else result


def _positional_only(params: Sequence[inspect.Parameter],
                     arguments: dict[str, Any]) -> list[Any]:
    """The values of a tool's positional-only parameters, taken out of ``arguments``.

    A model names every argument; ``def f(a, /)`` takes ``a`` only by position. One left
    out before a given one gets its default.

    Args:
        params: the function's positional-only parameters, in order.
        arguments: the checked arguments (those passed by position are removed).

    Returns:
        The values in order.
    """
    given = [i for i, p in enumerate(params) if p.name in arguments]
    values: list[Any] = []
    for p in params[:given[-1] + 1] if given else []:
        values.append(arguments.pop(p.name) if p.name in arguments else p.default)
    return values


def tool(fn: Callable[..., Any] | None = None, *, name: str | None = None,
         description: str | None = None, requires_approval: bool = False,
         approval_timeout_s: float | None = None) -> Any:
    """Mark a function as a tool (usable bare, ``@tool``, or with arguments).

    Inside an ``Agent`` class body (on a static method) the tool is registered as a ``TOOL``
    resource named after the function. The JSON Schema of its arguments comes from the
    signature and the Google-style docstring.

    With ``requires_approval``, each call a chat model makes is held: an ``ApprovalRequest``
    (the call, its arguments, an ``approval_id``) goes to the agent's output, and the run
    waits, durably, for the answer on the agent's second input (``request.approve()`` or
    ``request.reject(reason)``). An approval runs the tool; a rejection, or no answer within
    ``approval_timeout_s``, is the tool's result the model reads, with the reason.

    Args:
        fn: the function (when used bare).
        name: the tool name; defaults to the function name.
        description: for the model; defaults to the docstring's summary.
        requires_approval: hold each call until approved.
        approval_timeout_s: how long a held call waits for its answer, in seconds
            (``None``: until answered, or all input ends).

    Returns:
        The function itself, with a frozen ``ToolSpec`` at ``__tool_spec__``.

    Raises:
        ValueError: when ``approval_timeout_s`` is given and is not a positive number.
    """
    if approval_timeout_s is not None and (isinstance(approval_timeout_s, bool) or not (
            isinstance(approval_timeout_s, (int, float)) and 0 < approval_timeout_s <= 1e9)):
        raise ValueError(f"@tool(approval_timeout_s=...) must be a positive number of "
                         f"seconds, at most 1e9, got {approval_timeout_s!r}")

    def mark(f: Any) -> Any:
        target: Any = f.__func__ if isinstance(f, staticmethod) else f
        target.__tool_spec__ = ToolSpec(
            name=name or target.__name__, description=description or "",
            requires_approval=requires_approval, approval_timeout_s=approval_timeout_s)
        return f

    return mark(fn) if fn is not None else mark


def offered_tool_name(resource_name: str, clazz: str, arguments: dict[str, Any],
                      instance: Any = None) -> str:
    """The name a chat model is offered for a ``TOOL`` resource (checked at plan build).

    Args:
        resource_name: the name the resource is declared under.
        clazz: the descriptor's class path.
        arguments: the descriptor's arguments.
        instance: the declared instance, when one was given.

    Returns:
        A ``FunctionTool``'s ``tool_name`` (its ``name``, else its function's ``__name__``:
        a descriptor naming only ``func`` is offered under the function's name); the
        descriptor's ``name`` argument, or the default of the tool class's ``name`` field,
        for another tool class; else ``resource_name``.

    Raises:
        ResourceError: when the class or the function cannot be imported.
    """
    if isinstance(instance, FunctionTool):
        return instance.tool_name
    if arguments.get("name"):
        return str(arguments["name"])
    cls = import_qualified(clazz)
    field = getattr(cls, "model_fields", {}).get("name")  # a tool class naming itself
    if field is not None and isinstance(field.default, str) and field.default:
        return field.default
    func = arguments.get("func")
    if isinstance(cls, type) and issubclass(cls, FunctionTool) and isinstance(func, str):
        return str(getattr(import_qualified(func), "__name__", resource_name))
    return resource_name
