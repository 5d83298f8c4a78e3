"""``env.from_collection(records, type_info=Types.PICKLED_BYTE_ARRAY())`` made to work.

PyFlink (2.x) takes an explicit ``type_info`` to mean "convert each element to that Java
type": it unpickles the elements into Java objects (a dict becomes a ``java.util.HashMap``)
and then hands them to the type's serializer, which for ``PICKLED_BYTE_ARRAY`` expects
``byte[]``: the job fails before submission with a ``ClassCastException`` deep in a Java
trace. Without ``type_info`` PyFlink pickles each element and types the stream
``PICKLED_BYTE_ARRAY``, which is what the user asked for; so on an environment the agents
run on, that ``type_info`` is dropped. Any other ``type_info`` is passed on as given.
"""

from __future__ import annotations

import functools
from typing import Any

__all__ = ["accept_pickled_collections"]

_MARK = "_flink_agents_py_pickled_collections"


def accept_pickled_collections(env: Any) -> None:
    """Make ``env.from_collection(..., type_info=Types.PICKLED_BYTE_ARRAY())`` work.

    Idempotent; called on the environments ``create_stream_environment`` makes and those
    given to ``AgentsExecutionEnvironment.flink(env)`` (a collection made before that call,
    on a plain environment, still meets PyFlink's error: leave ``type_info`` out).

    Args:
        env: a PyFlink ``StreamExecutionEnvironment``.
    """
    if getattr(env, _MARK, False):
        return
    from pyflink.common.typeinfo import PickledBytesTypeInfo

    original = env.from_collection

    @functools.wraps(original)
    def from_collection(collection: Any, type_info: Any = None) -> Any:
        if isinstance(type_info, PickledBytesTypeInfo):
            type_info = None  # PyFlink pickles each element: a PICKLED_BYTE_ARRAY stream
        return original(collection, type_info)

    env.from_collection = from_collection
    setattr(env, _MARK, True)
