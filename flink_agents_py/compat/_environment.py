"""Flink Agents' ``AgentsExecutionEnvironment`` shape, over our local and Flink environments.

What a Flink Agents program does with its environment, and what it does here:

- ``get_execution_environment()`` (no ``env``): our local runner;
  ``get_execution_environment(env)``: our Flink host over that ``StreamExecutionEnvironment``.
- ``add_resource(name, [type,] resource)``: a resource given to every agent applied
  afterwards (an agent's own resource of the same name and type wins).
- ``get_config().set(option, value)`` (or ``get_configuration()``): see ``_options`` for
  what each Flink Agents option does here (``NUM_ASYNC_THREADS`` is our ``max_in_flight``,
  other keys reach every agent applied afterwards).
- ``load_yaml(path)`` then ``apply("agent name")``: agents declared in YAML.
- local: ``from_list([{"key": k, "value": v}, ...]).apply(agent).to_list()``, then
  ``execute()`` fills that list with ``{key: output}`` dicts. As in Flink Agents, ``"k"``
  and ``"v"`` may stand for ``"key"`` and ``"value"``, and a record without a key runs
  under a key of its own (a new UUID text); a record without a value (or not a dict) is an
  error row naming its position.
- Flink: ``from_datastream(input=ds, key_selector=...).apply(agent).to_datastream()``, then
  ``execute()``.
- Error rows (an action that raised, a record without a value, a key with no encoding): a
  Flink Agents program has no way to read them, and Flink Agents fails the run at the
  first; here each is logged at WARNING as it comes, the other records run, and
  ``execute()`` raises ``UnreadErrorsError`` naming them at the end (on Flink: on a local
  MiniCluster, unless the program took ``errors_datastream()``, ours; a cluster's job logs
  them in its TaskManagers' logs).
"""

from __future__ import annotations

import copy
import logging
import os
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..api import (
    Agent,
    AgentAlreadyAppliedError,
    DuplicateNameError,
    InputEvent,
    ResourceDescriptor,
    ResourceType,
    UsageError,
)
from ..api.internal import import_qualified
from ..observability import ApacheEventLog
from ..observability.internal import APACHE_KEYS
from ..plan import OBSERVED_EVENTS, RUNS_FIRST
from ._listeners import ListenersObserver
from ._memory_events import (
    AgentRunBeginEvent,
    SensoryWriteEvent,
    ShortTermWriteEvent,
    send_run_begin,
)
from ._options import AgentConfigOptions, AgentExecutionOptions, Configuration, _truthy
from ._outputs import json_form_outputs

log = logging.getLogger(__name__)

__all__ = ["AgentsExecutionEnvironment"]


def _type_of(resource: Any) -> ResourceType:
    """The type of a resource given without one (its class's ``RESOURCE_TYPE``)."""
    from ..api import Resource, ResourceDescriptor
    from ..api.internal import import_qualified

    cls = type(resource)
    if isinstance(resource, ResourceDescriptor):
        cls = import_qualified(resource.clazz)
    rtype = getattr(cls, "RESOURCE_TYPE", None)
    if isinstance(rtype, ResourceType):
        return rtype
    if callable(resource) and not isinstance(resource, Resource):
        return ResourceType.TOOL
    raise TypeError(f"cannot tell the resource type of {resource!r}: pass it, "
                    f"add_resource(name, ResourceType.X, resource)")


def _declared_type(name: str, given: ResourceType | Any, resource: Any) -> Any:
    """The type to register ``resource`` under: its class's, when ``given`` contradicts it.

    Flink Agents' RAG example registers its chat model connection as ``EMBEDDING_MODEL``;
    the class says what the resource is, so it is registered as that (with a warning), and
    the setups naming it find it.

    Returns:
        The resource type to register under.
    """
    try:
        own = _type_of(resource)
    except Exception:  # noqa: BLE001 - an unknown class is reported when the plan is built
        return given
    if isinstance(given, ResourceType) and own is not given and own is not ResourceType.TOOL:
        log.warning("add_resource(%r, %s, ...): the resource is a %s (its class says so); "
                    "registered as that", name, given.name, own.name)
        return own
    return given


