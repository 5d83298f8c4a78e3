"""Keeping apache-beam's warnings about optional filesystems out of a job's output.

PyFlink starts apache-beam in the client (the loopback server of
``StreamExecutionEnvironment``) and in process-mode Python workers. Importing
``apache_beam.io.filesystems`` tries each optional filesystem; when the ``google.cloud``
namespace exists (``googleapis-common-protos`` installs it, for OpenTelemetry and gRPC) but
``google-cloud-storage`` does not, the GCS import fails with an ``ImportError`` that beam
logs as ``WARNING Failed to import GCSFileSystem; loading of this filesystem will be
skipped`` on every run. Agent jobs use no beam filesystem, so ``quiet_optional_filesystems``
installs a logging filter on that logger which turns those lines into DEBUG records of
``flink_agents_py.flink`` (still there for whoever looks). It imports neither pyflink nor
beam, so it can run before them.
"""

from __future__ import annotations

import logging

__all__ = ["quiet_optional_filesystems", "quiet_worker_environment_dumps"]

BEAM_FILESYSTEMS_LOGGER = "apache_beam.io.filesystems"
"""The logger apache-beam reports a filesystem it could not import on."""

_OPTIONAL = ("GCSFileSystem", "S3FileSystem", "BlobStorageFileSystem", "HadoopFileSystem")

log = logging.getLogger("flink_agents_py.flink")


class _OptionalFilesystems(logging.Filter):
    """Drops beam's "Failed to import <optional filesystem>" warnings (kept at DEBUG)."""

    def filter(self, record: logging.LogRecord) -> bool:
        text = str(record.msg)
        if text.startswith("Failed to import ") and any(f in text for f in _OPTIONAL):
            if log.isEnabledFor(logging.DEBUG):
                log.debug("apache-beam: %s", record.getMessage())
            return False
        return True


def quiet_optional_filesystems() -> None:
    """Install the filter on apache-beam's filesystems logger (once; idempotent).

    Called when this module is imported (with ``flink_agents_py.flink``) and by
    ``create_stream_environment``, before PyFlink starts apache-beam in this process (a
    process-mode Python worker starts beam before any job code: its TaskManager log keeps
    the line). A failure to load beam's
    ``LocalFileSystem`` is not filtered (it would be a broken installation).
    """
    logger = logging.getLogger(BEAM_FILESYSTEMS_LOGGER)
    if not any(isinstance(f, _OptionalFilesystems) for f in logger.filters):
        logger.addFilter(_OptionalFilesystems())


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


quiet_optional_filesystems()  # on import of flink_agents_py.flink, before pyflink starts beam
