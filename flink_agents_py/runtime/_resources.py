"""The resource environment: builds each declared resource once per operator instance."""

from __future__ import annotations

import threading
from typing import Any

from ..api import (
    MissingApiKeyError,
    Resource,
    ResourceNotFoundError,
    ResourceType,
)
from ..api.internal import (
    agent_metric_group,
    import_qualified,
    register_resource_secrets,
    scrub_exception,
)
from ..plan import AgentPlan, ResourcePlan

__all__ = ["ResourceEnvironment", "check_resources", "warm_up"]


class ResourceEnvironment:
    """Resources of one plan, built lazily on first ``get`` and shared by every key.

    Thread-safe: actions on the operator thread and calls on the I/O executor may ask at once.

    An internal sub-agent's environment falls back to its parent's (as in Flink Agents): a
    name it does not declare of a type is its parent's resource of that name (or its
    parent's parent's...), the one instance the parent uses, opened (and closed) by the
    parent's environment. Sub-agents themselves (``AGENT``) are not looked up there: a
    sub-agent is invoked by a name of the plan it runs in.

    Args:
        plan: the plan whose resources these are.
        parallelism: the number of parallel subtasks running the agent (the host sets it:
            an agent budget's share is ``1/parallelism``).
        parent: the parent agent's environment (an internal sub-agent's), or ``None``.
        path: sub-agent names from the root plan to ``plan`` (``()``: the agent's).
    """

    def __init__(self, plan: AgentPlan, parallelism: int = 1,
                 parent: ResourceEnvironment | None = None, path: tuple[str, ...] = ()) -> None:
        self._plan = plan
        self.parallelism = parallelism
        self.parent = parent
        self.path = path
        self._built: dict[tuple[ResourceType, str], Resource] = {}
        self._checked: dict[tuple[ResourceType, str], Resource] = {}  # built, bound, not open
        self._lock = threading.RLock()

    def get(self, name: str, resource_type: ResourceType) -> Resource:
        """Return the resource, building and opening it on first use.

        The secrets it declares (``api_key_env``, ``secret_env``, ``secret_headers``: see
        ``api._secret_fields.register_resource_secrets``) are registered when it is built, so they
        are masked whatever its class does with them.

        A resource whose ``open`` raises is closed (best effort) before the error goes on,
        so what it had started (a server process, a client) is released; the next ``get``
        builds and opens it again. The error goes on with the known secrets it carries
        masked in place (``scrub_exception``: everything it holds, its cause chain too), or
        as a masked copy of it when it cannot be changed.

        A name this plan does not declare is looked up in the parent's environment (a
        sub-agent's), outside this environment's lock.

        Raises:
            ResourceNotFoundError: naming the type and name, and what is declared of that type
                (a sub-agent's: where it was looked up).
            ResourceError: when the descriptor cannot be built.
        """
        k = (resource_type, name)
        res = self._built.get(k)
        if res is not None:
            return res
        owner = self.owner(name, resource_type)
        if owner is not self:
            return owner.get(name, resource_type)
        with self._lock:
            res = self._built.get(k)
            if res is not None:
                return res
            bucket = self._plan.resources.get(resource_type, {})
            rp = bucket.get(name)
            if rp is None:
                raise ResourceNotFoundError(self._not_found(name, resource_type))
            res = self._checked.pop(k, None)
            if res is None:
                res = self._built_new(rp, name)
            try:
                res.open()
            except BaseException as e:
                _close_quietly(res)  # a half-opened resource (a started server) is released
                error = scrub_exception(e)  # its text and cause chain go on without secrets
                if error is e:
                    raise
            else:
                self._built[k] = res
                return res
            raise error  # a masked copy, raised outside the handler: not linked to e

    def owner(self, name: str, resource_type: ResourceType) -> ResourceEnvironment:
        """The environment whose plan declares ``name`` of ``resource_type``.

        Returns:
            This one when its plan declares it (or when no ancestor does: ``get`` reports
            it), else the nearest ancestor's that does.
        """
        env: ResourceEnvironment | None = self
        while env is not None:
            if name in env._plan.resources.get(resource_type, {}):
                return env
            env = env.parent if resource_type is not ResourceType.AGENT else None
        return self

    def _not_found(self, name: str, resource_type: ResourceType) -> str:
        """Why ``name`` of ``resource_type`` is not found.

        Returns:
            What each plan looked in declares, and the other types ``name`` is declared as
            (``ctx.chat`` naming a connection, which that message used to leave out).
        """
        return (self._looked_in(name, resource_type) + self._near(name, resource_type)
                + self._declared_as(name, resource_type))

    def _near(self, name: str, resource_type: ResourceType) -> str:
        """``; did you mean 'llm'?`` for a declared name of the type close to ``name``."""
        import difflib  # (an error's path only)

        env: ResourceEnvironment | None = self
        known: set[str] = set()
        while env is not None:
            known.update(env._plan.resources.get(resource_type, {}))
            env = None if resource_type is ResourceType.AGENT else env.parent
        near = difflib.get_close_matches(name, sorted(known), n=1, cutoff=0.6)
        return f"; did you mean {near[0]!r}?" if near else ""

    def _declared_as(self, name: str, resource_type: ResourceType) -> str:
        env: ResourceEnvironment | None = self
        kinds: list[str] = []
        while env is not None:
            kinds += [t.value for t, found in env._plan.resources.items()
                      if name in found and t is not resource_type and t.value not in kinds]
            env = env.parent
        if not kinds:
            return ""
        hint = (": ctx.chat and ChatRequestEvent name a chat model setup (ChatModelSetup), "
                "which names its connection" if resource_type is ResourceType.CHAT_MODEL
                and ResourceType.CHAT_MODEL_CONNECTION.value in kinds else "")
        return f"; {name!r} is declared as a {' and a '.join(kinds)} resource{hint}"

    def _looked_in(self, name: str, resource_type: ResourceType) -> str:
        if self.parent is None or resource_type is ResourceType.AGENT:
            known = ", ".join(sorted(self._plan.resources.get(resource_type, {}))) or "none"
            return f"no {resource_type.value} resource named {name!r} (declared: {known})"
        where: list[str] = []
        env: ResourceEnvironment | None = self
        while env is not None:
            known = ", ".join(sorted(env._plan.resources.get(resource_type, {}))) or "none"
            who = f"sub-agent {'/'.join(env.path)!r}" if env.path else "the agent"
            where.append(f"{who} declares: {known}")
            env = env.parent
        return (f"no {resource_type.value} resource named {name!r} in sub-agent "
                f"{'/'.join(self.path)!r} or the agents above it ({'; '.join(where)})")

    def _built_new(self, rp: ResourcePlan, name: str) -> Resource:
        res = rp.build()
        res.bind(self.get, name)
        res.set_metric_group(agent_metric_group(self._plan.agent).get_sub_group("resource")
                             .get_sub_group(name))
        register_resource_secrets(res)
        return res

    def check(self) -> None:
        """Run ``Resource.check`` of every declared resource whose class overrides it.

        Each such resource is built and bound now (kept, and opened on first ``get``);
        nothing is opened. A class that cannot be imported is skipped here (``get`` reports
        it when the resource is used), and so is a model connection no declared resource
        names as its ``connection`` (a program declaring every provider and using the one
        it is configured for, as Flink Agents' examples do): it is checked when first used.

        Raises:
            AgentsError: the first failed check (e.g. ``MissingApiKeyError``).
        """
        named = _named_connections(self._plan)
        for rtype, bucket in self._plan.resources.items():
            for name, rp in bucket.items():
                if rtype in _CONNECTIONS and name not in named:
                    continue
                if not _checks(rp):
                    continue
                k = (rtype, name)
                with self._lock:
                    res = self._built.get(k) or self._checked.get(k)
                    if res is None:
                        res = self._built_new(rp, name)
                        self._checked[k] = res
                try:
                    res.check()
                except BaseException as e:
                    error = scrub_exception(e)  # a check quoting the key it read: masked
                    if error is e:
                        raise
                else:
                    continue
                raise error  # a masked copy, raised outside the handler: not linked to e

    def built(self, resource_type: ResourceType) -> list[tuple[str, Resource]]:
        """The resources of ``resource_type`` built so far, with their names."""
        with self._lock:
            return [(name, res) for (rtype, name), res in self._built.items()
                    if rtype is resource_type]

    def untyped_message(self, name: str) -> str:
        """Why ``get_resource(name)`` without a type is refused, with the type to give.

        Returns:
            The types ``name`` is declared as here or in an enclosing plan, each written as
            the call to make, else the declared name closest to it (of any type).
        """
        import difflib  # (an error's path only)

        kinds: list[ResourceType] = []
        known: set[str] = set()
        env: ResourceEnvironment | None = self
        while env is not None:
            for rtype, found in env._plan.resources.items():
                known.update(found)
                if name in found and rtype not in kinds:
                    kinds.append(rtype)
            env = env.parent
        said = f"get_resource({name!r}) needs the resource's type"
        if kinds:
            calls = " or ".join(f"get_resource({name!r}, ResourceType.{k.name})" for k in kinds)
            return f"{said}: {name!r} is declared as a {kinds[0].value} resource: write {calls}"
        near = difflib.get_close_matches(name, sorted(known), n=1, cutoff=0.6)
        return (f"{said}, get_resource(name, ResourceType.X) (or type=ResourceType.X); no "
                f"resource is named {name!r}" + (f" (did you mean {near[0]!r}?)" if near else
                                                f" (declared: {', '.join(sorted(known))})"
                                                if known else ""))

    def names(self, resource_type: ResourceType) -> list[str]:
        """Declared names of ``resource_type``."""
        return list(self._plan.resources.get(resource_type, {}))

    def close(self) -> None:
        """Close every built resource (errors are ignored; closing is best effort)."""
        with self._lock:
            built, self._built = self._built, {}
        for res in built.values():
            _close_quietly(res)

    def __getstate__(self) -> dict[str, Any]:  # built resources never travel
        return {"_plan": self._plan, "parent": self.parent, "path": self.path}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["_plan"], parent=state.get("parent"),  # type: ignore[misc]
                      path=state.get("path", ()))


