"""``AgentsExecutionEnvironment``: where an agent runs (in-process, or on Flink)."""

from __future__ import annotations

import difflib
import inspect
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

        _refuse_unknown(LocalExecutionEnvironment, options, "AgentsExecutionEnvironment.local()")
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
        _refuse_unknown(FlinkExecutionEnvironment, options, "AgentsExecutionEnvironment.flink(env)")
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


def _refuse_unknown(target: type, options: dict[str, Any], call: str) -> None:
    """Refuse an option ``target`` does not take, naming the one it looks like.

    Before, ``local(max_inflight=4)`` raised Python's bare ``TypeError: __init__() got an
    unexpected keyword argument 'max_inflight'``.

    Raises:
        TypeError: naming the option, the one meant (when one is close) and every option.
    """
    params = inspect.signature(target).parameters.values()
    if any(p.kind is p.VAR_KEYWORD for p in params):
        return
    known = [p.name for p in params if p.name != "env"
             and p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD)]
    for name in options:
        if name not in known:
            close = difflib.get_close_matches(name, known, n=1)
            meant = f" (did you mean {close[0]!r}?)" if close else ""
            raise TypeError(f"{call} takes no option {name!r}{meant}; its options: "
                            f"{', '.join(known)}")
