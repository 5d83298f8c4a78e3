"""What the CLI uses of observability's private modules (OpenTelemetry export)."""

from ._otel import export_otel, otlp_exporter

__all__ = ["export_otel", "otlp_exporter"]
