"""Events: what flows between actions.

An ``Event`` is a pydantic model with an ``id``, a ``type`` string that routes it to actions,
and free ``attributes``. Typed subclasses declare ``EVENT_TYPE`` and typed fields. Every event
must be JSON-serializable: the Flink host keeps in-flight events in keyed state.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, ClassVar

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    InstanceOf,
    PydanticUserError,
    ValidationError,
    field_validator,
    model_validator,
)

from ._event_attributes import PayloadAttributes, row_form, typed_copy
from ._event_build import SLOT_SETTERS, bare_fields, extra_as_attributes, hinted_event_error
from ._event_ids import EVENT_ID_SOURCE, assign_unsent_field, is_unsent, new_event_id
from ._event_types import BUILTIN_TYPE_NAMES, FLINK_AGENTS_EVENT_TYPES, BuiltinEventType
from ._field_hints import frozen_event_error, refuse_reserved_event_fields
from ._memory import memory_ref_of
from ._messages import ChatMessage, ChatResponse
from ._secrets import MaskedStr

__all__ = ["Event", "InputEvent", "OutputEvent", "ChatRequestEvent", "ChatResponseEvent",
           "ToolRequestEvent", "ToolResponseEvent", "event_type_of", "event_class_for",
           "event_class_tag", "event_from_json"]

_NAMED_BY_CLASS: set[type] = set()
"""The event classes with no ``EVENT_TYPE`` of their own (their type is their name), whose
events may be given another ``type`` (Flink Agents 0.3's events all name theirs)."""
_REGISTRY: dict[str, type[Event]] = {}
"""The class of each event type: the last ``Event`` subclass defined with that type."""
_BY_CLASS: dict[str, type[Event]] = {}
"""Every ``Event`` subclass of this process, by ``module:qualname``."""
EVENT_CLASS_KEY = "$class"
"""The key of an event's JSON form that names its class (``module:qualname``), written when
the class registered for its type is another one (``event_class_tag``)."""


class Event(BaseModel):
    """Base of all events.

    Use it directly for ad-hoc events, ``Event(type="ReviewScored", attributes={...})``, or
    subclass it with an ``EVENT_TYPE`` constant and typed fields. An ad-hoc event also takes
    its attributes as keywords, read and set as fields, as Apache Flink Agents' events do
    (``Event(type="ReviewScored", score=3)``, ``event.score``; kept in ``attributes``); a
    subclass refuses a keyword that is not one of its fields (a typo stays an error).

    Attributes:
        id: identity of this occurrence, derived from the path that produced it (replay-stable
            and unique per occurrence). An event built inside an action has its id as soon as
            it is built (so ``req.id`` can be kept in memory before ``send_event(req)``, and
            the ``ChatResponseEvent.request_id`` answering it matches); one built elsewhere
            gets it when sent.
        type: the routing type; for a subclass, its ``EVENT_TYPE``.
        attributes: free JSON attributes.
        attachments: named JSON payloads carried beside the attributes (Apache Flink
            Agents' event attachments: ``Event(type=..., attachments={"payload": {...}})``,
            read with ``get_attachment(name)``).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    EVENT_TYPE: ClassVar[str | None] = None
    __event_fields__: ClassVar[frozenset[str] | None] = None
    """The fields of an event class whose other keywords are kept as attributes (``Event``
    and a program's own classes); ``None``: they are refused (the built-in events)."""
    POSITIONAL: ClassVar[tuple[str, ...]] = ()
    """The names of the arguments a built-in event takes by position, in Apache Flink
    Agents' order (``OutputEvent(result)``, ``ChatRequestEvent(model, messages)``)."""

    id: str = Field(default_factory=new_event_id)
    type: InstanceOf[BuiltinEventType] | str = ""  # a built-in's keeps its class (both names)
    attributes: dict[str, Any] = Field(default_factory=dict)
    attachments: dict[str, Any] = Field(default_factory=dict)

    def __init__(self, /, *args: Any, **data: Any) -> None:
        cls = type(self)
        if args:
            names = cls.POSITIONAL
            if len(args) > len(names):
                raise TypeError(
                    f"{cls.__name__}() takes at most {len(names)} positional "
                    f"argument(s) ({', '.join(names) or 'none'}), {len(args)} given")
            for name, value in zip(names, args, strict=False):
                if name in data:
                    raise TypeError(f"{cls.__name__}() got {name!r} by position and by keyword")
                data[name] = value
        if cls in _BARE and len(data) == 1 and _BARE[cls] in data:  # ``OutputEvent(output=x)``
            set_dict, set_fields, set_extra, set_private = SLOT_SETTERS  # type: ignore[misc]
            field = _BARE[cls]  # what validation makes of it, without its round trip
            source = EVENT_ID_SOURCE.get()  # (``new_event_id`` inline)
            set_dict(self, {"id": source() if source is not None else "", "type": cls.EVENT_TYPE,
                            "attributes": {}, "attachments": {}, field: data[field]})
            set_fields(self, {"type", field})
            set_extra(self, None)
            set_private(self, None)
            return
        known = cls.__event_fields__
        given = data
        if known is not None and not data.keys() <= known:
            data = extra_as_attributes(data, known, type(self).__name__)
        try:
            super().__init__(**data)
        except ValidationError as e:  # (no cost unless raised)
            raise hinted_event_error(cls, e, given) from None

    __init__.__pydantic_base_init__ = True  # type: ignore[attr-defined]

    if not TYPE_CHECKING:  # (at run time only: type checkers keep flagging unknown names)
        def __getattr__(self, name: str) -> Any:
            """An ad-hoc event's attribute read as a field (``event.a``), as Flink Agents."""
            try:
                return super().__getattr__(name)
            except AttributeError:
                found = object.__getattribute__(self, "__dict__").get("attributes")
                if type(self).__event_fields__ is not None and found and name in found:
                    return found[name]
                raise

    def __setattr__(self, name: str, value: Any) -> None:
        if name == "id":  # a Flink Agents typed copy's ``result.id = event.id`` (``from_event``);
            self.__dict__["id"] = str(value)  # sending it gives it an id of its own
            return
        known = type(self).__event_fields__
        if known is not None and name not in known:  # Flink Agents' ``event.a = 2``
            if not is_unsent(self.id):
                raise frozen_event_error(self, name, value, sent=True)
            self.attributes[name] = value
            return
        try:  # only an assignment pays: building an event sets no attribute
            super().__setattr__(name, value)
        except ValidationError as e:
            if e.errors()[0]["type"] != "frozen_instance":
                raise
            if known is None or name in _OWN_FIELDS:
                raise frozen_event_error(self, name, value) from None
            if not is_unsent(self.id):  # sent, or received: recorded as it was
                raise frozen_event_error(self, name, value, sent=True) from None
            assign_unsent_field(self, name, value)  # Flink Agents' ``event.value = 2``

    def __init_subclass__(cls, **kwargs: Any) -> None:
        refuse_reserved_event_fields(cls)
        super().__init_subclass__(**kwargs)
        if "EVENT_TYPE" not in cls.__dict__ or cls.__dict__["EVENT_TYPE"] is None:
            cls.EVENT_TYPE = cls.__qualname__
            _NAMED_BY_CLASS.add(cls)

    @classmethod
    def __pydantic_init_subclass__(cls, **kwargs: Any) -> None:
        super().__pydantic_init_subclass__(**kwargs)
        if cls.__pydantic_custom_init__:
            # An event class with its own ``__init__`` (Flink Agents' custom events:
            # ``def __init__(self, value): super().__init__(type=..., attributes=...)``) is
            # still built through it by a call, but rebuilt from its JSON form (a sent
            # event, a restore) from its fields, which that ``__init__`` does not take.
            cls.__pydantic_custom_init__ = False
            cls.model_rebuild(force=True)
        # a program's own event class keeps the keywords it does not declare as attributes,
        # as Flink Agents' events (``extra="allow"``) keep them; the built-in ones refuse them
        # (one that chose its own ``extra`` keeps pydantic's: ``model_extra`` with "allow")
        cls.__event_fields__ = None if cls.__module__.startswith("flink_agents_py.") \
            or cls.model_config.get("extra") != "forbid" else frozenset(cls.model_fields)
        name = f"{cls.__module__}:{cls.__qualname__}"
        if _is_skeleton_of(cls, _BY_CLASS.get(name)):
            return  # cloudpickle's throw-away copy of a loaded class (see event_class_tag)
        _REGISTRY[cls.EVENT_TYPE or cls.__qualname__] = cls
        _BY_CLASS[name] = cls
        if "POSITIONAL" in cls.__dict__:  # a built-in event: ``attributes`` shows its payload
            fields = [n for n in cls.model_fields if n not in _OWN_FIELDS]
            cls.attributes = PayloadAttributes(  # type: ignore[assignment]
                tuple(sorted(fields, key=lambda n: (n not in cls.POSITIONAL, n))))

    @model_validator(mode="before")
    @classmethod
    def _fill_type(cls, data: Any) -> Any:
        if isinstance(data, dict) and cls.EVENT_TYPE is not None:
            given = data.get("type")
            if given and given != cls.EVENT_TYPE:
                if cls in _NAMED_BY_CLASS:  # no EVENT_TYPE of its own: Flink Agents 0.3's
                    return data  # ``MyEvent(type="my_event", value=...)`` routes by ``type``
                raise ValueError(
                    f"{cls.__name__} has type {cls.EVENT_TYPE!r}, not {given!r}"
                )
            data = {**data, "type": cls.EVENT_TYPE}
        return data

    @field_validator("attributes", mode="after")
    @classmethod
    def _memory_refs(cls, value: dict[str, Any]) -> dict[str, Any]:
        # a ``MemoryRef`` an event carries (``MyEvent(value=memory.set(...))``) comes back
        # from the event's JSON form as a plain dict: it is a reference again
        # (``event.value.resolve(ctx)``)
        for k, v in value.items() if value else ():
            if type(v) is dict and len(v) == 2:
                ref = memory_ref_of(v)
                if ref is not None:
                    value[k] = ref
        return value

    @model_validator(mode="after")
    def _require_type(self) -> Event:
        if not self.type:
            raise ValueError("an Event needs a non-empty 'type' (or subclass Event)")
        return self

    def to_json(self) -> dict[str, Any]:
        """Return the event as a JSON object (``type`` included), for keyed state and logs.

        When another class took its type name over, the object also names its class
        (``EVENT_CLASS_KEY``), so ``event_from_json`` and ``from_json`` rebuild this class.
        """
        data, tag = self.model_dump(mode="json", fallback=row_form), event_class_tag(self)
        return data if tag is None else {**data, EVENT_CLASS_KEY: tag}

    def model_dump_json(self, **kwargs: Any) -> str:  # noqa: D102 - pydantic's, a PyFlink
        return super().model_dump_json(**{"fallback": row_form, **kwargs})  # Row as there

    def get_attr(self, name: str, default: Any = None) -> Any:
        """Return attribute ``name``: a typed field, else an entry of ``attributes``.

        Args:
            name: the field or attribute name.
            default: returned when neither exists.
        """
        if name in type(self).model_fields and name not in ("attributes", "attachments"):
            return getattr(self, name)
        return self.attributes.get(name, default)

    def set_attr(self, name: str, value: Any) -> None:
        """Set the free attribute ``name`` (before the event is sent; JSON values only).

        Raises:
            UsageError: for a typed field (events are immutable: build a new one instead).
        """
        if name in type(self).model_fields:
            from ._errors import UsageError

            raise UsageError(f"{name!r} is a field of {type(self).__name__}, which is "
                             f"immutable: build the event with it instead of set_attr")
        self.attributes[name] = value

    def get_attachment(self, name: str, default: Any = None) -> Any:
        """Return attachment ``name`` (Apache Flink Agents' accessor), else ``default``.

        Args:
            name: the attachment's name.
            default: returned when the event has no attachment of that name.
        """
        return self.attachments.get(name, default)

    def set_attachment(self, name: str, value: Any) -> None:
        """Attach ``value`` as ``name`` (before the event is sent; JSON values only).

        Args:
            name: the attachment's name; an attachment of that name is replaced.
            value: a JSON value (the event is kept in keyed state as JSON).
        """
        self.attachments[name] = value

    def get_type(self) -> str:
        """The routing type (Apache Flink Agents' accessor of ``type``)."""
        return self.type

    @classmethod
    def from_json(cls, text: str | bytes) -> Event:
        """Rebuild an event from its JSON text (Apache Flink Agents' ``Event.from_json``).

        Args:
            text: JSON of an object with a non-empty ``type`` (``json.dumps(e.to_json())``).

        Returns:
            The event, as the class registered for its type (``Event`` for an ad-hoc type),
            or as the class its ``$class`` tag names: only an ``Event`` subclass defined in
            this process is named so (nothing is imported for a tag: ``event_from_json``).

        Raises:
            ValueError: when the text is not a JSON object with a ``type``, or its tag names
                no event class of this process.
        """
        data = json.loads(text)
        if not isinstance(data, dict) or not data.get("type"):
            raise ValueError("Event.from_json needs a JSON object with a non-empty 'type'")
        if EVENT_CLASS_KEY not in data and (data["type"] in FLINK_AGENTS_EVENT_TYPES
                                            or event_class_for(str(data["type"])) is Event):
            event = Event(**data)  # an ad-hoc type: its other keys are attributes, as there
            return builtin_of(event) if data["type"] in FLINK_AGENTS_EVENT_TYPES else event
        return event_from_json(data, "Event.from_json's text")

    @classmethod
    def from_event(cls, event: Event) -> Any:
        """Return ``event`` as this class (Apache Flink Agents' idiom).

        Actions here already receive the typed event, so this is usually ``event`` itself;
        an ``Event(type="_input_event", attributes={"input": x})`` is ``typed_copy``'s.

        Args:
            event: any event.

        Returns:
            The event as an instance of this class.
        """
        return event if isinstance(event, cls) else typed_copy(cls, event)


_OWN_FIELDS = frozenset(Event.model_fields)
Event.__event_fields__ = _OWN_FIELDS
_BARE: dict[type[BaseModel], str] = {}
"""The event classes built without pydantic's validation when given their one field only
(``bare_fields``: ``InputEvent``, ``OutputEvent``), by that field."""


def json_schema_of(value: Any) -> Any:
    """The JSON Schema of an output schema given as a pydantic class or an ``OutputSchema``.

    Args:
        value: a pydantic class, an ``OutputSchema``, a JSON Schema dict or ``None``.

    Returns:
        The JSON Schema; anything else (a JSON Schema dict, ``None``) unchanged.

    Raises:
        UsageError: when pydantic cannot describe the class as a JSON Schema (a field of an
            arbitrary class, a callable): naming the class and pydantic's reason, wherever the
            schema is given (an event, ``ctx.chat``, a ``ReActAgent``), as Apache Flink
            Agents decided for its issue 985, instead of pydantic's own error.
    """
    inner = getattr(value, "output_schema", None)  # Flink Agents' OutputSchema wrapper
    if isinstance(inner, type) and issubclass(inner, BaseModel) and not isinstance(value, dict):
        value = inner
    if isinstance(value, type) and issubclass(value, BaseModel):
        try:
            schema = value.model_json_schema()
        except PydanticUserError as e:
            from ._errors import UsageError

            reason = str(e).split("\n", 1)[0]
            raise UsageError(
                f"output schema {value.__module__}.{value.__qualname__} has no JSON Schema "
                f"to give the model ({reason}): give its fields JSON types (str, int, float, "
                f"bool, lists, dicts, other pydantic models), or pass a JSON Schema dict"
            ) from None
        _OUTPUT_CLASSES.pop(value, None)  # the latest last (``output_classes_of``)
        _OUTPUT_CLASSES[value] = schema
        if len(_OUTPUT_CLASSES) > 256:
            del _OUTPUT_CLASSES[next(iter(_OUTPUT_CLASSES))]
        return schema
    return value


_OUTPUT_CLASSES: dict[type[BaseModel], dict[str, Any]] = {}
"""The pydantic classes given as output schemas in this process, with their JSON Schemas."""


def output_classes_of(schema: Any) -> list[type[BaseModel]]:
    """The pydantic classes given as output schemas (``json_schema_of``) whose schema is this.

    A class's validators and types say more than its JSON Schema (a ``field_validator``, a
    ``date`` field's format): the chat action checks a structured answer with them too.

    Args:
        schema: a JSON Schema.

    Returns:
        The classes, the one given last first (none for a schema no class was given for).
    """
    return [cls for cls, own in reversed(_OUTPUT_CLASSES.items()) if own == schema]


def event_type_of(trigger: type[Event] | str) -> str:
    """Return the routing type of an event class or an event type string.

    A built-in event's type as Apache Flink Agents spells it (``"_input_event"``,
    ``"_chat_response_event"``...) is that event's type here.

    Raises:
        TypeError: when ``trigger`` is neither an ``Event`` subclass nor a string, or is a
            blank string (no event has that type, so the action would never run).
    """
    if isinstance(trigger, str):
        if not trigger.strip():
            raise TypeError(f"an action trigger must name an event type, got {trigger!r} "
                            "(no event has a blank type, so the action would never run)")
        return FLINK_AGENTS_EVENT_TYPES.get(trigger, trigger)
    if isinstance(trigger, type) and issubclass(trigger, Event):
        return trigger.EVENT_TYPE or trigger.__qualname__
    raise TypeError(
        f"an action trigger must be an Event subclass or a type string, got {trigger!r}")


def _is_skeleton_of(cls: type[Event], known: type[Event] | None) -> bool:
    """Whether ``cls`` is an empty copy of ``known``, made as cloudpickle loads it again.

    cloudpickle builds a class it loads as an empty skeleton (no annotations of its own,
    so only the inherited fields), then fills the class it loaded first, if any, and throws
    the skeleton away. A class statement redefining a class with fields of its own is not
    one; one redefining it with none of its own is taken for one (it validates the same
    data), until an event of it is sent (``event_class_tag`` registers it then).

    Returns:
        True for such a skeleton of ``known``.
    """
    return known is not None and known is not cls and not cls.__dict__.get("__annotations__") \
        and set(cls.model_fields) <= set(known.model_fields)


def event_class_for(event_type: str) -> type[Event]:
    """Return the class registered for ``event_type``, or ``Event`` for ad-hoc types."""
    return _REGISTRY.get(event_type, Event)


def builtin_of(event: Event) -> Event:
    """A plain ``Event`` of a built-in event's type, as that event's class.

    Flink Agents' unified form of a built-in event, ``Event(type="_output_event",
    attributes={"output": x})`` (or with our name of the type), is the ``OutputEvent`` it
    describes: sent, it leaves the agent as an output; read from JSON, it is one.

    Args:
        event: an ``Event`` whose type is in ``BUILTIN_TYPE_NAMES``.

    Returns:
        The typed event, keeping its id and attributes (its payload in its fields).

    Raises:
        ValueError: when an ``InputEvent`` or ``OutputEvent`` so described has no
            ``input`` / ``output`` attribute (Flink Agents refuses it too).
    """
    cls = _REGISTRY[BUILTIN_TYPE_NAMES[event.type]]
    field = _BARE.get(cls)
    if field is not None and field not in event.attributes:
        raise ValueError(f"an Event of type {event.type!r} is an {cls.__name__} and needs its "
                         f"{field!r} attribute: Event(type={event.type!r}, attributes="
                         f"{{{field!r}: ...}}), or build {cls.__name__}({field}=...)")
    typed: Event = cls.from_event(event)
    return typed


def event_class_tag(event: Event) -> str | None:
    """What the JSON form of ``event`` must add to be rebuilt as its own class.

    Events are rebuilt as the class registered for their type, which is the last class
    defined with that type name. When two classes share it (two ``Ping`` events in two
    modules), the others need their class named (``EVENT_CLASS_KEY``).

    Returns:
        ``module:qualname`` of the event's class, or ``None`` when its type's class is it.
    """
    cls = type(event)
    registered = _REGISTRY.get(event.type)
    if registered is cls or (registered is None and cls is Event):  # rebuilt as it is
        return None
    name = f"{cls.__module__}:{cls.__qualname__}"
    if registered is not None and _BY_CLASS.get(name) is registered \
            and f"{registered.__module__}:{registered.__qualname__}" == name:
        # a copy of this very class registered after it (``_is_skeleton_of``): the class
        # sent is the live one, register it again
        _REGISTRY[event.type] = _BY_CLASS[name] = cls
        return None
    return name


class InputEvent(Event):
    """Starts a run: carries one input record.

    Attributes:
        input: the record as it arrived (JSON).
    """

    EVENT_TYPE: ClassVar[str] = BuiltinEventType("InputEvent")
    POSITIONAL: ClassVar[tuple[str, ...]] = ("input",)
    input: Any = None


class OutputEvent(Event):
    """An agent's result: ``output`` is emitted to the agent's output stream."""

    EVENT_TYPE: ClassVar[str] = BuiltinEventType("OutputEvent")
    POSITIONAL: ClassVar[tuple[str, ...]] = ("output",)
    output: Any = None


_BARE.update(bare_fields(Event, _OWN_FIELDS, InputEvent, OutputEvent))


class ChatRequestEvent(Event, defer_build=True):
    """Asks the chat model setup named ``model`` to answer ``messages``.

    Attributes:
        model: name of a ``CHAT_MODEL`` resource (a chat model setup).
        messages: the conversation so far.
        prompt_args: values for the setup's prompt ``{placeholders}``.
        output_schema: a JSON Schema the answer must follow (structured output). A pydantic
            model class, or Flink Agents' ``OutputSchema(output_schema=cls)``, is accepted
            and kept as its JSON Schema; the answer's ``structured`` value is then a dict.
    """

    EVENT_TYPE: ClassVar[str] = BuiltinEventType("ChatRequestEvent")
    POSITIONAL: ClassVar[tuple[str, ...]] = ("model", "messages", "prompt_args",
                                             "output_schema")
    model: str
    messages: list[ChatMessage] = Field(default_factory=list)
    prompt_args: dict[str, Any] | None = None
    output_schema: dict[str, Any] | None = None

    @field_validator("output_schema", mode="before")
    @classmethod
    def _schema_of_class(cls, value: Any) -> Any:
        return value if value is None or type(value) is dict else json_schema_of(value)


class ChatResponseEvent(Event, defer_build=True):
    """The final answer to a ``ChatRequestEvent`` (after any tool rounds).

    Attributes:
        request_id: id of the ``ChatRequestEvent`` this answers.
        response: the model's response when the chat succeeded.
        error: why the chat failed, when it did (``response`` is then ``None``).
        traceback: where it failed, when an exception did (a model call, a chat model's
            script): the original traceback, bounded and redacted.

    Known secrets in ``error`` and ``traceback`` are masked (``api.mask_secrets``).
    """

    EVENT_TYPE: ClassVar[str] = BuiltinEventType("ChatResponseEvent")
    POSITIONAL: ClassVar[tuple[str, ...]] = ("request_id", "response", "retry_count",
                                             "total_retry_wait_sec")
    request_id: str
    response: ChatResponse | None = None
    error: MaskedStr | None = None
    traceback: MaskedStr | None = None

    @model_validator(mode="before")
    @classmethod
    def _flink_agents_form(cls, data: Any) -> Any:
        # Apache Flink Agents builds it as (request_id, response: ChatMessage, retry_count,
        # total_retry_wait_sec): the message becomes a response, the counts attributes
        if not isinstance(data, dict):
            return data
        data = dict(data)
        response = data.get("response")  # a message, or its JSON form (``from_event``)
        if response.__class__ is dict and "role" in response or isinstance(response, ChatMessage):
            data["response"] = {"message": response}
        counts = {k: data.pop(k) for k in ("retry_count", "total_retry_wait_sec") if k in data} \
            if "retry_count" in data or "total_retry_wait_sec" in data else None
        if counts:
            data["attributes"] = {**(data.get("attributes") or {}), **counts}
        return data

    @property
    def retry_count(self) -> int:
        """Retries of the chat's model calls (Flink Agents' name; ``metadata["retries"]``)."""
        if "retry_count" in self.attributes:
            return int(self.attributes["retry_count"])
        return int(self.response.metadata.get("retries", 0)) if self.response else 0

    @property
    def total_retry_wait_sec(self) -> int:
        """Flink Agents' total wait between retries; 0 unless given (backoff is ours)."""
        return int(self.attributes.get("total_retry_wait_sec", 0))

    @property
    def is_success(self) -> bool:
        """Whether the chat succeeded (``error`` unset; Flink Agents' name)."""
        return self.error is None


# the tool events live in their own module; imported here so importing this one registers
# every built-in event type (an event class registers its type when it is defined)
from ._event_json import event_from_json  # noqa: E402,F401 - its home before it moved out
from ._tool_events import ToolRequestEvent, ToolResponseEvent  # noqa: E402