class _Environment:
    """What both environments share: resources, configuration, YAML agents."""

    def __init__(self) -> None:
        self._resources: list[tuple[ResourceType, str, Any]] = []
        self._agents: dict[str, Agent] = {}
        self._config = Configuration(self._configured)

    def _configured(self, key: str, value: Any) -> None:
        if key == AgentExecutionOptions.NUM_ASYNC_THREADS.key:
            self._target.max_in_flight = int(value)
        elif key == AgentConfigOptions.EVENT_LISTENERS.key:  # Flink Agents' event listeners
            target = self._target
            target.options = target.options.replace(
                observer=ListenersObserver(value) if value else None)
        elif key.startswith(APACHE_KEYS):  # Apache's file event log (``ApacheEventLog``)
            target = self._target
            target.options = target.options.replace(
                apache_event_log=ApacheEventLog.from_config(self._config.values()))

    @property
    def _target(self) -> Any:
        """The wrapped environment (each concrete environment of this module provides it)."""
        raise NotImplementedError(f"{type(self).__name__} must provide _target (a hook method)")

    def get_config(self, path: str | Path | None = None) -> Configuration:
        """The environment's configuration; ``set(...)`` on it configures the environment.

        Args:
            path: a Flink configuration file whose ``agent:`` section is loaded first.

        Returns:
            The configuration (see ``compat._options`` for what each option does here).
        """
        if path is not None:
            self._config.load_yaml(path)
        return self._config

    get_configuration = get_config
    """Flink Agents' other name of ``get_config``."""

    @property
    def resources(self) -> dict[ResourceType, dict[str, Any]]:
        """The resources given so far, by type and name (Flink Agents' read-only view)."""
        found: dict[ResourceType, dict[str, Any]] = {t: {} for t in ResourceType}
        for rtype, name, value in self._resources:
            found[rtype][name] = value
        return found

    def add_resource(self, name: str, resource_type: ResourceType | Any,
                     instance: Any = None) -> _Environment:
        """Give a resource to every agent applied afterwards.

        Args:
            name: the resource's name.
            resource_type: its ``ResourceType``; or the resource itself (the type is then
                its class's), with ``instance`` left out.
            instance: the ``ResourceDescriptor``, resource or function.

        Returns:
            This environment, for chaining.

        Raises:
            DuplicateNameError: (a ``ValueError``, as in Flink Agents) when a resource of
                this type and name was given already.
        """
        if instance is None:
            resource_type, instance = _type_of(resource_type), resource_type
        else:
            resource_type = _declared_type(name, resource_type, instance)
        if any(t is resource_type and n == name for t, n, _ in self._resources):
            raise DuplicateNameError(
                f"{resource_type.value} {name!r} already defined on this environment: give "
                "each resource of a type a name of its own")
        self._resources.append((resource_type, name, instance))
        return self

    def load_yaml(self, paths: Any) -> _Environment:
        """Load the agents declared in YAML documents; ``apply("name")`` picks one.

        Args:
            paths: the YAML file, or a list of them (Flink Agents' ``paths``; a list was
                taken for one path before).

        Returns:
            This environment, for chaining.

        Raises:
            YamlError: naming every problem of the document.
            DuplicateNameError: (a ``ValueError``, as in Flink Agents) naming an agent a
                document declares when one of that name was loaded already (the same file
                loaded twice, or two files declaring one name): the second replaced the
                first without a word before the port of Flink Agents' loader tests found it.
        """
        from ..yaml import load_agents

        for path in paths if isinstance(paths, (list, tuple)) else [paths]:
            loaded = load_agents(path)
            again = sorted(set(loaded) & set(self._agents))
            if again:
                raise DuplicateNameError(
                    f"agent(s) {', '.join(map(repr, again))} of {str(path)!r} already loaded on "
                    "this environment: give each agent a name of its own, or load each file "
                    "once")
            self._agents.update(loaded)
        return self

    def _agent(self, agent: Agent | str) -> Agent:
        """``agent`` (or the YAML agent so named) with the environment's resources."""
        if isinstance(agent, str):
            if agent not in self._agents:
                raise _UnknownAgentError(f"no agent named {agent!r} was loaded (load_yaml "
                                         f"first); loaded: {sorted(self._agents) or 'none'}")
            agent = self._agents[agent]
        config, chat = self._config.agent_config(), self._config.chat_defaults()
        if not (self._resources or config or chat):
            return agent
        # events Flink Agents sends whether an action takes them or not (for its event log
        # and listeners): routed here, to no action when none takes them
        observed = [ShortTermWriteEvent.EVENT_TYPE, SensoryWriteEvent.EVENT_TYPE] \
            if self._target.options.apache_event_log or self._target.options.observer else []
        begin = _truthy(config.get(AgentExecutionOptions.AGENT_RUN_BEGIN_EVENT.key))
        if observed or begin:
            config[OBSERVED_EVENTS] = observed + [AgentRunBeginEvent.EVENT_TYPE] * begin
        declared = {(t, n) for t, n, _ in agent.declared_resources()}
        merged = copy.copy(agent)
        merged._actions = list(getattr(agent, "_actions", []))
        if begin:  # an action of ours (Flink Agents' name of it) sends it, before the agent's own
            merged.add_action("agent_run_begin_action", [InputEvent], send_run_begin,
                              {RUNS_FIRST: True})
        merged._resources = list(getattr(agent, "_resources", [])) + [
            r for r in self._resources if (r[0], r[1]) not in declared]
        merged._config = {**config, **getattr(agent, "_config", {})}
        merged._overrides = dict(getattr(agent, "_overrides", {}))
        if chat:
            for rtype, name, res in merged.declared_resources():
                given = _with_chat_defaults(res, chat) if rtype is ResourceType.CHAT_MODEL \
                    else None
                if given is not None:
                    merged.override_resource(name, given, ResourceType.CHAT_MODEL)
        return merged


