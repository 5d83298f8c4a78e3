"""What the CLI and compat use of observability's private modules.

OpenTelemetry export (the CLI); the keys of Apache Flink Agents' file event log (compat).
"""

from ._apache_event_log import APACHE_KEYS
from ._otel import export_otel, otlp_exporter

__all__ = ["APACHE_KEYS", "export_otel", "otlp_exporter"]
