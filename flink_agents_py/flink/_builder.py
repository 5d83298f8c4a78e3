"""``FlinkExecutionEnvironment``: agents applied to keyed PyFlink ``DataStream``s."""

from __future__ import annotations

import functools
import secrets
from collections.abc import Callable
from typing import Any, cast

from pyflink.common import Row, Types

from ..api import Agent, AgentAlreadyAppliedError, ExternalEvent, UsageError
from ..api.internal import already_applied
from ..local import default_key_selector
from ..plan import AgentPlan
from ..runtime import (
    Failpoint,
    HostOptions,
    Journal,
    KeyEncoding,
    KeyEncodingMismatchError,
    Observer,
    check_resources,
    key_encoding,
    mismatch_message,
)
from ..runtime.internal import UnreadErrors
from ._env_execute import adopt_environment
from ._fast_input import FirstStepKeys
from ._fresh import shipped
from ._graph import check_uid_free, transformations_of
from ._keyed_input import (
    is_keyed_stream,
    pickles_of,
    positioned_input,
    positioned_key,
    seal,
    seal_pickled,
    sealed_key,
    with_its_key,
)
from ._operator import ERROR_TAG, AgentOperator
from ._progress import JobProgress, progress_enabled, rest_urls
from ._second_input import envelope_key, wrap_outside
from ._typed_outputs import TypedOutputs, contract_of
from ._typed_outputs import _field_kinds as _field_kinds  # used by tests
from ._typed_outputs import _output_as_row as _output_as_row  # used by tests
from ._unread_errors import AgentOutputs, execute_reading_errors, unread_error_streams
from ._workers import WorkerSetupError, config_getter, configure_workers, on_local_target

__all__ = ["FlinkExecutionEnvironment", "FlinkAgentBuilder"]


def plan_modules(plan: AgentPlan) -> list[str]:
    """The modules a plan names (actions, resource classes, sub-agents), in first-seen order.

    Raises:
        WorkerSetupError: when a resource's class is defined in ``__main__``: the workers
            build resources by importing their class, and cannot import the client's script.
            (Actions defined in ``__main__`` travel with the plan, pickled by value.)

    Returns:
        The module names.
    """
    found: list[str] = []
    for action in plan.actions.values():
        found.append(action.function.path.partition(":")[0])
    for by_name in plan.resources.values():
        for name, res in by_name.items():
            clazz = res.descriptor.clazz
            module = clazz.partition(":")[0] if ":" in clazz else clazz.rpartition(".")[0]
            if module.split(".")[0] == "__main__":
                raise WorkerSetupError(
                    f"resource {name!r} names the class {clazz}, defined in the script being "
                    f"run (__main__), which Flink's Python workers cannot import: move the "
                    f"class into a module of its own (e.g. next to the script) and import it")
            found.append(module)
    for sub in plan.subagents.values():
        found.extend(plan_modules(sub))
    return list(dict.fromkeys(m for m in found if m))


def _same(value: Any) -> Any:
    """The value itself (a map that gives a stream the union's pickled type)."""
    return value


def _row_as_dict(names: list[str], row: Any) -> dict[str, Any]:
    """A table row as a dict by field name (the input records of ``from_table``)."""
    return dict(zip(names, row, strict=True))


def _key_function(key_selector: Any) -> Callable[[Any], Any] | None:
    """``key_selector`` as a function of the record: a ``KeySelector``'s ``get_key``.

    Raises:
        UsageError: for something neither callable nor a ``KeySelector``.
    """  # noqa: DOC201
    if key_selector is None or callable(key_selector):
        return key_selector
    get_key = getattr(key_selector, "get_key", None)
    if callable(get_key):
        return cast("Callable[[Any], Any]", get_key)
    raise UsageError(f"key_selector must be a function of the record or a PyFlink "
                     f"KeySelector, got a {type(key_selector).__name__}")


