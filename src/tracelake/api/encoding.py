"""Compressed request bodies: `Content-Encoding: gzip` or `deflate`, as OpenLineage clients send
them (the Python client's HTTP transport with `compression: gzip`), decoded before any route reads
them.

An ASGI middleware, so every ingest route takes them alike. The size limit is applied to the body
as sent and again to the body decoded, while it is decoded: a small body that would inflate to
gigabytes is a 413 once it passes the limit, and the server never holds more than the limit of it.
A body that claims an encoding and is not in it is a 400; an encoding not known is a 415.
"""

from __future__ import annotations

import json
import zlib
from typing import Any

from starlette.datastructures import Headers
from starlette.types import ASGIApp, Message, Receive, Scope, Send

# gzip or zlib-wrapped deflate (what HTTP's `deflate` means), told apart by their headers
_GZIP_OR_ZLIB = 32 + zlib.MAX_WBITS
_ENCODINGS = ("gzip", "x-gzip", "deflate")


class _Refused(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


class DecompressedBodies:
    """Decode compressed request bodies for the app behind it, within `max_bytes`."""

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        encoding = Headers(scope=scope).get("content-encoding", "").strip().lower()
        if encoding in ("", "identity"):
            await self.app(scope, receive, send)
            return
        try:
            if encoding not in _ENCODINGS:
                raise _Refused(415, f"Content-Encoding {encoding[:40]!r} is not gzip or deflate")
            body = await self._decoded(receive, encoding)
        except _Refused as refused:
            await _answer(send, refused.status, {"error": refused.message, "path": "$"})
            return
        headers = [
            (key, value)
            for key, value in scope["headers"]
            if key not in (b"content-encoding", b"content-length")
        ]
        headers.append((b"content-length", str(len(body)).encode()))
        sent = False

        async def decoded_receive() -> Message:
            nonlocal sent
            if sent:
                return await receive()  # the disconnect, when it comes
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}

        await self.app({**scope, "headers": headers}, decoded_receive, send)

    async def _decoded(self, receive: Receive, encoding: str) -> bytes:
        decoder = zlib.decompressobj(_GZIP_OR_ZLIB)
        parts: list[bytes] = []
        sent = decoded = 0
        more = True
        while more:
            message = await receive()
            if message["type"] == "http.disconnect":
                raise _Refused(400, "the client went away before the body ended")
            chunk, more = message.get("body", b""), message.get("more_body", False)
            sent += len(chunk)
            if sent > self.max_bytes:
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


async def _answer(send: Send, status: int, body: dict[str, Any]) -> None:
    content = json.dumps(body).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(content)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": content})
