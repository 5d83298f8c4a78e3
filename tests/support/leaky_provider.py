"""A chat-completions server that echoes the caller's API key back, as careless servers do.

Run it in the test process (``with LeakyProvider() as srv``) or as a script in a subprocess
(``python leaky_provider.py PORT_FILE``: it writes its port to the file and serves until
killed). The key it echoes is the one the client sent (``Authorization: Bearer <key>``), so
the test proves that what the client really sent is masked, whatever its shape.

The request's ``model`` chooses the failure:

- ``"401"``: a JSON error body naming the key (``Incorrect API key provided: <key>``);
- ``"500"``: an HTML debug page listing the request headers and the key in base64 (as a
  Basic auth header would carry it), as the message of a JSON error (a proxy's answer);
- ``"500-html"``: the same kind of debug page as an HTML body;
- ``"header"``: a 400 whose body says nothing, with the key in the ``x-request-id`` and
  ``www-authenticate`` response headers (the SDK logs the request id at DEBUG);
- ``"gateway"``: a 403 quoting the ``x-gateway-key`` request header;
- ``"ok"``: a normal answer, with the key in ``x-request-id``.
"""

from __future__ import annotations

import base64
import html
import json
import sys
from http.server import BaseHTTPRequestHandler
from typing import Any

from flink_agents_py.testing import LocalHTTPServer


def _reply(model: str) -> dict[str, Any]:
    return {"id": "chatcmpl-0", "object": "chat.completion", "created": 0, "model": model,
            "choices": [{"index": 0, "finish_reason": "stop", "logprobs": None,
                         "message": {"role": "assistant", "content": "fine"}}],
            "usage": {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4}}


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args: Any) -> None:
        pass

    def _send(self, status: int, body: bytes, content_type: str,
              headers: dict[str, str] | None = None) -> None:
        self.send_response(status)
        self.send_header("content-type", content_type)
        self.send_header("content-length", str(len(body)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self) -> None:  # noqa: N802 - the http.server hook's name
        length = int(self.headers.get("content-length") or 0)
        request = json.loads(self.rfile.read(length) or b"{}")
        auth = self.headers.get("authorization") or ""
        key = auth.split(" ", 1)[1] if " " in auth else auth
        self.server.keys_seen.append(key)  # type: ignore[attr-defined]
        mode = str(request.get("model", "ok"))
        if mode == "401":
            body = {"error": {"message": f"Incorrect API key provided: {key}. You can find "
                                         "your API key at https://example.invalid/keys.",
                              "type": "invalid_request_error", "code": "invalid_api_key"}}
            self._send(401, json.dumps(body).encode(), "application/json")
        elif mode == "500":
            basic = base64.b64encode(f"svc-user:{key}".encode()).decode()
            page = (f"<html><head><title>500 Internal Server Error</title></head><body>"
                    f"<h1>Traceback</h1><pre>KeyError: 'tenant'\n\nMETA:\n"
                    f"HTTP_AUTHORIZATION = {html.escape(auth)!r}\n"
                    f"UPSTREAM_AUTH = 'Basic {basic}'\nOPENAI_API_KEY={key}\n"
                    f"</pre></body></html>")
            # a proxy in front of the model wraps its upstream's debug page in its error
            self._send(500, json.dumps({"error": {"message": page}}).encode(),
                       "application/json")
        elif mode == "500-html":  # the debug page itself, as a framework's debug mode sends it
            page = (f"<html><body><h1>Server Error</h1><pre>Authorization: {html.escape(auth)}"
                    f"\nAPI_KEY={html.escape(key)}</pre></body></html>")
            self._send(500, page.encode(), "text/html; charset=utf-8")
        elif mode == "gateway":
            gateway = self.headers.get("x-gateway-key") or ""
            self.server.keys_seen.append(gateway)  # type: ignore[attr-defined]
            body = {"error": {"message": f"gateway key {gateway!r} is not accepted here"}}
            self._send(403, json.dumps(body).encode(), "application/json")
        elif mode == "header":
            body = {"error": {"message": "bad request", "type": "invalid_request_error"}}
            self._send(400, json.dumps(body).encode(), "application/json",
                       {"x-request-id": key, "www-authenticate": f'Bearer realm="{key}"'})
        else:
            self._send(200, json.dumps(_reply(mode)).encode(), "application/json",
                       {"x-request-id": key})


class LeakyProvider:
    """``with LeakyProvider() as srv``: ``srv.url`` (``.../v1``), ``srv.keys_seen``."""

    def __init__(self) -> None:
        self._httpd = LocalHTTPServer(_Handler)
        self._httpd.keys_seen = []  # type: ignore[attr-defined]
        self.port = self._httpd.port
        self.url = f"{self._httpd.url}/v1"

    @property
    def keys_seen(self) -> list[str]:
        return self._httpd.keys_seen  # type: ignore[attr-defined]

    def __enter__(self) -> LeakyProvider:
        self._httpd.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._httpd.__exit__(*exc)


if __name__ == "__main__":
    srv = LeakyProvider()
    with open(sys.argv[1], "w") as f:
        f.write(str(srv.port))
    srv._httpd.serve_forever(0.05)