def _key_of_named_row(selector: Any, row: dict[str, Any]) -> Any:
    """``selector.get_key`` of a ``from_table`` row dict, given as a ``Row`` with its names."""
    named = Row(*row.values())
    named.set_field_names(list(row))
    return selector.get_key(named)


_encoding = key_encoding  # ``apply`` has an argument of that name


class FlinkAgentBuilder:
    """An input stream waiting for an agent: ``apply`` it, then take ``to_datastream()``."""

    def __init__(self, env: FlinkExecutionEnvironment, ds: Any,
                 key_selector: Callable[[Any], Any], t_env: Any = None) -> None:
        self._env = env
        self._ds = ds
        self._key_selector = key_selector
        self._t_env = t_env
        self._result: Any = None
        self._errors: Any = None
        self._op: Any = None  # the agent operator and its name, from ``apply``
        self._label = ""
        self._sealed = False  # process mode: records travel sealed (``_keyed_input.Sealed``)
        self._built: list[Any] = []  # the Java transformations ``_build`` added to the job
        self._handed_out = False  # the outputs or errors were taken: no second ``_build``
        self._errors_read = False  # ``errors_datastream()`` taken: else ``execute`` reads them
        self._events: Any = None
        self._events_key: Callable[[Any], Any] = ExternalEvent.key_of

    def connect(self, events: Any, key_selector: Callable[[Any], Any] | None = None
                ) -> FlinkAgentBuilder:
        """Give the agent a second input: a ``DataStream`` of outside events (before ``apply``).

        Each event (an ``ExternalEvent``, or its dict: ``key``, ``correlation_id``,
        ``payload``) is routed by its key to the agent operator, where it completes the
        action's ``await ctx.wait_for(correlation_id)`` (or releases a tool call held for
        approval). One that arrives for no open wait goes to ``errors_datastream()`` as an
        ``UnmatchedEventError`` record naming why. The agent stays one operator with one
        state: its input and the events are unioned, each event in an envelope (see
        ``flink_agents_py.flink._second_input``).

        Args:
            events: the outside events' ``DataStream``.
            key_selector: an event's key (default: its ``key`` field); it must give the key
                the agent's records of that run have.

        Returns:
            ``self``.

        Raises:
            RuntimeError: when called after ``apply``.
        """
        if self._result is not None:
            raise RuntimeError("connect(events) must come before apply(agent)")
        self._events = events
        self._events_key = key_selector or ExternalEvent.key_of
        return self

    def apply(self, agent: Agent | AgentPlan, *, name: str | None = None,
              key_encoding: str | None = None) -> FlinkAgentBuilder:
        """Key the input and run ``agent`` on it in an ``AgentOperator``.

        Args:
            agent: the agent (or its compiled plan).
            name: the operator's name; its uid is ``agent-<name>`` (default: the agent's
                class name), which a savepoint's state is mapped back to.
            key_encoding: this operator's key encoding, instead of the environment's
                (``"json"`` or ``"pickle"``, see ``FlinkExecutionEnvironment``).

        Returns:
            ``self``.

        Raises:
            ValueError: for an unknown ``key_encoding``.
            UsageError: when this job already has an agent operator of that name (its uid).
            AgentAlreadyAppliedError: when this input already has an agent (one agent an
                input, as in Apache Flink Agents).
            PlanError: when the agent does not compile.
            WorkerSetupError: when Flink's Python workers could not import the agent (says
                what to set), found before the job is submitted.
            AgentsError: on a local MiniCluster, what a resource's check raised (e.g.
                ``MissingApiKeyError`` naming the variable and the resource), before the
                job is submitted; a cluster's operators check when they open.
        """
        if self._op is not None:  # else a second operator beside the first, outputs replaced
            raise AgentAlreadyAppliedError(already_applied(self._label, agent, "from_datastream"))
        keys = self._env.key_encoding if key_encoding is None else _encoding(key_encoding)
        plan = agent if isinstance(agent, AgentPlan) else AgentPlan.from_agent(agent)
        workers = configure_workers(self._env.env, plan_modules(plan))
        if workers.target == "local":  # the workers share this environment: check it now
            check_resources(plan)
        # a lineage per operator, pickled with it: every attempt (failover) of the job shares it
        options = self._env.options
        if options.lineage is None:
            options = options.replace(lineage=secrets.token_hex(8))
        op = AgentOperator(plan, options, key_encoding=keys)
        # Beam's coder, not the operator, would unpickle a process-mode record: a record that
        # fails to load there failed the task; sealed, the operator makes it an error row
        self._sealed = workers.execution_mode != "thread"
        label = name or (type(agent).__name__ if isinstance(agent, Agent) else "agent")
        check_uid_free(self._env.env, f"agent-{label}", label)
        self._op, self._label = op, label
        self._build()
        self._env._applied.append(self)
        return self

    def _build(self, contract: Any = None) -> None:
        """Add the agent operator (and its error output) to the job, checking ``contract``.

        ``contract`` (``_typed_outputs.OutputContract``): the declared type of the outputs
        (``to_table``, a typed ``to_datastream``); an output it cannot hold becomes an error
        record of its run in the operator.
        """
        op, label = self._op, self._label
        op.output_check = contract
        keys = op.keys
        transformations = transformations_of(self._env.env)
        before = transformations.size() if transformations is not None else 0
        ds, key_selector = self._ds, self._key_selector
        if self._events is not None:  # the second input: one union, events in envelopes
            pickled = Types.PICKLED_BYTE_ARRAY()
            events = self._events.map(shipped(wrap_outside), output_type=pickled)
            if ds.get_type() != pickled:
                ds = ds.map(shipped(_same), output_type=pickled)
            ds = ds.union(events)
            key_selector = functools.partial(envelope_key, key_selector, self._events_key)
        # a record its key selector fails on (or whose key has no encoding) is keyed by a
        # rejected key, which the operator sends to the error output: the job keeps running
        selector: Callable[[Any], Any] = shipped(functools.partial(keys.flink_key, key_selector))
        if self._sealed:  # the key computed once, beside the pickled record
            pickles = pickles_of(ds)  # loaded by the step itself: one that fails is an error row
            sealing = functools.partial(seal, selector) if pickles is None \
                else functools.partial(seal_pickled, keys, key_selector)
            ds = (ds if pickles is None else pickles).map(
                shipped(sealing), output_type=Types.PICKLED_BYTE_ARRAY()) \
                .name(f"{label}-seal").uid(f"agent-{label}-seal")
            selector = shipped(sealed_key)
        else:  # thread mode: a record the key step cannot load is an error row too
            selector = FirstStepKeys(selector)
        keyed = ds.key_by(selector, key_type=Types.STRING()) if keys.stable \
            else ds.key_by(selector)  # PyFlink pickles keys without a key type
        self._result = (
            keyed.process(op, output_type=Types.PICKLED_BYTE_ARRAY())
            .name(label).uid(f"agent-{label}")
        )
        # Taken now, consumed or not: PyFlink sends what a function yields for an output tag
        # nobody asked for to the main output, as (tag, value) pairs among the outputs.
        self._errors = self._result.get_side_output(ERROR_TAG)
        self._built = [] if transformations is None else \
            list(transformations.subList(before, transformations.size()))
        self._handed_out = False

    def _outputs_checked(self, contract: Any) -> Any:
        """The operator's outputs, checked against ``contract`` in the operator when it can be.

        The operator was pickled when ``apply`` added it; as long as neither its outputs nor
        its errors were taken, it is added again with the check (what ``apply`` added to the
        job removed first), so that an output that does not fit becomes an error record with
        its key and position. Otherwise only the map after it checks (see ``TypedOutputs``).

        Returns:
            The operator's output ``DataStream``.
        """
        transformations = transformations_of(self._env.env)
        if not self._handed_out and self._built and transformations is not None \
                and contract is not None:
            for transformation in self._built:
                transformations.remove(transformation)
            self._build(contract)
        self._handed_out = True
        return self._result

    def _applied(self) -> Any:
        if self._result is None:
            raise RuntimeError("call .apply(agent) first")
        return self._result

    def to_datastream(self, output_type: Any = None) -> Any:
        """The agent's outputs (``OutputEvent.output`` values).

        Args:
            output_type: the outputs' type (``Types.STRING()``, ``Types.ROW_NAMED(...)``...;
                ``None``: Python objects, ``Types.PICKLED_BYTE_ARRAY()``). An output it
                cannot hold (a value of another type, ``None``) goes to
                ``errors_datastream()`` as an ``OutputTypeError`` record of its run, as
                ``to_table`` does.

        Returns:
            The outputs' ``DataStream``. On a local MiniCluster its ``execute_and_collect``
            also logs, at WARNING in this process, each error record of an agent whose
            ``errors_datastream()`` was not taken (as ``execute()`` does).
        """
        self._applied()
        contract = contract_of(output_type, where="to_datastream")
        result = self._outputs_checked(contract)
        if contract is not None:
            echoed = TypedOutputs(contract, echo=on_local_target(self._env.env))
            result = result.flat_map(shipped(echoed), output_type=output_type)
        return AgentOutputs(result, self._env)  # its execute_and_collect reads unread errors

    def errors_datastream(self) -> Any:
        """Failed actions and rejected records, as dicts with ``key`` (the side output).

        Each row is an ``ErrorRecord``'s JSON form: ``key`` is the key's JSON form
        (``runtime.key_from_json`` gives the key back). Not taking it: on a local
        MiniCluster ``execute()`` reads them into the program's process and logs each at
        WARNING; on a cluster they are in the TaskManagers' logs (never mixed with the
        outputs).

        Returns:
            The side output ``DataStream``.
        """
        self._applied()
        self._handed_out = True
        self._errors_read = True
        return self._errors

    def to_table(self, schema: Any = None, output_type: Any = None) -> Any:
        """The agent's outputs as a PyFlink ``Table`` (Flink Agents' ``to_table``).

        Each output becomes a row of ``output_type``'s fields: a dict by field name (a field
        it lacks is null), a ``Row``/tuple/list in field order, or any value for a one-field
        type. One the row cannot hold (``None``, a value its column's type cannot hold, a
        null in a column ``schema`` declares ``NOT NULL``) becomes an ``OutputTypeError``
        record of its run on ``errors_datastream()`` and the other rows go on (see
        ``_typed_outputs``; a table job has no error output: its error records are logged,
        and on a local MiniCluster also printed on the console, as ``WARNING ...`` lines).
        The table belongs to the table environment of ``from_table``'s table, else to the
        environment's ``table_environment()``.

        Args:
            schema: a ``pyflink.table.Schema`` for the table (``None``: derived from
                ``output_type``).
            output_type: the rows' type, ``Types.ROW_NAMED([...names], [...types])``
                (or that wrapped in ``ExternalTypeInfo``, as Flink Agents' examples do).

        Returns:
            A ``pyflink.table.Table``.

        Raises:
            ValueError: when ``output_type`` is not a named row type.
            RuntimeError: before ``apply``.
        """
        from pyflink.common.typeinfo import ExternalTypeInfo, RowTypeInfo

        row_type = output_type._type_info if isinstance(output_type, ExternalTypeInfo) \
            else output_type  # Flink Agents' examples wrap the row type
        if not isinstance(row_type, RowTypeInfo):
            raise ValueError(f"to_table: output_type must be a row type, "
                             f"Types.ROW_NAMED([...names], [...types]); got {output_type!r}")
        self._applied()
        contract = contract_of(row_type, schema, "to_table")
        assert contract is not None  # a row type's
        rows = self._outputs_checked(contract).flat_map(
            shipped(TypedOutputs(contract, echo=on_local_target(self._env.env))),
            output_type=output_type)
        t_env = self._t_env or self._env.table_environment()
        return t_env.from_data_stream(rows) if schema is None else \
            t_env.from_data_stream(rows, schema)


