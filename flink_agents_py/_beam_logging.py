"""Keeping apache-beam's warnings about optional filesystems out of a program's output.

PyFlink starts apache-beam in the client (the loopback server a
``StreamExecutionEnvironment`` starts) and in process-mode Python workers. Importing
``apache_beam.io.filesystems`` tries each optional filesystem; when the ``google.cloud``
namespace exists (``googleapis-common-protos`` installs it, for OpenTelemetry and gRPC) but
``google-cloud-storage`` does not, the GCS import fails with an ``ImportError`` that beam
logs as ``WARNING Failed to import GCSFileSystem; loading of this filesystem will be
skipped`` on every run. Agent jobs use no beam filesystem, so ``quiet_optional_filesystems``
installs a logging filter on that logger which turns those lines into DEBUG records of
``flink_agents_py.flink`` (still there for whoever looks).

It lives at the package's root, importing neither pyflink nor beam, because the filter must
be in place before PyFlink starts beam: a program written for Apache Flink Agents imports
``pyflink`` and ``flink_agents_py.compat`` (or ``flink_agents_py``), never
``flink_agents_py.flink``, and then builds a plain environment with
``StreamExecutionEnvironment.get_execution_environment()``, which starts beam. Importing
any part of ``flink_agents_py`` installs it.
"""

from __future__ import annotations

import logging

__all__ = ["BEAM_FILESYSTEMS_LOGGER", "quiet_optional_filesystems"]

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

    Called when ``flink_agents_py`` is imported and by ``create_stream_environment``, before
    PyFlink starts apache-beam in this process (a process-mode Python worker starts beam
    before any job code: its TaskManager log keeps the line). A failure to load beam's
    ``LocalFileSystem`` is not filtered (it would be a broken installation).
    """
    logger = logging.getLogger(BEAM_FILESYSTEMS_LOGGER)
    if not any(isinstance(f, _OptionalFilesystems) for f in logger.filters):
        logger.addFilter(_OptionalFilesystems())
