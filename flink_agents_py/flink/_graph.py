"""The job a PyFlink environment is building: its transformations, the uids taken."""

from __future__ import annotations

from typing import Any

from ..api import UsageError

__all__ = ["check_uid_free", "transformations_of"]


def check_uid_free(env: Any, uid: str, label: str) -> None:
    """Refuse a second agent operator under ``uid`` in the job being built on ``env``.

    Flink refuses the job only when it is submitted, with ``Hash collision on user-specified
    ID`` and not a word on ``name=`` (an agent applied twice took its class name twice).

    Raises:
        UsageError: naming the uid and what to pass.
    """
    try:
        taken = {t.getUid() for t in env._j_stream_execution_environment.getTransformations()}
    except Exception:  # noqa: BLE001 - not a PyFlink environment Flink can list: Flink checks
        return
    if uid in taken:
        raise UsageError(
            f"apply: this job already has an agent operator named {label!r} (uid {uid!r}; "
            f"an agent applied twice takes its class name twice): give each apply its own "
            f"name=, e.g. apply(agent, name={label + '-2'!r}); the name is the operator's "
            f"uid, which a savepoint's state is mapped back to, so keep it once chosen"
        )


def transformations_of(env: Any) -> Any:
    """The live Java list of the transformations added to ``env`` (``None``: not a JVM's)."""
    try:
        return env._j_stream_execution_environment.getTransformations()
    except Exception:  # noqa: BLE001 - a stand-in environment of a unit test
        return None
