"""``AgentsExecutionEnvironment``: where an agent runs (in-process, or on Flink)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .local import LocalExecutionEnvironment

__all__ = ["AgentsExecutionEnvironment"]


class AgentsExecutionEnvironment:
    """Entry point, as in Apache Flink Agents.

    ``AgentsExecutionEnvironment.local()`` runs agents in-process over bounded lists;
    ``AgentsExecutionEnvironment.flink(env)`` hosts them in a PyFlink job (needs the
    ``flink`` extra); ``get_execution_environment(env=None)`` picks by whether ``env`` is given.
    """

    @staticmethod
    def local(**options: Any) -> LocalExecutionEnvironment:
        """A local environment: agents run in-process over bounded lists.

        Args:
            **options: options of ``LocalExecutionEnvironment``.

        Returns:
            The ``LocalExecutionEnvironment``.
        """
        from .local import LocalExecutionEnvironment  # a Flink job's client never loads it

        return LocalExecutionEnvironment(**options)

    @staticmethod
    def flink(env: Any, **options: Any) -> Any:
        """A Flink environment over a PyFlink ``StreamExecutionEnvironment``.

        ``env`` may be a plain one: what the Python workers need to import the agent (their
        interpreter, import path, files shipped to a cluster) is set on it, and checked
        before submission (see ``flink_agents_py.flink.configure_workers``). Options as for
        ``FlinkExecutionEnvironment`` (``progress=True`` for a progress bar).

        Args:
            env: the PyFlink ``StreamExecutionEnvironment``.
            **options: options of ``FlinkExecutionEnvironment``.

        Returns:
            The ``FlinkExecutionEnvironment``.

        Raises:
            ImportError: when apache-flink is not installed (``pip install .[flink]``).
            WorkerSetupError: when the workers' interpreter cannot import what they need (one
                line saying what to set), before anything is submitted.
        """
        try:
            from .flink import FlinkExecutionEnvironment
        except ImportError as e:
            raise ImportError(
                "the Flink host needs apache-flink: pip install 'flink-agents-py[flink]'"
            ) from e
        return FlinkExecutionEnvironment(env, **options)

    @staticmethod
    def get_execution_environment(env: Any = None, **options: Any) -> Any:
        """``flink(env)`` when ``env`` is given, else ``local()``.

        Args:
            env: a PyFlink ``StreamExecutionEnvironment``, or ``None``.
            **options: options of the environment.

        Returns:
            The ``FlinkExecutionEnvironment`` or ``LocalExecutionEnvironment``.

        Raises:
            ImportError: when ``env`` is given and apache-flink is not installed.
        """
        if env is None:
            return AgentsExecutionEnvironment.local(**options)
        return AgentsExecutionEnvironment.flink(env, **options)
