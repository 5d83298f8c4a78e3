"""Readable warnings from this package when the program has not configured logging.

A library must not configure the root logger (that is the application's choice), and
Python's own fallback when no handler is configured, ``logging.lastResort``, prints a bare
message: no level, no logger name, so ``action r0/ask failed for key 'a'`` reads like the
program's output and cannot be filtered by eye. ``install_fallback_handler`` puts one handler
on the ``flink_agents_py`` logger that stands in for ``lastResort`` for this package's
records only, and only while logging is unconfigured: it writes WARNING and above to the
current ``sys.stderr`` as ``WARNING flink_agents_py.runtime: message``. As soon as any other
handler would receive the record (``logging.basicConfig``, pytest's capture, PyFlink's
worker, a handler on a ``flink_agents_py`` logger), it writes nothing and that handler alone
shows the record, so nothing is printed twice. Setting ``logging.lastResort = None`` silences
it as it silences Python's fallback.
"""

from __future__ import annotations

import logging
import sys

__all__ = ["FALLBACK_FORMAT", "install_fallback_handler"]

FALLBACK_FORMAT = "%(levelname)s %(name)s: %(message)s"
"""How a record is written when logging is unconfigured: its level, its logger, the message."""

_PACKAGE_LOGGER = "flink_agents_py"


class _FallbackHandler(logging.Handler):
    """``logging.lastResort`` for this package's records, with their level and logger name."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.setFormatter(logging.Formatter(FALLBACK_FORMAT))

    def _configured(self, record: logging.LogRecord) -> bool:
        """Whether another handler receives the record (so this one must stay silent)."""
        logger: logging.Logger | None = logging.getLogger(record.name)
        while logger is not None:
            if any(h is not self for h in logger.handlers):
                return True
            if not logger.propagate:
                break
            logger = logger.parent
        return False

    def handle(self, record: logging.LogRecord) -> bool:
        """Write the record only when no other handler would and the fallback is not off.

        Args:
            record: the record logged.

        Returns:
            Whether the record was written.
        """
        if logging.lastResort is None or self._configured(record):
            return False
        return bool(super().handle(record))

    def emit(self, record: logging.LogRecord) -> None:
        """Write one formatted record to the current ``sys.stderr``.

        Args:
            record: the record logged.
        """
        stream = sys.stderr
        if stream is None:  # pythonw, a detached process
            return
        try:
            stream.write(self.format(record) + "\n")
            stream.flush()
        except Exception:  # noqa: BLE001 - logging never raises into the caller
            self.handleError(record)


def install_fallback_handler() -> None:
    """Put the fallback handler on the ``flink_agents_py`` logger (once; idempotent)."""
    logger = logging.getLogger(_PACKAGE_LOGGER)
    if not any(isinstance(h, _FallbackHandler) for h in logger.handlers):
        logger.addHandler(_FallbackHandler())
