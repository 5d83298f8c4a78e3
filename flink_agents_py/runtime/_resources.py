"""The resource environment: builds each declared resource once per operator instance."""

from __future__ import annotations

import threading
from typing import Any

from ..api import Resource, ResourceNotFoundError, ResourceType
from ..plan import AgentPlan

__all__ = ["ResourceEnvironment"]


class ResourceEnvironment:
    """Resources of one plan, built lazily on first ``get`` and shared by every key.

    Thread-safe: actions on the operator thread and calls on the I/O executor may ask at once.
    """

    def __init__(self, plan: AgentPlan) -> None:
        self._plan = plan
        self._built: dict[tuple[ResourceType, str], Resource] = {}
        self._lock = threading.RLock()

    def get(self, name: str, resource_type: ResourceType) -> Resource:
        """Return the resource, building and opening it on first use.

        Raises:
            ResourceNotFoundError: naming the type and name, and what is declared of that type.
            ResourceError: when the descriptor cannot be built.
        """
        k = (resource_type, name)
        res = self._built.get(k)
        if res is not None:
            return res
        with self._lock:
            res = self._built.get(k)
            if res is not None:
                return res
            bucket = self._plan.resources.get(resource_type, {})
            rp = bucket.get(name)
            if rp is None:
                known = ", ".join(sorted(bucket)) or "none"
                raise ResourceNotFoundError(
                    f"no {resource_type.value} resource named {name!r} (declared: {known})"
                )
            res = rp.build()
            res.bind(self.get, name)
            res.open()
            self._built[k] = res
            return res

    def names(self, resource_type: ResourceType) -> list[str]:
        """Declared names of ``resource_type``."""
        return list(self._plan.resources.get(resource_type, {}))

    def close(self) -> None:
        """Close every built resource (errors are ignored; closing is best effort)."""
        with self._lock:
            built, self._built = self._built, {}
        for res in built.values():
            try:
                res.close()
            except Exception:  # noqa: BLE001
                pass

    def __getstate__(self) -> dict[str, Any]:  # built resources never travel
        return {"_plan": self._plan}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["_plan"])  # type: ignore[misc]