def _close_quietly(res: Resource) -> None:
    """Close ``res``, ignoring its errors (closing is best effort)."""
    try:
        res.close()
    except Exception:  # noqa: BLE001
        pass


_CONNECTIONS = (ResourceType.CHAT_MODEL_CONNECTION, ResourceType.EMBEDDING_MODEL_CONNECTION)


def _named_connections(plan: AgentPlan) -> set[str]:
    """The names the plan's resources give as their ``connection``.

    Args:
        plan: the agent's plan.

    Returns:
        Each ``connection`` argument (or attribute, of a resource declared as an instance),
        of its internal sub-agents' resources too (they may name the plan's connections).
    """
    named: set[str] = set()
    for sub in plan.subagents.values():
        named |= _named_connections(sub)
    for bucket in plan.resources.values():
        for rp in bucket.values():
            inst = rp._instance
            conn = (getattr(inst, "connection", None) if inst is not None
                    else rp.descriptor.arguments.get("connection"))
            if isinstance(conn, str):
                named.add(conn)
    return named


def _checks(rp: ResourcePlan) -> bool:
    """Whether the resource's class overrides ``Resource.check``.

    Args:
        rp: the resource's plan.

    Returns:
        Whether it has a check (``False`` for a class that cannot be imported: ``get``
        reports that).
    """
    inst = rp._instance
    if inst is not None:
        cls: Any = type(inst)
    else:
        try:
            cls = import_qualified(rp.descriptor.clazz)
        except Exception:  # noqa: BLE001 - reported when the resource is used
            return False
    return isinstance(cls, type) and issubclass(cls, Resource) and cls.check is not Resource.check


