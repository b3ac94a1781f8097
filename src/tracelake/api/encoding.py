"""Request bodies, read whole and within the size limit by an ASGI middleware before any route
sees them, and decoded when compressed (`Content-Encoding: gzip` or `deflate`, as the OpenLineage
Python client sends them with `compression: gzip`), so every route takes bodies alike and refuses
them alike, in JSON. A body whose `Content-Length` is over the limit is a 413 before any of it is
read; one sent without a length (chunked) is a 413 once it passes the limit. The limit holds for
the body as sent and again for the body decoded, while it is decoded: a small body that would
inflate to gigabytes is a 413 once it passes the limit, and the server never holds more than the
limit of it. A body that claims an encoding and is not in it is a 400; an encoding not known is a
415. After a refusal the rest of the body is read and dropped (within bounds) before the
connection closes: a server that closes with unread bytes resets the connection, and a client
still sending would see the reset, not the answer.
"""

from __future__ import annotations

import asyncio
import json
import zlib
from collections.abc import AsyncIterator

from starlette.datastructures import Headers
from starlette.types import ASGIApp, Message, Receive, Scope, Send

# gzip or zlib-wrapped deflate (what HTTP's `deflate` means), told apart by their headers
_GZIP_OR_ZLIB = 32 + zlib.MAX_WBITS
_ENCODINGS = ("gzip", "x-gzip", "deflate")
# How much of a refused body is read and dropped so that its sender sees the answer: past these a
# client is not one that will read it, and the connection is closed under it.
_DRAIN_BYTES = 256 * 1024 * 1024
_DRAIN_SECONDS = 30.0


class _Refused(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


class RequestBodies:
    """Hand the app behind it each request body whole, decoded, within `max_bytes`."""

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        reading = _Reading(receive)
        headers = Headers(scope=scope)
        encoding = headers.get("content-encoding", "").strip().lower()
        try:
            declared = _declared_length(headers)
            if declared is not None and declared > self.max_bytes:
                raise _Refused(413, f"the body is over the limit of {self.max_bytes:,} bytes")
            if encoding in ("", "identity"):
                body = await self._read(reading)
            elif encoding in _ENCODINGS:
                body = await self._decoded(reading, encoding)
            else:
                raise _Refused(415, f"Content-Encoding {encoding[:40]!r} is not gzip or deflate")
        except _Refused as refused:
            # a client that waits for `100 Continue` has sent nothing, and must not be told to
            await _refuse(
                send, refused, reading if reading.started or not _expects_continue(headers) else None
            )
            return
        if encoding not in ("", "identity"):
            kept = [(k, v) for k, v in scope["headers"] if k not in (b"content-encoding", b"content-length")]
            scope = {**scope, "headers": [*kept, (b"content-length", str(len(body)).encode())]}
        sent = False

        async def whole() -> Message:
            nonlocal sent
            if sent:
                return await receive()  # the disconnect, when it comes
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}

        await self.app(scope, whole, send)

    async def _read(self, reading: _Reading) -> bytes:
        parts: list[bytes] = []
        async for chunk in reading.chunks():
            if reading.size > self.max_bytes:
                raise _Refused(413, f"the body is over the limit of {self.max_bytes:,} bytes")
            parts.append(chunk)
        return b"".join(parts)

    async def _decoded(self, reading: _Reading, encoding: str) -> bytes:
        decoder = zlib.decompressobj(_GZIP_OR_ZLIB)
        parts: list[bytes] = []
        decoded = 0
        async for chunk in reading.chunks():
            if reading.size > self.max_bytes:
                raise _Refused(413, f"the body is over the limit of {self.max_bytes:,} bytes")
            while chunk:
                try:
                    # never more than one byte past the limit out of the decoder at once
                    part = decoder.decompress(chunk, self.max_bytes - decoded + 1)
                except zlib.error as error:
                    raise _Refused(400, f"the body is not valid {encoding}: {error}") from None
                decoded += len(part)
                if decoded > self.max_bytes:
                    raise _Refused(413, f"the body decoded is over the limit of {self.max_bytes:,} bytes")
                parts.append(part)
                chunk = decoder.unconsumed_tail
        if not decoder.eof:
            raise _Refused(
                400, f"the body is not valid {encoding}: it ends before its compressed stream does"
            )
        return b"".join(parts)


class _Reading:
    """A request body as it arrives: how much of it came, and whether it has ended."""

    def __init__(self, receive: Receive) -> None:
        self.receive = receive
        self.size = 0
        self.started = False
        self.ended = False

    async def chunks(self) -> AsyncIterator[bytes]:
        while not self.ended:
            self.started = True
            message = await self.receive()
            if message["type"] == "http.disconnect":
                self.ended = True
                raise _Refused(400, "the client went away before the body ended")
            chunk = message.get("body", b"")
            self.ended = not message.get("more_body", False)
            self.size += len(chunk)
            yield chunk

    async def drop_the_rest(self) -> None:
        try:
            async with asyncio.timeout(_DRAIN_SECONDS):
                dropped = 0
                async for chunk in self.chunks():
                    dropped += len(chunk)
                    if dropped > _DRAIN_BYTES:
                        return
        except (TimeoutError, _Refused):
            return


def _declared_length(headers: Headers) -> int | None:
    try:
        return int(headers["content-length"])
    except (KeyError, ValueError):
        return None  # the HTTP server refuses a malformed length before the app sees it


def _expects_continue(headers: Headers) -> bool:
    return headers.get("expect", "").strip().lower() == "100-continue"


async def _refuse(send: Send, refused: _Refused, unread: _Reading | None) -> None:
    """Answer the refusal at once, then read what is left of the body before ending the answer (and
    the connection: the rest of a refused body is not worth reading on it)."""
    content = json.dumps({"error": refused.message, "path": "$"}).encode()
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(content)).encode()),
        (b"connection", b"close"),
    ]
    await send({"type": "http.response.start", "status": refused.status, "headers": headers})
    await send({"type": "http.response.body", "body": content, "more_body": True})
    if unread is not None:
        await unread.drop_the_rest()
    await send({"type": "http.response.body", "body": b"", "more_body": False})