def _with_chat_defaults(res: Any, chat: dict[str, Any]) -> ResourceDescriptor | None:
    """A chat model setup's descriptor with the environment's defaults for what it leaves out.

    Returns:
        The new descriptor; ``None`` when nothing is left out, or ``res`` is not a descriptor
        of one of our setups (a setup with its own ``chat`` has no error policy of ours).
    """
    if not isinstance(res, ResourceDescriptor):
        return None
    try:
        cls = import_qualified(res.clazz)
    except Exception:  # noqa: BLE001 - an unknown class is reported when the plan is built
        return None
    if not (isinstance(cls, type) and hasattr(cls, "has_own_chat")) or cls.has_own_chat():
        return None
    missing = {k: v for k, v in chat.items() if k not in res.arguments}
    if not missing:
        return None
    return ResourceDescriptor(res.clazz, **{**res.arguments, **missing})


class LocalAgentsEnvironment(_Environment):
    """The local runner with Flink Agents' ``from_list`` / ``to_list`` / ``execute``."""

    def __init__(self, **options: Any) -> None:
        from .. import AgentsExecutionEnvironment as _Ours  # (a misspelt option named)

        super().__init__()
        self.local = _Ours.local(**options)
        self._pending: list[tuple[Any, Agent, list[Any]]] = []

    @property
    def _target(self) -> Any:
        return self.local

    def from_list(self, input: list[dict[str, Any]]) -> _LocalBuilder:
        """Take ``[{"key": k, "value": v}, ...]`` as input (``value``: the ``InputEvent.input``).

        The list is read when ``execute()`` runs, as in Flink Agents: records appended to it
        after ``from_list(...)...to_list()`` run too.

        Args:
            input: the records: dicts with ``"key"`` (or ``"k"``; without one, a record
                runs under a key of its own) and ``"value"`` (or ``"v"``).

        Returns:
            The builder; ``apply(agent)``, then ``to_list()``.

        Raises:
            UsageError: when ``input`` is one value (a dict, a string), not a list of
                records.
        """
        from ..local.internal import check_records

        check_records(input, "from_list")
        return _LocalBuilder(self, input)

    def from_datastream(self, input: Any, key_selector: Any = None) -> Any:
        """Not on the local runner (as in Flink Agents): its input is a list.

        Raises:
            UsageError: always, naming the two ways on.
        """
        raise UsageError(
            "from_datastream needs Flink: get_execution_environment(env) with a PyFlink "
            "StreamExecutionEnvironment; without env, the local runner takes a list: "
            "from_list([{'key': k, 'value': v}, ...])")

    def from_table(self, input: Any, key_selector: Any = None) -> Any:
        """Not on the local runner (as in Flink Agents): its input is a list.

        Raises:
            UsageError: always, naming the two ways on.
        """
        raise UsageError(
            "from_table needs Flink: get_execution_environment(env, t_env) with a PyFlink "
            "StreamExecutionEnvironment; without env, the local runner takes a list: "
            "from_list([{'key': k, 'value': v}, ...])")

    def execute(self, job_name: str | None = None) -> None:
        """Run every applied agent over its input; fills the lists ``to_list`` returned.

        As Flink Agents' local runner does, each record's run ends (or parks in a wait)
        before the next record starts, so ``to_list`` holds the outputs in input order; the
        native ``LocalExecutionEnvironment`` overlaps runs of different keys instead.

        Raises:
            UnreadErrorsError: at the end, when records went to the error output (an
                action raised, a record had no value...), which ``to_list`` does not hold:
                Flink Agents stops at the first; here the other records ran and ``to_list``
                holds their outputs. Each was logged at WARNING as it came.
        """
        from ..runtime.internal import UnreadErrors

        pending, self._pending = self._pending, []
        unread = UnreadErrors("the native runner: AgentsExecutionEnvironment.local()"
                              "...run().errors")
        for records, agent, out in pending:  # the records as they are now (see from_list)
            job = self.local.from_list(list(records), key_selector=_compat_key,
                                       value_selector=_compat_value).apply(agent)
            result = job.run(one_at_a_time=True)
            out.extend({key: output} for key, output in result.keyed_outputs)
            for error in result.errors:
                unread.add(error)
        unread.raise_if_any()


