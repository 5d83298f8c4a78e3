"""Keeping apache-beam's Java side from writing workers' environments into a job's logs.

(Beam's Python warnings about optional filesystems are quieted by ``flink_agents_py``'s own
``__init__``, before PyFlink starts beam: see ``flink_agents_py/_beam_logging.py``.)
"""

from __future__ import annotations

import logging

__all__ = ["quiet_worker_environment_dumps"]

log = logging.getLogger("flink_agents_py.flink")


BEAM_BUNDLE_FACTORY_LOGGER = "org.apache.beam.runners.fnexecution.control.DefaultJobBundleFactory"
"""The Java logger that writes a process-mode Python worker's whole environment."""


def quiet_worker_environment_dumps() -> None:
    """Keep the environment of process-mode Python workers out of the MiniCluster's log.

    Beam's ``DefaultJobBundleFactory`` logs ``Closing environment`` (INFO) and ``Expiring
    environment`` (WARN) with the worker's environment payload: every variable of the
    TaskManager's environment, the one an ``api_key_env`` names too, in plain text in the
    TaskManager log (``<site-packages>/pyflink/log/`` for a MiniCluster), where the Python
    masking of secrets cannot reach. Its logger is set to ERROR in this process's JVM, which
    runs the MiniCluster (its only other lines are warnings about cleaning up servers). A
    standalone cluster's TaskManagers need the same line in their log4j configuration
    (``docs/how-to/cluster.md``).

    Idempotent; does nothing when the JVM's logging is not log4j 2.
    """
    from pyflink.java_gateway import get_gateway

    jvm = get_gateway().jvm
    try:
        jvm.org.apache.logging.log4j.core.config.Configurator.setLevel(
            BEAM_BUNDLE_FACTORY_LOGGER, jvm.org.apache.logging.log4j.Level.getLevel("ERROR"))
    except Exception:  # noqa: BLE001 - another logging backend (Py4J raises its own errors)
        log.debug("could not set the level of %s", BEAM_BUNDLE_FACTORY_LOGGER, exc_info=True)