def check_resources(plan: AgentPlan,
                    envs: dict[tuple[str, ...], ResourceEnvironment] | None = None,
                    path: tuple[str, ...] = ()) -> None:
    """Run the resource checks of ``plan`` and of every internal sub-agent's plan.

    The operator does this when it opens (``AgentCore.open``); a host may also call it
    before submitting a job, where the workers' environment is the driver's (a MiniCluster).

    Args:
        plan: the plan (of the sub-agent at ``path``).
        envs: resource environments by sub-agent path, reused and filled in (``None``: new
            ones, dropped after the check).
        path: sub-agent names from the root plan to ``plan``.

    Raises:
        AgentsError: the first failed check.
        MissingApiKeyError: when a key is missing; one of a sub-agent's resource names the
            sub-agent (``sub-agent 'advisor': ...``).
    """
    envs = {} if envs is None else envs
    env = envs.get(path)
    if env is None:
        root = envs.get(())
        env = envs[path] = ResourceEnvironment(plan, root.parallelism if root else 1,
                                               parent=envs.get(path[:-1]) if path else None,
                                               path=path)
    try:
        env.check()
    except MissingApiKeyError as e:
        if not path:
            raise
        raise MissingApiKeyError(f"sub-agent {'/'.join(path)!r}: {e}", env_var=e.env_var,
                                 resource=e.resource) from None
    for name, child in plan.subagents.items():
        check_resources(child, envs, (*path, name))


def warm_up(plan: AgentPlan) -> None:
    """Import now, when the host opens, what the first run of each key would wait for.

    A plan (always, on Flink: it travels as JSON) imports its action functions on first
    use. Done lazily, those imports took 50-200 ms once per process (more on a busy
    machine), inside the first runs: with scripted models each key's first run took about
    190 ms, later ones 17-40 ms. Done here they are part of the start-up and a run's latency
    is its own.

    ``jsonschema``, which validates structured answers, is not imported here: its import
    (70-80 ms of CPU) would be paid at every open, on the operator's thread, by every job,
    while only a job whose chats ask for structured output needs it, once per process, after
    a model call that takes longer than the import.

    Best effort: a function that cannot be imported is left to fail its action, with the
    error and the record, as it would have.

    Args:
        plan: the agent's plan; its sub-agents' plans are warmed up too.
    """
    for action in plan.actions.values():
        try:
            action.function.resolve()
        except Exception:  # noqa: BLE001, S112 - reported when the action runs
            continue
    for sub in plan.subagents.values():
        warm_up(sub)
