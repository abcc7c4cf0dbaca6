"""Content codings undone in bounded steps, so a compression bomb is counted before it inflates.

`Inflater` gives zlib at most DECODE_STEP bytes of output per step; the fetcher counts each
step against INGEST_MAX_BODY_BYTES. Only gzip and deflate are offered (`ACCEPT_ENCODING`):
br and zstd have no bounded-output decoder in the standard library.
"""

import zlib
from collections.abc import Iterator

import httpx

ACCEPT_ENCODING = "gzip, deflate"
"""Only what we can inflate in bounded steps (no br or zstd)."""
DECODE_STEP = 64 * 1024


def codings(header: str | None) -> list[str]:
    codings = (coding.strip().lower() for coding in (header or "").split(","))
    return [coding for coding in codings if coding and coding != "identity"]


class Inflater:
    """Decodes one content coding in steps of at most DECODE_STEP bytes of output."""

    CODINGS = ("gzip", "x-gzip", "deflate")

    def __init__(self, coding: str | None) -> None:
        self.coding = coding
        self._zlib: zlib._Decompress | None = None
        if coding is not None:
            gzip = coding in ("gzip", "x-gzip")
            self._zlib = zlib.decompressobj(zlib.MAX_WBITS | 16 if gzip else zlib.MAX_WBITS)
        self._started = False

    def feed(self, data: bytes) -> Iterator[bytes]:
        if self._zlib is None:
            yield data
            return
        while data and not self._zlib.eof:  # bytes after the end of the stream are ignored
            try:
                out = self._zlib.decompress(data, DECODE_STEP)
            except zlib.error:
                if self.coding != "deflate" or self._started:
                    raise
                # "deflate" should be zlib-wrapped (RFC 9110), but some servers send it raw.
                self._zlib = zlib.decompressobj(-zlib.MAX_WBITS)
                out = self._zlib.decompress(data, DECODE_STEP)
            self._started = True
            data = self._zlib.unconsumed_tail
            if out:
                yield out

    def flush(self) -> bytes:
        """What zlib still holds once the input is all in: at most one match, a few bytes."""
        return self._zlib.flush() if self._zlib is not None else b""


async def bounded_body(response: httpx.Response, limit: int) -> bytes:
    """A streamed answer's body decoded, up to `limit` bytes and one step past them (so the
    caller can tell a body cut from one that fits). A coding not offered, or a body that
    does not inflate, reads as what inflated before (nothing for the former)."""
    coding = codings(response.headers.get("content-encoding"))
    if len(coding) > 1 or (coding and coding[0] not in Inflater.CODINGS):
        return b""
    inflater = Inflater(coding[0] if coding else None)
    body = bytearray()
    try:
        async for raw in response.aiter_raw():
            for chunk in inflater.feed(raw):
                body += chunk
                if len(body) > limit:
                    return bytes(body)
        body += inflater.flush()
    except zlib.error:
        pass
    return bytes(body)
