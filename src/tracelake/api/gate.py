"""Read requests answered a few at a time, in the order they came, instead of all at once.

A read (lineage, impact, search, Marquez's lineage…) is mostly Python computing on the graph
index, and a server process runs Python one thread at a time. Left to FastAPI's thread pool,
eight reads in flight share the GIL in 5 ms turns: each takes about eight times its own time,
and handing the lock over costs CPU of its own, so a large closure behind seven others answers
in hundreds of milliseconds. Queued in arrival order at a gate of `ApiSettings.read_concurrency`
places (one by default) each waits only for the reads before it. `bench/api.py` runs the same
load both ways: at 8 clients on 2 cores and a million edges, the gate of one took downstream p99
from 427 to 174 ms and the server's CPU a read from 12.9 to 9.0 ms (bench/README, run 7).
A server whose reads wait on a remote database more than they compute may want more places.
Writes are not gated: an ingest awaits its group commit, and holding a place while it waits
would stop every read behind it; nor are subscriptions, whose requests may wait for events.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Coroutine
from typing import Any

import anyio
from fastapi import Request, Response
from fastapi.routing import APIRoute

from tracelake.api.deps import READ
from tracelake.api.json_bodies import JsonBodyRoute

READ_CONCURRENCY = 1  # the default of `ApiSettings.read_concurrency`


class GatedRoute(APIRoute):
    """A route whose requests pass the app's read gate when the route is a read (`READ`)."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()
        if not any(dependency is READ for dependency in self.dependencies):
            return handler

        async def gated(request: Request) -> Response:
            # The index brought to the store's version before the gate, not behind it: a catch-up
            # under the gate would hold every read back, and after a write each read in turn would
            # find one more to make. Out here one request catches up while the others answer from
            # the index there is (`IndexCache.get`), and the next read through the gate finds it.
            # (only an index there is: a read that needs none never waits for a first build)
            service = request.app.state.service
            if service.index_loaded:
                with contextlib.suppress(Exception):  # the route meets the failure if it needs it
                    await anyio.to_thread.run_sync(service.index)
            async with request.app.state.read_gate:
                return await handler(request)

        return gated


class GatedJsonBodyRoute(GatedRoute, JsonBodyRoute):
    """A gated route whose JSON body is checked first (`JsonBodyRoute`)."""
