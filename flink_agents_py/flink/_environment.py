"""Creating a PyFlink ``StreamExecutionEnvironment`` set up for agent operators.

Facts measured on apache-flink 2.3.0 that shape these settings:

- ``python.execution-mode=thread`` runs the Python functions inside the JVM (pemja): about 3x
  the keyed-state throughput of process mode and 3-9 ms timer round trips with default
  bundles. pemja uses the base interpreter, so the venv's ``site-packages`` (and the client's
  ``sys.path``) go on ``python.pythonpath`` (``configure_workers``), which reaches the
  embedded interpreter even when the JVM already runs.
- In process mode, Java hands records to the Python worker in bundles; the default bundle
  (100,000 records / 1,000 ms) holds timer-driven work back, so the bundle is made small.
- The Python worker must run the job's own interpreter (``python.executable``).
"""

from __future__ import annotations

import os
import sys
from typing import Any, Literal

from ._collections import accept_pickled_collections
from ._gc import heap_frozen
from ._workers import configure_workers

__all__ = ["create_stream_environment", "python_path_for_workers"]


def python_path_for_workers() -> str:
    """The client's import path (existing directories), for thread-mode workers."""
    seen: list[str] = []
    for p in [os.getcwd(), *sys.path]:
        p = os.path.abspath(p or os.getcwd())
        if os.path.isdir(p) and p not in seen:
            seen.append(p)
    return os.pathsep.join(seen)


def _checkpoint_alignment(unaligned: bool | None, timeout_ms: int,
                          extra_config: dict[str, str] | None) -> dict[str, str]:
    """The Flink settings for ``create_stream_environment``'s checkpoint alignment choice.

    Returns:
        The settings to add: nothing when the caller turned it off, or set Flink's own
        alignment keys in ``extra_config`` (those are then taken as they are, without our
        timeout).
    """
    own = any(k.startswith(("execution.checkpointing.unaligned",
                            "execution.checkpointing.aligned-checkpoint-timeout"))
              for k in extra_config or {})
    if unaligned is False or (unaligned is None and own):
        return {}
    settings = {"execution.checkpointing.unaligned.enabled": "true"}
    if unaligned is None:
        settings["execution.checkpointing.aligned-checkpoint-timeout"] = f"{timeout_ms} ms"
    return settings


def create_stream_environment(
    *,
    parallelism: int = 1,
    execution_mode: Literal["thread", "process"] = "thread",
    checkpoint_interval_ms: int | None = None,
    unaligned_checkpoints: bool | None = None,
    aligned_checkpoint_timeout_ms: int = 10_000,
    restart_attempts: int = 3,
    restart_delay_s: float = 1.0,
    bundle_size: int = 1000,
    bundle_time_ms: int = 5,
    extra_config: dict[str, str] | None = None,
) -> Any:
    """Return a STREAMING ``StreamExecutionEnvironment`` configured for agent operators.

    What the Python workers need to import this process's modules (``python.pythonpath``, or
    files shipped to a cluster) is set by ``configure_workers``, here and again when an agent
    is applied.

    Args:
        parallelism: default parallelism.
        execution_mode: ``"thread"`` (default, faster) or ``"process"``.
        checkpoint_interval_ms: enable checkpointing at this interval (``None``: off).
        unaligned_checkpoints: let checkpoint barriers overtake records buffered between
            operators (``execution.checkpointing.unaligned.enabled``), so checkpoints keep
            completing while the agent operator holds its input back (backpressure, see
            ``HostOptions.max_queued_per_key``), up to the end of a bounded job. ``None``
            (default): a checkpoint starts aligned and switches to unaligned once its
            alignment has taken ``aligned_checkpoint_timeout_ms``; so a job that is not
            backpressured writes plain aligned checkpoints, and one that is (a hot key, a
            saturated I/O executor) still completes them (unless ``extra_config`` sets Flink's
            ``execution.checkpointing.unaligned.*`` or alignment-timeout keys itself, which
            are then used as given). ``True``: always unaligned;
            ``False``: always aligned (under backpressure a checkpoint then waits until the
            records buffered before the operator have been processed: minutes with a slow
            model). Savepoints are always aligned (Flink).
        aligned_checkpoint_timeout_ms: with ``unaligned_checkpoints=None``, how long a
            checkpoint's alignment may take before it turns unaligned, in ms
            (``execution.checkpointing.aligned-checkpoint-timeout``).
        restart_attempts: fixed-delay restart attempts after a failure.
        restart_delay_s: delay between restarts, in seconds.
        bundle_size: process mode's records per bundle.
        bundle_time_ms: process mode's bundle time, in ms.
        extra_config: more Flink configuration (``key -> value`` strings). Its keys win over
            the settings above, except those this function sets on the environment itself
            after: ``parallelism.default`` (``parallelism``), ``execution.runtime-mode``
            (always ``STREAMING``) and, when ``checkpoint_interval_ms`` is given,
            ``execution.checkpointing.interval``; giving one of those is a ``UsageError``
            saying what to do instead.

    Returns:
        A ``pyflink.datastream.StreamExecutionEnvironment``.

    Raises:
        ImportError: when apache-flink is not installed (``pip install .[flink]``).
        UsageError: when ``extra_config`` sets what a parameter sets (it would be ignored).
        WorkerSetupError: when the workers' interpreter cannot import what they need.
    """
    _refuse_overridden(extra_config or {}, checkpoint_interval_ms)
    from pyflink.common import Configuration
    from pyflink.datastream import RuntimeExecutionMode, StreamExecutionEnvironment

    cfg = Configuration()
    settings = {
        "python.execution-mode": execution_mode,
        "python.executable": sys.executable,
        "python.client.executable": sys.executable,
        "python.fn-execution.bundle.size": str(bundle_size),
        "python.fn-execution.bundle.time": str(bundle_time_ms),
        "restart-strategy.type": "fixed-delay",
        "restart-strategy.fixed-delay.attempts": str(restart_attempts),
        "restart-strategy.fixed-delay.delay": f"{int(restart_delay_s * 1000)} ms",
        **_checkpoint_alignment(unaligned_checkpoints, aligned_checkpoint_timeout_ms,
                                extra_config),
        **(extra_config or {}),
    }
    for k, v in settings.items():
        _set(cfg, k, v)
    with heap_frozen():  # the first environment imports Beam and pandas (``_gc.heap_frozen``)
        env = StreamExecutionEnvironment.get_execution_environment(cfg)
    env.set_runtime_mode(RuntimeExecutionMode.STREAMING)
    env.set_parallelism(parallelism)
    if checkpoint_interval_ms:
        env.enable_checkpointing(checkpoint_interval_ms)
    configure_workers(env)
    accept_pickled_collections(env)
    return env


