"""A fault-injecting HTTP proxy on loopback, in front of the Kinesis emulator.

The ingest is pointed at it with ``load_settings(kinesis_endpoint=proxy.endpoint)`` (the local
profile accepts loopback endpoints), so faults reach the real code path: botocore in the driver
and in every Spark read task. Every ``every``-th request for one of ``operations`` gets the fault,
until ``budget`` faults were injected; the rest are forwarded unchanged. It binds 127.0.0.1 only,
serves in daemon threads, and stops with :meth:`close` (or the ``with`` block).
"""

from __future__ import annotations

import http.client
import json
import socket
import struct
import threading
import time
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from urllib.parse import urlparse

FAULTS = ("throttle", "expired_iterator", "server_error", "connection_reset", "timeout")
# JSON-protocol error answers, as Kinesis sends them.
_ERRORS = {
    "throttle": (400, "ProvisionedThroughputExceededException", "Rate exceeded for shard in stream."),
    "expired_iterator": (400, "ExpiredIteratorException", "Iterator expired."),
    "server_error_500": (500, "InternalFailure", "Internal service failure."),
    "server_error_503": (503, "ServiceUnavailable", "Service unavailable."),
}


class FaultProxy:
    """Forward to ``upstream``; inject ``fault`` into every ``every``-th matching request, ``budget`` times.

    Args:
        upstream: The emulator's endpoint, e.g. ``http://127.0.0.1:45123``.
        fault: One of :data:`FAULTS`, or None to forward everything.
        every: Inject into every this many-th matching request (2: every other one).
        budget: Faults to inject at most.
        operations: Kinesis operations (``GetRecords`` ...) that may get the fault.
        stall_seconds: How long a ``timeout`` fault holds the request before closing it.
        delay_seconds: How long every forwarded request for one of ``operations`` waits first
            (a slow endpoint: it keeps read tasks running long enough to be interrupted).
    """

    def __init__(
        self,
        upstream: str,
        fault: str | None = None,
        every: int = 2,
        budget: int = 10,
        operations: tuple[str, ...] = ("GetRecords", "GetShardIterator"),
        stall_seconds: float = 3.0,
        delay_seconds: float = 0.0,
    ) -> None:
        if fault is not None and fault not in FAULTS:
            raise ValueError(f"unknown fault {fault!r}")
        parsed = urlparse(upstream)
        self.upstream = (parsed.hostname or "127.0.0.1", parsed.port or 80)
        self.fault = fault
        self.every = every
        self.budget = budget
        self.operations = operations
        self.stall_seconds = stall_seconds
        self.delay_seconds = delay_seconds
        self.requests: Counter[str] = Counter()
        self.injected: Counter[str] = Counter()
        self.down = False  # True: refuse every request with a reset, as a dead endpoint would
        self._lock = threading.Lock()
        self._matching = 0
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *_: object) -> None:  # quiet: pytest captures stderr anyway
                pass

            def do_POST(self) -> None:  # http.server's naming
                proxy._handle(self)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.endpoint = f"http://127.0.0.1:{self.server.server_address[1]}"
        self._thread = threading.Thread(target=self.server.serve_forever, name="fault-proxy", daemon=True)
        self._thread.start()

    def __enter__(self) -> FaultProxy:
        return self

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None, trace: TracebackType | None):
        self.close()

    def close(self) -> None:
        """Stop serving and release the port."""
        self.server.shutdown()
        self.server.server_close()

    def _choose(self, operation: str) -> str | None:
        with self._lock:
            self.requests[operation] += 1
            if self.down:
                return "connection_reset"
            if self.fault is None or operation not in self.operations:
                return None
            if self.fault == "expired_iterator" and operation != "GetRecords":
                return None
            self._matching += 1
            if self._matching % self.every or sum(self.injected.values()) >= self.budget:
                return None
            self.injected[self.fault] += 1
            if self.fault == "server_error":
                return "server_error_503" if self.injected[self.fault] % 2 else "server_error_500"
            return self.fault

    def _handle(self, handler: BaseHTTPRequestHandler) -> None:
        body = handler.rfile.read(int(handler.headers.get("Content-Length") or 0))
        operation = (handler.headers.get("X-Amz-Target") or "").rpartition(".")[2]
        action = self._choose(operation)
        if action == "connection_reset":
            # SO_LINGER 0: close() sends RST, so the client sees "connection reset by peer".
            handler.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            handler.close_connection = True
            handler.connection.close()
            return
        if action == "timeout":
            time.sleep(self.stall_seconds)  # longer than the client's read timeout; then hang up
            handler.close_connection = True
            return
        if action in _ERRORS:
            status, code, message = _ERRORS[action]
            self._answer(handler, status, {"Content-Type": "application/x-amz-json-1.1"},
                         json.dumps({"__type": code, "message": message}).encode())  # fmt: skip
            return
        if self.delay_seconds and operation in self.operations:
            time.sleep(self.delay_seconds)  # the injected fault: a slow answer
        connection = http.client.HTTPConnection(*self.upstream, timeout=60)
        try:
            headers = {key: value for key, value in handler.headers.items() if key.lower() != "host"}
            connection.request("POST", handler.path, body=body, headers=headers)
            answer = connection.getresponse()
            payload = answer.read()
            kept = {k: v for k, v in answer.getheaders() if k.lower() not in ("transfer-encoding", "connection")}
            self._answer(handler, answer.status, kept, payload)
        except OSError:
            # The emulator is gone: the client sees a reset, as it would talking to it directly.
            handler.close_connection = True
        finally:
            connection.close()

    @staticmethod
    def _answer(handler: BaseHTTPRequestHandler, status: int, headers: dict[str, str], payload: bytes) -> None:
        handler.send_response_only(status)
        for key, value in headers.items():
            if key.lower() != "content-length":
                handler.send_header(key, value)
        handler.send_header("Content-Length", str(len(payload)))
        handler.send_header("Connection", "close")
        handler.end_headers()
        handler.wfile.write(payload)
