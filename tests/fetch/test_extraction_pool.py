"""app.fetch.pool: bodies extracted in processes, within a deadline and a memory cap, and a
pool that outlives a process it lost."""

import asyncio
import time

import pytest

from app.content.extract import ExtractionLimits, extract
from app.content.types import UnparseableContent
from app.fetch.pool import (
    SMALL_PAGE_BYTES,
    SMALL_PAGE_TAGS,
    ExtractionFailed,
    ExtractionPool,
    ExtractionTimeout,
    PoolSettings,
    where,
)
from tests.support import pdfs

PAGE = (
    b"<html><head><title>Pool</title></head><body><article><h1>Heading</h1>"
    + b"<p>A paragraph long enough to be the main text of this page, surely, again.</p>" * 120
    + b"</article></body></html>"
)


def pool(timeout: float = 30.0, memory_mb: int = 1024, processes: int = 1) -> ExtractionPool:
    return ExtractionPool(PoolSettings(processes, timeout, memory_mb, ExtractionLimits(50)))


async def test_a_page_extracted_in_a_process_equals_one_extracted_here() -> None:
    """The pool's Document is the same as extract's here, and the processes were started."""
    extraction = pool()
    try:
        document = await extraction.extract(PAGE, "text/html", "https://example.test/")
        started = extraction._pool is not None
    finally:
        extraction.close()
    assert (extract(PAGE, "text/html", url="https://example.test/"), True) == (document, started)


async def test_a_pdf_failure_crosses_the_process_boundary() -> None:
    """A body that does not parse raises UnparseableContent in the caller, not a pool error."""
    extraction = pool()
    try:
        with pytest.raises(UnparseableContent):
            await extraction.extract(b"%PDF-1.7 not really", "application/pdf", None)
    finally:
        extraction.close()


async def test_a_body_past_its_deadline_is_killed_and_the_pool_goes_on() -> None:
    """A compression bomb that would take seconds ends ExtractionTimeout at the deadline, and
    the next body is extracted by a new process."""
    extraction = pool(timeout=0.5)
    try:
        start = time.monotonic()
        with pytest.raises((ExtractionTimeout, ExtractionFailed)):
            await extraction.extract(pdfs.compression_bomb_pdf(), "application/pdf", None)
        elapsed = time.monotonic() - start
        document = await extraction.extract(PAGE, "text/html", None)
    finally:
        extraction.close()
    assert (True, "Pool") == (elapsed < 10, document.metadata.title)


async def test_a_body_that_needs_more_memory_than_the_cap_fails_without_harm() -> None:
    """Under a 256 MB cap, a PDF that inflates to 1 GiB ends its process (ExtractionFailed),
    within the deadline, and the pool extracts the next body."""
    extraction = pool(timeout=60, memory_mb=256)
    try:
        start = time.monotonic()
        with pytest.raises(ExtractionFailed):
            await extraction.extract(pdfs.compression_bomb_pdf(), "application/pdf", None)
        elapsed = time.monotonic() - start
        document = await extraction.extract(PAGE, "text/html", None)
    finally:
        extraction.close()
    assert (True, "Pool") == (elapsed < 60, document.metadata.title)


SMALL_PAGE = b"<title>Small</title><p>" + b"x" * 2000 + b"</p>"


@pytest.mark.parametrize(
    ("content_type", "body", "place"),
    [
        ("text/html", SMALL_PAGE, "loop"),
        ("text/html", b"<p>x</p>" * (SMALL_PAGE_TAGS // 2 + 1), "process"),
        ("text/html", b"<p>" + b"x" * SMALL_PAGE_BYTES + b"</p>", "process"),
        ("application/pdf", b"%PDF-1.7", "process"),
        ("application/json", b"[1]", "loop"),
        ("application/xml", b"<" * SMALL_PAGE_BYTES, "loop"),
        ("text/plain", b"x" * (SMALL_PAGE_BYTES + 1), "process"),
        ("application/xml", b"<" * (SMALL_PAGE_BYTES + 1), "process"),
        ("application/atom+xml", b"<" * (SMALL_PAGE_BYTES + 1), "process"),
        ("application/json", b" " * (SMALL_PAGE_BYTES + 1), "process"),
        (None, b"x" * (SMALL_PAGE_BYTES + 1), "process"),
        ("image/png", b"x" * (SMALL_PAGE_BYTES + 1), "loop"),
        (None, b"x", "loop"),
    ],
)
def test_where_a_body_is_extracted(content_type: str | None, body: bytes, place: str) -> None:
    """A PDF, a page past a few dozen tags or 8 KiB, and any text past 8 KiB go to the
    processes; a small page, a small text body and a body with no text stay on the loop."""
    assert place == where(content_type, body)


@pytest.mark.parametrize(
    ("content_type", "body"),
    [
        ("application/xml", b"<" * 1024 * 1024),
        ("application/json", b"[" + b"1," * 100_000 + b"1]"),
        ("text/plain", b"plain text " * 10_000),
    ],
)
async def test_large_text_is_parsed_in_the_processes(content_type: str, body: bytes) -> None:
    """XML, JSON and plain text past 8 KiB are parsed in the processes, under their deadline,
    not in a thread of the worker: the same Document as extract's here."""
    extraction = pool()
    try:
        document = await extraction.extract(body, content_type, None)
        started = extraction._pool is not None
    finally:
        extraction.close()
    assert (extract(body, content_type), True) == (document, started)


async def test_small_pages_and_json_never_start_the_processes() -> None:
    """A small page and a JSON body are extracted without starting the processes."""
    small = SMALL_PAGE
    extraction = pool()
    try:
        json = await extraction.extract(b'{"a": 1}', "application/json", None)
        html = await extraction.extract(small, "text/html", None)
        started = extraction._pool is not None
    finally:
        extraction.close()
    assert ('{"a": 1}', "Small", False) == (json.text, html.metadata.title, started)


async def test_many_bodies_at_once_all_come_back() -> None:
    """Fifty bodies in flight at once over two processes: each gets its own Document."""
    extraction = pool(processes=2)
    pages = [PAGE.replace(b"Pool", f"Page {n}".encode()) for n in range(50)]
    try:
        documents = await asyncio.gather(
            *(extraction.extract(page, "text/html", None) for page in pages)
        )
    finally:
        extraction.close()
    assert [f"Page {n}" for n in range(50)] == [d.metadata.title for d in documents]