class FlinkExecutionEnvironment:
    """Hosts agents in a PyFlink job.

    Args:
        env: a ``StreamExecutionEnvironment``: one made by ``create_stream_environment``, or
            a plain one; either way what the Python workers need to import the agent is set
            on it here and by ``apply`` (see ``configure_workers``).
        max_in_flight: the most I/O calls running at once per operator instance.
        max_in_flight_per_key: the most of them one key's calls hold at once (``None``: three
            quarters of ``max_in_flight``); freed slots go to waiting keys in turn.
        max_poll_interval_ms: the longest wait between checks of a key whose I/O has run past
            its expected duration, in ms.
        max_queued_per_key: the most input records queued behind one key's run; more wait
            upstream (backpressure). ``None``: unbounded.
        max_waiting_calls: the most calls waiting for an I/O slot before input waits
            (backpressure); ``None``: ``max_in_flight``.
        journal: a write-ahead journal of durable call outcomes (``SqliteJournal``...), closing
            the window between the last checkpoint and a failure.
        failpoint: a test hook for crash injection (see ``runtime.Failpoint``).
        metrics: register the agent metrics (``observability.AgentMetrics``) in each operator
            subtask's metric group ``flink_agents``, for any Flink metric reporter.
        event_log: write the event log: an ``observability.EventLog``, a path or an
            ``EventLogSink`` (picklable). Each subtask writes its own file: ``{subtask}`` in
            the path, or ``-<subtask>`` before its suffix (``events.jsonl`` ->
            ``events-0.jsonl``); a restarted attempt appends to it.
        observer: an extra ``runtime.Observer`` for every subtask (picklable).
        apache_event_log: Apache Flink Agents' file event log, an
            ``observability.ApacheEventLog`` (``events-{job}-{task}-{subtask}.log`` in its
            folder; compat's ``baseLogDir`` option sets it).
        progress: show a progress bar on stderr while ``execute`` (or a ``with
            agents.progress(...)`` block) runs: records done of total, outputs, errors, calls
            in flight, rate, ETA; read from the job's REST API (needs ``metrics``). Shown only
            when stderr is a terminal (``FLINK_AGENTS_PY_PROGRESS=1``: on any stderr; ``=0``:
            never).
        t_env: the ``StreamTableEnvironment`` over ``env`` that ``to_table`` uses after
            ``from_datastream`` (``None``: made when first needed).
        key_encoding: how keyed state is keyed (``runtime.KeyEncoding``). ``"json"`` (the
            default): a Flink ``STRING`` key, the same bytes in every Python, cloudpickle
            and PyFlink version; a string key is itself, an ``int``, ``float``, ``bool``,
            ``None``, ``UUID``, ``date``, ``datetime``, ``Decimal``, ``bytes`` or tuple key
            its canonical JSON form (``runtime.key_json``; so ``1``, ``True`` and ``1.0``
            are three keys); a key of another type sends its record to
            ``errors_datastream()``.
            ``"pickle"``: the key's pickle, as releases before ``"json"`` keyed state: only
            to restore a savepoint such a release took (Flink cannot change a key's
            serializer in a restore; see ``docs/how-to/deployment.md``, "Keys and
            savepoints"). ``"json"`` restoring such a savepoint, or ``"pickle"`` one taken
            with ``"json"``, fails the restore (Flink's ``StateMigrationException``: the
            new key serializer is incompatible); ``execute`` then names this option.

    Raises:
        WorkerSetupError: when the workers' interpreter cannot import what they need.
        ValueError: for an unknown ``key_encoding``.
    """

    def __init__(self, env: Any, *, max_in_flight: int = 32, max_poll_interval_ms: int = 20,
                 journal: Journal | None = None, failpoint: Failpoint | None = None,
                 metrics: bool = True, event_log: Any = None,
                 observer: Observer | None = None, progress: bool = False,
                 t_env: Any = None, max_queued_per_key: int | None = 10_000,
                 max_waiting_calls: int | None = None,
                 key_encoding: str | KeyEncoding = "json",
                 apache_event_log: Any = None,
                 max_in_flight_per_key: int | None = None) -> None:
        from ..observability import EventLog

        self.key_encoding = _encoding(key_encoding)

        if hasattr(env, "_j_stream_execution_environment"):  # not a stand-in of a unit test
            configure_workers(env)
            adopt_environment(env, self)  # from_collection's type_info; env.execute()
        self.env = env
        self.show_progress = progress
        self.options = HostOptions(
            max_in_flight=max_in_flight, max_poll_interval_ms=max_poll_interval_ms,
            max_queued_per_key=max_queued_per_key, max_waiting_calls=max_waiting_calls,
            journal=journal, failpoint=failpoint, metrics=metrics,
            event_log=EventLog.of(event_log),  # a path is made absolute here, on the client
            observer=observer,  # what every operator applied from here on runs with
            apache_event_log=apache_event_log, max_in_flight_per_key=max_in_flight_per_key)
        self.t_env = t_env
        self._applied: list[FlinkAgentBuilder] = []  # agents applied since the last execute

    @property
    def max_in_flight(self) -> int:
        """The most I/O calls running at once per operator instance (settable)."""
        return self.options.max_in_flight

    @max_in_flight.setter
    def max_in_flight(self, value: int) -> None:
        self.options = self.options.replace(max_in_flight=value)

    @property
    def metrics(self) -> bool:
        """Whether the operators keep and register the agent metrics."""
        return self.options.metrics

    @property
    def event_log(self) -> Any:
        """The event log the operators write (an ``observability.EventLog``), or ``None``."""
        return self.options.event_log

    def from_datastream(self, ds: Any, key_selector: Callable[[Any], Any] | None = None
                        ) -> FlinkAgentBuilder:
        """Take ``ds`` as input, keyed by ``key_selector`` (default: ``record["key"]``).

        ``key_selector`` is a function of the record, or a PyFlink ``KeySelector`` (Flink
        Agents' style), whose ``get_key`` is then called. A record its key selector raises on
        (or gives an unhashable key for) goes to ``errors_datastream()`` with the error and
        its traceback (``select_key``); the job keeps running.

        Returns:
            A builder; ``.apply(agent)`` next.

        Raises:
            UsageError: when ``ds`` is not a ``DataStream`` (a list, a ``Table``), naming
                how to make one, or ``key_selector`` is neither a function nor a
                ``KeySelector``.
        """
        if not hasattr(ds, "key_by"):
            reader = hasattr(getattr(ds, "records", None), "key_by")  # FileInput, KafkaInput
            fix = ("from_table(table)" if hasattr(ds, "get_schema") else
                   "its records stream, from_datastream(input.records) (and take "
                   "input.errors, its bad input rows)" if reader else
                   "env.from_collection(records), a stream of the records as Python objects")
            raise UsageError(f"from_datastream takes a PyFlink DataStream, got a "
                             f"{type(ds).__name__}: pass {fix}")
        if key_selector is None and is_keyed_stream(ds):  # Flink Agents: its own key
            ds, key_selector = with_its_key(ds)
        selector = _key_function(key_selector) or default_key_selector
        positioned = positioned_input(ds)  # read_lines_file's records: with their lines
        if positioned is not None:
            return FlinkAgentBuilder(self, positioned,
                                     functools.partial(positioned_key, selector))
        return FlinkAgentBuilder(self, ds, selector)

    def from_table(self, table: Any, key_selector: Callable[[Any], Any] | None = None
                   ) -> FlinkAgentBuilder:
        """Take a PyFlink ``Table`` as input: each row a dict by field name.

        The table becomes a ``DataStream`` (``StreamTableEnvironment.to_data_stream``) in the
        table environment it belongs to, which must wrap this environment's
        ``StreamExecutionEnvironment``; an insert-only table (updates need a changelog stream).

        Args:
            table: a ``pyflink.table.Table`` (from SQL, ``from_path``, ``from_elements``...).
            key_selector: the key of a row's dict (default: ``row["key"]``), or a PyFlink
                ``KeySelector`` (Flink Agents' style): its ``get_key`` gets the row as a
                ``Row`` with the table's field names.

        Returns:
            The builder; ``.apply(agent)``, then ``to_datastream()`` or ``to_table(...)``.

        Raises:
            UsageError: when ``table`` is not a ``Table``.
        """
        if not hasattr(table, "get_schema"):
            raise UsageError(f"from_table takes a PyFlink Table, got a {type(table).__name__}"
                             f"{': pass from_datastream(ds)' if hasattr(table, 'key_by') else ''}")
        t_env = table._t_env  # a Table converts only in the environment that made it
        names = list(table.get_schema().get_field_names())
        ds = t_env.to_data_stream(table).map(shipped(functools.partial(_row_as_dict, names)),
                                             output_type=Types.PICKLED_BYTE_ARRAY())
        if hasattr(key_selector, "get_key"):
            key_selector = functools.partial(_key_of_named_row, key_selector)
        return FlinkAgentBuilder(self, ds, key_selector or default_key_selector, t_env)

    def table_environment(self) -> Any:
        """The ``StreamTableEnvironment`` over ``env`` (given as ``t_env``, or made once)."""
        if self.t_env is None:
            from pyflink.table import StreamTableEnvironment

            self.t_env = StreamTableEnvironment.create(self.env)
        return self.t_env

    def progress(self, total: int | None = None, job_name: str | None = None) -> JobProgress:
        """A progress bar for the job run inside the ``with`` block (see ``progress`` above).

        ``with agents.progress(total=len(records)): ...`` around iterating
        ``execute_and_collect``; leaving the block without an exception completes the bar.

        Args:
            total: how many input records the job reads, when known (for done-of-total, ETA).
            job_name: the job's name, to tell it from other jobs on the same REST API.

        Returns:
            A context manager; inert when progress is off.
        """
        return JobProgress(rest_urls(config_getter(self.env)), total=total, job_name=job_name,
                           enabled=self.metrics and progress_enabled(self.show_progress))

    def execute(self, job_name: str = "flink-agents-py", total: int | None = None, *,
                fail_on_unread_errors: bool = False) -> Any:
        """Run the job (blocking), with a progress bar when ``progress`` is on.

        On a local MiniCluster, the error output of an agent whose ``errors_datastream()``
        the program never took is read back here: each row is logged at WARNING (logger
        ``flink_agents_py.errors``) in this process as it arrives, so no record is lost
        quietly (on a cluster they are in the TaskManagers' logs; the job is left as built).

        Args:
            job_name: the job's name.
            total: how many input records the job reads, when known (for the bar).
            fail_on_unread_errors: raise ``UnreadErrorsError`` when the job ends if any such
                row came back (what ``compat``'s ``execute`` does: Flink Agents fails the
                job).

        Returns:
            Flink's ``JobExecutionResult``.

        Raises:
            KeyEncodingMismatchError: when the restore found keyed state keyed by another
                key encoding (says which ``key_encoding`` to pass); chained to Flink's error.
            UnreadErrorsError: with ``fail_on_unread_errors``, naming the first unread rows.
        """
        streams = unread_error_streams(self.env, self._applied)
        self._applied = []  # the job takes the environment's transformations with it
        unread = UnreadErrors("errors_datastream()")
        try:
            with self.progress(total=total, job_name=job_name):
                if not streams:
                    return self.env.execute(job_name)
                result = execute_reading_errors(self.env, job_name, streams, unread)
        except Exception as e:
            message = mismatch_message(e, self.key_encoding)
            if message is None:
                raise
            raise KeyEncodingMismatchError(message) from e
        if fail_on_unread_errors:
            unread.raise_if_any()
        return result
