"""Resources: chat model connections and setups, tools, prompts, MCP servers and sub-agents.

A resource is declared by a ``ResourceDescriptor`` naming its class by fully-qualified path
plus the arguments to build it with, so a plan stays data. The runtime builds each resource
once per operator instance, lazily, and hands it a resolver for the resources it names.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
import time
from collections.abc import Callable
from enum import Enum
from typing import TYPE_CHECKING, Any, ClassVar

from pydantic import BaseModel, ConfigDict, PrivateAttr, ValidationError, model_validator

from ._errors import ResourceError, UsageError
from ._secret_scrub import mask_credentials, mask_validation_error, scrub_exception
from ._secret_urls import register_plan_credentials
from ._secrets import cut_masked

if TYPE_CHECKING:
    from ._metric_groups import MetricGroup

__all__ = ["ResourceType", "ResourceDescriptor", "Resource", "import_qualified", "qualified_name"]


class ResourceType(str, Enum):
    """The kinds of resources an agent can declare."""

    CHAT_MODEL_CONNECTION = "chat_model_connection"
    CHAT_MODEL = "chat_model"
    TOOL = "tool"
    PROMPT = "prompt"
    MCP_SERVER = "mcp_server"
    AGENT = "agent"
    EMBEDDING_MODEL_CONNECTION = "embedding_model_connection"
    EMBEDDING_MODEL = "embedding_model"
    VECTOR_STORE = "vector_store"
    SKILLS = "tool"
    """Apache Flink Agents' type of a ``Skills`` resource: skills are tools here (an alias of
    ``TOOL``; ``compat.Agent`` wires them onto the setups naming them)."""


def resource_type_argument(resource_type: Any, type_: Any) -> ResourceType:
    """The resource type a ``get_resource`` call names.

    Given positionally, by ``resource_type=`` or by Flink Agents' ``type=``.

    Raises:
        TypeError: when it names none, or two different ones.
    """  # noqa: DOC201
    if resource_type is None:
        resource_type = type_
    elif type_ is not None and type_ != resource_type:
        raise TypeError(f"get_resource: resource_type={resource_type!r} and "
                        f"type={type_!r} differ")
    if resource_type is None:
        raise TypeError("get_resource needs the resource's type: get_resource(name, "
                        "ResourceType.TOOL) (or type=ResourceType.TOOL)")
    return ResourceType(resource_type)


def qualified_name(obj: Any) -> str:
    """Return ``module:qualname`` for a class or function (the plan's way to name code)."""
    return f"{obj.__module__}:{obj.__qualname__}"


def import_qualified(path: str) -> Any:
    """Import ``pkg.mod:Qual.name`` or ``pkg.mod.Class`` and return the object.

    Args:
        path: the qualified name.

    Returns:
        The object the path names.

    Raises:
        ResourceError: when the module or attribute cannot be found (names the path).
    """
    if ":" in path:
        module_name, _, qual = path.partition(":")
    else:
        module_name, _, qual = path.rpartition(".")
    if not module_name or not qual:
        raise ResourceError(f"{path!r} is not a fully-qualified name like 'pkg.module:function' "
                            "or 'pkg.module.Class'")
    obj: Any = _loaded_module(module_name)
    if obj is None:
        try:
            obj = importlib.import_module(module_name)
        except ImportError as e:
            theirs = ("; it is Apache Flink Agents' class, which has no counterpart here "
                      "(flink_agents_py.compat.ResourceName lists those offered)"
                      if module_name.startswith("flink_agents.") else "")
            raise ResourceError(f"cannot import module {module_name!r} for {path!r}: {e}"
                                f"{theirs}") from e
    for part in qual.split("."):
        if part == "<locals>":
            raise ResourceError(f"{path!r} is defined inside a function and cannot be imported")
        try:
            obj = getattr(obj, part)
        except AttributeError as e:
            found = _once_defined(obj, part)
            if found is not _UNDEFINED:
                obj = found
                continue
            starting = getattr(getattr(obj, "__spec__", None), "_initializing", False)
            raise ResourceError(
                f"{module_name!r} has no attribute path {qual!r}" + (
                    " yet: the module is still being imported (it runs a job at import "
                    "time?); put the job under `if __name__ == \"__main__\":`"
                    if starting else _near_attribute(obj, part))) from e
    return obj


def _near_attribute(obj: Any, name: str) -> str:
    """`` (did you mean 'script'?)`` for an attribute of ``obj`` close to the missing ``name``."""
    import difflib  # (an error's path only)

    public = [n for n in dir(obj) if not n.startswith("_")]
    near = difflib.get_close_matches(name, public, n=1, cutoff=0.6)
    return f" (did you mean {near[0]!r}?)" if near else ""


_UNDEFINED = object()
IMPORT_WAIT_S = 5.0
"""How long ``import_qualified`` waits for a module another thread is importing to define
what it looks up, in s."""


def _once_defined(module: Any, name: str) -> Any:
    """``module.name`` once the module, still being imported, defines it (``_UNDEFINED``).

    ``_loaded_module`` hands back a module that is still being imported, and another thread
    may be importing it right now (two chats of one worker resolving ``"offline_model:answer"``
    at once: the second found the module half run, without ``answer`` yet, and failed). So
    while the module is still being imported, ``name`` is looked for again until it is
    there, the import has ended, or ``IMPORT_WAIT_S`` has passed (a script that runs its job
    at import time and defines ``name`` after it: it never comes).

    Returns:
        The attribute, or ``_UNDEFINED``.
    """
    deadline = time.monotonic() + IMPORT_WAIT_S
    while getattr(getattr(module, "__spec__", None), "_initializing", False) \
            and time.monotonic() < deadline:
        time.sleep(0.005)
        found = getattr(module, name, _UNDEFINED)
        if found is not _UNDEFINED:
            return found
    return getattr(module, name, _UNDEFINED)


def _loaded_module(name: str) -> Any:
    """The module ``name`` when importing it again would run a job twice or deadlock.

    Two cases, both of a script that runs its job at import time and names its own functions
    (``"my_script:fn"``): the module is still being imported (by this thread or another: an
    import from another thread would wait for the import, which waits for the job), or the
    script runs as ``__main__`` (an import would run it a second time).

    Returns:
        That module, or ``None`` when an import is the way to get it.
    """
    module = sys.modules.get(name)
    if module is not None:
        starting = getattr(getattr(module, "__spec__", None), "_initializing", False)
        return module if starting else None
    main = sys.modules.get("__main__")
    if getattr(getattr(main, "__spec__", None), "name", None) == name:
        return main  # ``python -m name``: an import would run it a second time
    main_file = getattr(main, "__file__", None)
    if main_file is None:
        return None
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return None
    origin = getattr(spec, "origin", None)
    if origin and os.path.realpath(origin) == os.path.realpath(main_file):
        return main  # the script itself, run as ``python my_script.py``
    return None


def _not_a_class(clazz: Any) -> str:
    """Why ``clazz`` cannot be a ``ResourceDescriptor``'s class, and what to give instead."""
    head = "ResourceDescriptor needs the resource's class"
    how = ("ResourceDescriptor(MyChatModel, model='...') or ResourceDescriptor("
           "clazz='my_app.models.MyChatModel', model='...')")
    if clazz is None or isinstance(clazz, str):
        return f"{head} (none was given): {how}"
    if isinstance(clazz, BaseModel) or callable(getattr(type(clazz), "build", None)):
        kind = type(clazz).__name__
        return (f"{head}, got an instance of {kind}: give the class {kind} itself and its "
                f"fields as keywords ({how})")
    return f"{head}, got {type(clazz).__name__} {cut_masked(repr(clazz), 80)}: {how}"


class ResourceDescriptor(BaseModel):
    """Names a resource class and the arguments to build it with.

    ``ResourceDescriptor(clazz="my_app.models.MyConnection", base_url="http://...")``: every
    keyword other than ``clazz`` is an argument of the class (a pydantic field of it).

    Attributes:
        clazz: fully-qualified class path (``pkg.module.Class``); a class object is accepted
            and turned into its path.
        arguments: the keyword arguments for the class.
    """

    model_config = ConfigDict(frozen=True)

    clazz: str
    arguments: dict[str, Any] = {}

    def __init__(self, clazz: str | type | None = None, /, **kwargs: Any) -> None:
        if clazz is None:
            clazz = kwargs.pop("clazz", None)
        if clazz is None and "target_clazz" in kwargs:
            # Apache Flink Agents' other form: the module and the class name apart
            module, name = kwargs.pop("target_module", None), kwargs.pop("target_clazz")
            clazz = f"{module}.{name}" if module else name
        # arguments={...} and keyword arguments merge, as in Flink Agents; one named in both
        # with two values is an error
        arguments = dict(kwargs.pop("arguments", None) or {})
        clash = sorted(k for k in kwargs if k in arguments and arguments[k] != kwargs[k])
        if clash:
            raise TypeError(f"ResourceDescriptor: {clash} given in arguments={{...}} and as "
                            f"keywords, with different values")
        arguments.update(kwargs)
        if isinstance(clazz, type):
            clazz = f"{clazz.__module__}.{clazz.__qualname__}"
        elif not isinstance(clazz, str) or not clazz.strip():
            raise UsageError(_not_a_class(clazz))
        elif clazz.startswith("flink_agents."):  # Apache Flink Agents' path of a class of it
            from ._names import flink_agents_class

            clazz = flink_agents_class(clazz)
        # a credential in a URL or a command line (``url=".../mcp?token=..."``) is a secret
        # from now on, in every process that makes the descriptor (``_secret_urls``)
        register_plan_credentials(arguments, f"the arguments of {clazz}")
        super().__init__(clazz=clazz, arguments=arguments)

    def __repr_args__(self) -> Any:
        """The fields ``repr``/``str`` show: credentials in ``arguments`` masked.

        Yields:
            ``(name, shown value)`` pairs.
        """
        for name, value in super().__repr_args__():
            yield name, mask_credentials(value, name)

    @property
    def target_module(self) -> str:
        """The module of ``clazz`` (Apache Flink Agents' name)."""
        return self.clazz.replace(":", ".").rpartition(".")[0]

    @property
    def target_clazz(self) -> str:
        """The class name of ``clazz`` (Apache Flink Agents' name)."""
        return self.clazz.replace(":", ".").rpartition(".")[2]

    def build(self) -> Resource:
        """Import ``clazz`` and construct it with ``arguments``.

        Returns:
            The resource.

        Raises:
            ResourceError: when the class cannot be imported, is not a ``Resource``, or rejects
                the arguments (the message names the class and the pydantic errors).
        """
        cls = import_qualified(self.clazz)
        if not (isinstance(cls, type) and issubclass(cls, Resource)):
            raise ResourceError(f"{self.clazz!r} is not a Resource subclass")
        try:
            return cls(**self.arguments)
        except Exception as e:
            raise ResourceError(f"cannot build {self.clazz} from its descriptor: {e}"
                                ) from scrub_exception(e)


class Resource(BaseModel):
    """Base of every resource class.

    Subclasses declare their configuration as pydantic fields and set ``RESOURCE_TYPE``.
    Resources are shared by all keys of an operator instance and may be called from several
    threads of the I/O executor at once: guard state that is not thread-safe.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True, extra="forbid")

    RESOURCE_TYPE: ClassVar[ResourceType]

    _resolver: Callable[[str, ResourceType], Resource] | None = PrivateAttr(default=None)
    _resource_name: str = PrivateAttr(default="")
    _metric_group: MetricGroup | None = PrivateAttr(default=None)
    _context: Any = PrivateAttr(default=None)

    def __init__(self, /, **data: Any) -> None:
        """Validate ``data`` into the fields; a rejected credential is not quoted.

        A credential in a URL or a command line among ``data`` (``url=".../mcp?token=..."``)
        is registered as a secret first (``api._secret_urls``). ``resource_context=`` (an
        object with ``get_resource(name, type)``) is Apache Flink Agents' way to build a
        resource outside an agent, as its own tests build a setup with a mocked context:
        the resource then finds the resources it names there (see ``resource_context``).

        Raises:
            ValidationError: pydantic's, with the inputs it quotes masked (an ``api_key``
                given where the class takes none: ``api.internal.mask_validation_error``).
        """
        context = data.pop("resource_context", None)
        register_plan_credentials(data, f"a {type(self).__name__}")  # see ResourceDescriptor
        try:
            super().__init__(**data)
        except ValidationError as e:
            masked = mask_validation_error(e)
        else:
            if context is not None:
                self._context = context
                self._resolver = lambda name, kind: context.get_resource(name, kind)
            return
        raise masked  # outside the except block: the unmasked error is not its context

    def __repr_args__(self) -> Any:
        """The fields ``repr``/``str`` show, masked.

        Credentials (``headers``' ``Authorization``, ``env``'s ``GITHUB_TOKEN``) and known
        secrets are masked; the values stay as they are.

        Yields:
            ``(name, shown value)`` pairs.
        """
        for name, value in super().__repr_args__():
            yield name, mask_credentials(value, name)

    @classmethod
    def __pydantic_init_subclass__(cls, **kwargs: Any) -> None:
        super().__pydantic_init_subclass__(**kwargs)
        if "resource_type" in cls.__dict__ and "RESOURCE_TYPE" not in cls.__dict__:
            # a resource class written for Apache Flink Agents names its type with a
            # ``resource_type()`` classmethod
            cls.RESOURCE_TYPE = ResourceType(cls.resource_type())

    @classmethod
    def resource_type(cls) -> ResourceType:
        """The class's ``ResourceType`` (``RESOURCE_TYPE``; Flink Agents' classmethod).

        A subclass may define it instead of ``RESOURCE_TYPE``, as Flink Agents' resources do.

        Returns:
            The resource type.
        """
        return cls.RESOURCE_TYPE

    @model_validator(mode="after")
    def _check_type(self) -> Resource:
        if not hasattr(type(self), "RESOURCE_TYPE"):
            raise ValueError(f"{type(self).__name__} must set RESOURCE_TYPE (or define the "
                             f"resource_type() classmethod)")
        return self

    def bind(self, resolver: Callable[[str, ResourceType], Resource], name: str = "") -> None:
        """Give the resource its registered name and a way to find the resources it names.

        Called by the runtime when it builds the resource.
        """
        self._resolver = resolver
        self._resource_name = name

    @property
    def metric_group(self) -> MetricGroup | None:
        """The resource's metric group (Apache Flink Agents' name).

        The runtime gives each resource it builds the agent's group ``resource.<name>``;
        ``None`` until then.
        """
        return self._metric_group

    def set_metric_group(self, metric_group: MetricGroup) -> None:
        """Bind the metric group ``metric_group`` returns (Apache Flink Agents' method)."""
        self._metric_group = metric_group

    @property
    def resource_name(self) -> str:
        """The name the resource is registered under ('' until the runtime binds it)."""
        return self._resource_name

    @property
    def resource_context(self) -> Any:
        """What Apache Flink Agents' resources call ``get_resource`` on.

        Its resources find the resources they name with
        ``self.resource_context.get_resource(name, type)`` (``api/resource.py``, 0.3.1: every
        ``Resource`` has one; a custom embedding setup or vector store written that way
        failed here with an ``AttributeError`` before this port found it, only chat model
        setups had it). It is the ``resource_context=`` the resource was built with, else
        the resource itself (whose ``get_resource`` looks in its agent's environment).
        """
        return self if self._context is None else self._context

    def get_resource(self, name: str, resource_type: ResourceType | None = None, *,
                     type: ResourceType | None = None) -> Resource:  # noqa: A002 - theirs
        """Return another resource of the same environment.

        Args:
            name: its registered name.
            resource_type: its type (``type=`` is Flink Agents' keyword for it).
            type: the same as ``resource_type``.

        Raises:
            ResourceError: when the resource was not bound to an environment.
            ResourceNotFoundError: when nothing of that type has that name.
        """
        kind = resource_type_argument(resource_type, type)
        if self._resolver is None:
            raise ResourceError(
                f"{self.__class__.__name__} is not bound to a resource environment")
        return self._resolver(name, kind)

    def check(self) -> None:
        """Check, without acquiring anything, that the resource can work in this process.

        Called once per declared resource whose class overrides it, when the operator opens
        (before the first record; the resource is bound, not opened): a configuration that
        cannot work (e.g. an API key missing from the environment) then stops the job with
        one clear error instead of failing every record. The default checks nothing.

        Raises:
            AgentsError: a subclass naming what is missing (e.g. ``MissingApiKeyError``).
        """

    def open(self) -> None:
        """Acquire what the resource needs (connections, model files). Called once, lazily."""

    def close(self) -> None:
        """Release what ``open`` acquired. Called when the operator closes."""
