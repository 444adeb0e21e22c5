"""A minimal OTLP/HTTP traces receiver on 127.0.0.1 (protobuf), for export tests."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)


def _value(v: Any) -> Any:
    kind = v.WhichOneof("value")
    if kind == "array_value":
        return [_value(x) for x in v.array_value.values]
    return getattr(v, kind) if kind else None


class OTLPReceiver:
    """Collects the spans POSTed to ``/v1/traces``: ``spans`` holds (name, attributes, ...)."""

    def __init__(self) -> None:
        self.spans: list[dict[str, Any]] = []
        self.resources: list[dict[str, Any]] = []
        self.received = threading.Condition()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - the stdlib's name
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                ok = self.path == "/v1/traces"
                if ok:
                    receiver._take(ExportTraceServiceRequest.FromString(body))
                reply = ExportTraceServiceResponse().SerializeToString()
                self.send_response(200 if ok else 404)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(reply)))
                self.end_headers()
                self.wfile.write(reply)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def _take(self, request: ExportTraceServiceRequest) -> None:
        with self.received:
            for rs in request.resource_spans:
                self.resources.append({a.key: _value(a.value) for a in rs.resource.attributes})
                for ss in rs.scope_spans:
                    for s in ss.spans:
                        self.spans.append(
                            {
                                "name": s.name,
                                "trace_id": s.trace_id.hex(),
                                "span_id": s.span_id.hex(),
                                "parent_id": s.parent_span_id.hex(),
                                "start": s.start_time_unix_nano,
                                "end": s.end_time_unix_nano,
                                "attributes": {a.key: _value(a.value) for a in s.attributes},
                            }
                        )
            self.received.notify_all()

    def wait_for(self, name: str, timeout: float = 20) -> list[dict[str, Any]]:
        """The spans received once one named `name` has arrived."""
        with self.received:
            self.received.wait_for(lambda: any(s["name"] == name for s in self.spans), timeout)
            return list(self.spans)

    def __enter__(self) -> OTLPReceiver:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()