_JAR_KEYS = frozenset({"pipeline.jars", "pipeline.classpaths"})
"""The keys PyFlink's ``Configuration.set_string`` acts on (it adds their jars to the
client's class loader); every other key it only hands to Java."""


def _set(cfg: Any, key: str, value: str) -> None:
    """``cfg.set_string(key, value)`` in one call into the JVM instead of about fourteen.

    PyFlink's ``set_string`` looks up the two jar keys' names through py4j's reflection at
    every call, to compare ``key`` with them: 14 round trips into a JVM that has just started
    and is compiling, 22-96 ms of wall time for the dozen settings here against 1-2 ms set
    directly (2026-12-06); the bare PyFlink program sets 5. The jar keys still go through it.
    """
    if key in _JAR_KEYS:
        cfg.set_string(key, value)
    else:
        cfg._j_configuration.setString(key, value)


def _refuse_overridden(extra_config: dict[str, str], checkpoint_interval_ms: int | None) -> None:
    """Refuse ``extra_config`` keys that ``create_stream_environment`` would silently override.

    Before, ``extra_config={"parallelism.default": "4"}`` gave a job of parallelism 1 without
    a word (``set_parallelism`` runs after the configuration is read).

    Raises:
        UsageError: naming the key and the parameter to pass instead.
    """
    from ..api import UsageError

    if "parallelism.default" in extra_config:
        raise UsageError(
            f"create_stream_environment: extra_config sets 'parallelism.default' "
            f"({extra_config['parallelism.default']!r}), which parallelism= (default 1) "
            f"overrides: pass parallelism={extra_config['parallelism.default']} instead")
    mode = extra_config.get("execution.runtime-mode")
    if mode is not None and str(mode).upper() != "STREAMING":
        raise UsageError(
            f"create_stream_environment: extra_config sets 'execution.runtime-mode' ({mode!r}), "
            "which it overrides: an agent job runs in STREAMING mode (its timers and state "
            "need it); leave the key out")
    if checkpoint_interval_ms and "execution.checkpointing.interval" in extra_config:
        raise UsageError(
            "create_stream_environment: extra_config sets 'execution.checkpointing.interval' "
            f"({extra_config['execution.checkpointing.interval']!r}) and checkpoint_interval_ms="
            f"{checkpoint_interval_ms} overrides it: give one of them")