def _compat_key(record: Any) -> Any:
    """A record's ``"key"`` (or ``"k"``); a new UUID text for one without (Flink Agents').

    Returns:
        The key.
    """
    if isinstance(record, dict):
        for name in ("key", "k"):
            if name in record:
                return record[name]
    return str(uuid.uuid4())  # a record not a dict is reported by ``_compat_value``


def _compat_value(record: Any) -> Any:
    """A record's ``"value"`` (or ``"v"``): the agent's ``InputEvent.input``.

    Returns:
        The value.

    Raises:
        UsageError: for a record that is not a dict or has neither field (its runner makes
            it an error row naming its position).
    """
    if isinstance(record, dict):
        for name in ("value", "v"):
            if name in record:
                return record[name]
        fields = ", ".join(map(str, list(record)[:8])) or "none"
        raise UsageError(f'the record has no "value" field (its fields: {fields}): from_list '
                         f'takes {{"key": k, "value": v}} dicts; "value" is the agent\'s '
                         f"InputEvent.input")
    raise UsageError(f"the record is a {type(record).__name__}, not a dict: from_list takes "
                     f'{{"key": k, "value": v}} dicts (e.g. {{"key": 1, "value": record}})')


class _UnknownAgentError(KeyError, ValueError):
    """``apply("name")`` of no loaded agent (a ``ValueError`` there, as in Flink Agents)."""


class _ChainedApplyError(AgentAlreadyAppliedError):
    """A second ``apply`` on one local input (a ``RuntimeError`` there, as in Flink Agents)."""


class _LocalBuilder:
    def __init__(self, env: LocalAgentsEnvironment, records: list[dict[str, Any]]) -> None:
        self._env = env
        self._records = records  # read when the environment executes, as Flink Agents does
        self._out: list[Any] = []
        self._applied = False

    def apply(self, agent: Agent | str) -> _LocalBuilder:
        if self._applied:  # Flink Agents refuses a second agent (RuntimeError) at the call
            raise _ChainedApplyError(
                "apply() was already called on this input: Flink Agents' local environment "
                "runs one agent per from_list (a second one neither reads the first's outputs "
                "nor runs after it). Give each agent its own from_list(...).apply(...), or "
                "execute() and pass the first agent's outputs to from_list for the second")
        self._applied = True
        self._env._pending.append((self._records, self._env._agent(agent), self._out))
        return self

    def to_list(self) -> list[dict[Any, Any]]:
        return self._out


class FlinkAgentsEnvironment(_Environment):
    """Our Flink host with Flink Agents' ``from_datastream(input=...)`` / ``execute``."""

    def __init__(self, env: Any, **options: Any) -> None:
        from .. import AgentsExecutionEnvironment as _Ours

        super().__init__()
        self.flink = _Ours.flink(env, **options)
        self._load_flink_conf_dir()

    def _load_flink_conf_dir(self) -> None:
        """Load the ``agent:`` section of ``$FLINK_CONF_DIR``'s configuration, as Flink Agents does.

        ``flink-conf.yaml`` (the legacy name) is read when it exists, else ``config.yaml``; a
        file without an ``agent:`` section sets nothing (e.g. ``agent: {baseLogDir: ...}``
        turns on Flink Agents' file event log, see ``observability.ApacheEventLog``).
        """
        folder = os.environ.get("FLINK_CONF_DIR")
        if not folder:
            return
        for name in ("flink-conf.yaml", "config.yaml"):
            path = Path(folder) / name
            if path.is_file():
                try:
                    self._config.load_yaml(path)
                except UsageError:  # no agent: section
                    log.debug("%s has no agent: section", path)
                return

    @property
    def _target(self) -> Any:
        return self.flink

    def from_datastream(self, input: Any, key_selector: Callable[[Any], Any] | None = None
                        ) -> _FlinkBuilder:
        """Take the ``DataStream`` ``input``, keyed by ``key_selector``."""
        return _FlinkBuilder(self, self.flink.from_datastream(input, key_selector))

    def from_table(self, input: Any, key_selector: Callable[[Any], Any] | None = None
                   ) -> _FlinkBuilder:
        """Take the ``Table`` ``input`` (rows as dicts by field name), keyed by ``key_selector``."""
        return _FlinkBuilder(self, self.flink.from_table(input, key_selector))

    def from_list(self, input: Any) -> Any:
        """Not on Flink (as in Flink Agents): its input is a ``DataStream`` or a ``Table``.

        Raises:
            UsageError: always, naming the two ways on.
        """
        raise UsageError(
            "from_list is the local runner's (get_execution_environment() without env); on "
            "Flink make the list a DataStream: from_datastream(input=env.from_collection("
            "records), key_selector=...)")

    def execute(self, job_name: str = "flink-agents-py") -> Any:
        """Run the job (blocking).

        Returns:
            Flink's ``JobExecutionResult``.

        Raises:
            UnreadErrorsError: when the job, run on a local MiniCluster, ended and records
                went to an error output the program never took (``errors_datastream()``):
                Flink Agents fails the job at the first; here the others ran. Each was logged
                at WARNING as it came.
        """
        _drop_missing_flink_agents_jars(self.flink.env)
        return self.flink.execute(job_name, fail_on_unread_errors=True)


