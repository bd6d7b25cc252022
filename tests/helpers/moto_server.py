"""A moto server on loopback (Kinesis, S3, Glue, STS on one port), started and stopped by a test module."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator


@contextlib.contextmanager
def moto_server() -> Iterator[str]:
    """Start moto's threaded server on 127.0.0.1 and a free port; yield its endpoint; stop it.

    moto keeps its services' state per process, not per server: what one module made (a Glue database,
    a bucket) would still be there for the next module's server in the same test worker. So the state
    is reset when the server stops (moto's own ``/moto-api/reset``).
    """
    import urllib.request

    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    endpoint = f"http://{host}:{port}"
    try:
        yield endpoint
    finally:
        urllib.request.urlopen(urllib.request.Request(f"{endpoint}/moto-api/reset", method="POST"), timeout=30)  # noqa: S310 - loopback
        server.stop()
