"""What the CLI and compat use of observability's private modules.

OpenTelemetry export (the CLI); the keys of Apache Flink Agents' file event log and its
event type names (compat).
"""

from ._apache_event_log import APACHE_EVENT_TYPES, APACHE_KEYS
from ._otel import export_otel, otlp_exporter

__all__ = ["APACHE_EVENT_TYPES", "APACHE_KEYS", "export_otel", "otlp_exporter"]