def _drop_missing_flink_agents_jars(env: Any) -> None:
    """Leave Flink Agents' own jars out of the job when they are not there.

    Its first quickstarts add its runtime, plan and api jars from its build tree
    (``env.add_jars(".../runtime/target/flink-agents-runtime-0.1-SNAPSHOT.jar")``); this
    runtime needs none of them, and a missing jar failed the job's submission
    (``FileNotFoundException`` uploading user jars). A jar of another name, or one that
    exists, stays.
    """
    from pyflink.common import Configuration as FlinkConfiguration  # noqa: PLC0415
    from pyflink.java_gateway import get_gateway  # noqa: PLC0415

    jvm = get_gateway().jvm
    key = jvm.org.apache.flink.configuration.PipelineOptions.JARS.key()
    config = jvm.org.apache.flink.python.util.PythonConfigUtil.getEnvironmentConfig(
        env._j_stream_execution_environment)
    jars = FlinkConfiguration.parse_list_value(config.getString(key, None))
    dropped = [j for j in jars if Path(str(j).rsplit("/", 1)[-1]).name.startswith(
        "flink-agents-") and not Path(_local_path(str(j))).exists()]
    if dropped:
        log.info("left out Flink Agents' own jars, not needed here (and not found): %s",
                 ", ".join(dropped))
        config.setString(key, str([j for j in jars if j not in dropped]))


def _local_path(url: str) -> str:
    """The file path of a ``file:`` URL (``file:///a/b.jar``, ``file:/a``), else ``url``."""
    if url.startswith("file:"):
        return "/" + url[len("file:"):].lstrip("/")
    return url


class _FlinkBuilder:
    def __init__(self, env: FlinkAgentsEnvironment, builder: Any) -> None:
        self._env = env
        self._builder = builder

    def apply(self, agent: Agent | str) -> _FlinkBuilder:
        name = agent if isinstance(agent, str) else None
        self._builder.apply(self._env._agent(agent), name=name)
        return self

    def to_datastream(self, output_type: Any = None) -> Any:
        outputs = self._builder.to_datastream(output_type)
        if output_type is not None:
            return outputs
        # A pydantic model output as Flink Agents gives it: its JSON form (see _outputs).
        return outputs.map(json_form_outputs)

    def errors_datastream(self) -> Any:
        return self._builder.errors_datastream()

    def to_table(self, schema: Any = None, output_type: Any = None) -> Any:
        return self._builder.to_table(schema, output_type)


class AgentsExecutionEnvironment:
    """Flink Agents' entry point: ``get_execution_environment(env=None)``."""

    @staticmethod
    def get_execution_environment(
        env: Any = None, t_env: Any = None, **options: Any,
    ) -> LocalAgentsEnvironment | FlinkAgentsEnvironment:
        """The local runner without ``env``, else our Flink host over ``env``.

        Args:
            env: a PyFlink ``StreamExecutionEnvironment``, or ``None``.
            t_env: the ``StreamTableEnvironment`` over ``env`` that ``to_table`` uses after
                ``from_datastream`` (``None``: made when needed).
            **options: options of ``LocalExecutionEnvironment`` / ``FlinkExecutionEnvironment``.

        Returns:
            The environment.
        """
        if env is None:
            return LocalAgentsEnvironment(**options)
        return FlinkAgentsEnvironment(env, t_env=t_env, **options)
