"""Running an ASGI app under uvicorn: in the foreground (`tracelake serve`) or on loopback in a
background thread (tests, benchmarks, examples), stopped cleanly when the block ends."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import uvicorn


def serve_forever(app: Any, host: str, port: int) -> None:
    uvicorn.run(app, host=host, port=port, log_level="info", access_log=False)


@contextmanager
def serve_in_thread(app: Any, port: int = 0, *, timeout: float = 10.0) -> Iterator[str]:
    """Serve `app` on 127.0.0.1 (port 0: any free one); yields the base URL."""
    config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", access_log=False)
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, name="tracelake-http", daemon=True)
    thread.start()
    deadline = time.monotonic() + timeout
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("the HTTP server did not start")
        time.sleep(0.01)
    bound = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{bound}"
    finally:
        server.should_exit = True
        thread.join(timeout)
