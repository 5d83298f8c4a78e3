"""The OTLP/HTTP span exporter, with every credential it sends registered as a secret.

The exporter sends the headers it is given and those of the OpenTelemetry environment
variables (``OTEL_EXPORTER_OTLP_TRACES_HEADERS``, else ``OTEL_EXPORTER_OTLP_HEADERS``: the
SDK merges them in whatever it is given), and a collector or a proxy may quote one back (in
its status line, which the exporter logs and the ``trace`` command reports). Each value is
registered (``api.register_header_secret``: the whole value and its credential after
``Bearer``/``Basic``) before the exporter is made, whichever way it was configured, and so
is a credential in the endpoint's URL; the variables' headers are registered too when spans
go through an exporter of the user's (OpenTelemetry's gRPC exporter reads them as well).
"""

from __future__ import annotations

import os
from typing import Any
from urllib.parse import unquote, urlparse

from ..api.internal import register_header_secret, register_plan_credentials

__all__ = ["OTEL_HINT", "OTLP_HEADER_VARIABLES", "otlp_exporter", "register_environment_headers",
           "traces_url"]

OTEL_HINT = "pip install 'flink-agents-py[otel]'"

OTLP_HEADER_VARIABLES = ("OTEL_EXPORTER_OTLP_TRACES_HEADERS", "OTEL_EXPORTER_OTLP_HEADERS")
"""The environment variables the OTLP exporter reads headers from (``name=value,...``,
values percent-encoded)."""


def _env_headers(text: str) -> dict[str, str]:
    """The headers of an ``OTEL_EXPORTER_OTLP_*HEADERS`` value (its format, leniently)."""
    found: dict[str, str] = {}
    for item in text.split(","):
        name, eq, value = item.partition("=")
        if eq and name.strip():
            found[unquote(name.strip())] = unquote(value.strip())
    return found


def register_environment_headers() -> None:
    """Register the values of the headers ``OTLP_HEADER_VARIABLES`` set, as secrets.

    Called wherever spans are exported (``otlp_exporter``, and for any exporter given to
    ``export_otel`` or ``OtelSink``: OpenTelemetry's OTLP exporters, gRPC's too, read them).
    """
    for variable in OTLP_HEADER_VARIABLES:
        for name, value in _env_headers(os.environ.get(variable, "")).items():
            register_header_secret(value, f"${variable} header {name}")


def otlp_exporter(endpoint: str, headers: dict[str, str] | None = None) -> Any:
    """An OTLP/HTTP (protobuf) span exporter sending to ``endpoint``.

    Args:
        endpoint: the collector's URL; ``/v1/traces`` is added when it has no path
            (``http://localhost:4318`` -> ``http://localhost:4318/v1/traces``).
        headers: extra HTTP headers (e.g. an authorization header for a hosted backend).
            Their values, and those of the headers the exporter takes from
            ``OTLP_HEADER_VARIABLES``, are registered as secrets (masked in errors and logs).

    Returns:
        An ``OTLPSpanExporter``.

    Raises:
        ImportError: when the OTLP exporter is not installed (names the extra).
        ValueError: when ``endpoint`` is not an http(s) URL.
    """
    endpoint = traces_url(endpoint)
    for name, value in (headers or {}).items():
        register_header_secret(value, f"OTLP header {name}")
    register_environment_headers()
    try:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    except ImportError as e:
        raise ImportError("--otlp needs opentelemetry-exporter-otlp-proto-http: "
                          f"{OTEL_HINT}") from e
    return OTLPSpanExporter(endpoint=endpoint, headers=headers)


def traces_url(endpoint: str) -> str:
    """``endpoint`` with ``/v1/traces`` when it has no path; its credentials registered.

    A token in the URL (``?api_key=...``, ``user:<password>@``) is a secret: the warning
    about undelivered spans and the exporter's errors name the endpoint.

    Returns:
        The URL spans are sent to.

    Raises:
        ValueError: when ``endpoint`` is not an http(s) URL.
    """
    register_plan_credentials(endpoint, "the OTLP endpoint")
    url = urlparse(endpoint)
    if url.scheme not in ("http", "https") or not url.netloc:
        raise ValueError(f"OTLP endpoint must be an http(s) URL, not {endpoint!r}")
    return endpoint.rstrip("/") + "/v1/traces" if url.path in ("", "/") else endpoint
