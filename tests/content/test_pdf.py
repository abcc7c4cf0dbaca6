"""app.content.pdf: a PDF's text, Markdown and metadata, its page limit and its failures."""

import time
import zlib

import pytest

from app.content.metadata import FIELD_MAX_CHARS
from app.content.pdf import markdown_paragraph, paragraphs, pdf_date, pdf_document
from app.content.types import UnparseableContent
from app.model import PageMetadata
from tests.support import pdfs

PAGES = [
    "First page, (parenthesised) and a \\ backslash\nits second line\n\nA second paragraph",
    "Second page\nwith Latin-1: café, naïve",
    "Third page",
]


def test_multi_page_text_round_trips() -> None:
    """Each page's text comes back in order, pages split by a form feed, a blank line between
    paragraphs."""
    document = pdf_document(pdfs.text_pdf(PAGES), max_pages=50)

    assert "\f".join(PAGES) == document.text


def test_markdown_marks_each_page() -> None:
    """The Markdown has a page marker line before each page's paragraphs."""
    document = pdf_document(pdfs.text_pdf(PAGES), max_pages=50)

    expected = (
        "<!-- page 1 -->\n\n"
        "First page, (parenthesised) and a \\ backslash\nits second line\n\n"
        "A second paragraph\n\n"
        "<!-- page 2 -->\n\n"
        "Second page\nwith Latin-1: café, naïve\n\n"
        "<!-- page 3 -->\n\n"
        "Third page"
    )
    assert expected == document.markdown


def test_markdown_escapes_lines_that_would_start_blocks() -> None:
    """Lines that Markdown would read as a heading, list items or a quote are escaped."""
    document = pdf_document(pdfs.text_pdf(["# not a heading\n- not a list\n1. nor this\n> no"]), 50)

    expected = "<!-- page 1 -->\n\n\\# not a heading\n\\- not a list\n1\\. nor this\n\\> no"
    assert expected == document.markdown


@pytest.mark.parametrize(
    ("paragraph", "markdown"),
    [
        ("plain text", "plain text"),
        ("# heading?", "\\# heading?"),
        ("    indented code?", "indented code?"),
        ("2024. A year", "2024\\. A year"),
        ("3) item", "3\\) item"),
        ("2024 was a year", "2024 was a year"),
        ("<!-- page 9 -->", "\\<!-- page 9 -->"),
        ("a # in the middle\n* starred", "a # in the middle\n\\* starred"),
    ],
)
def test_markdown_paragraph(paragraph: str, markdown: str) -> None:
    """Only a line's first characters are escaped, and only when they would start a block."""
    assert markdown == markdown_paragraph(paragraph)


def test_paragraphs_break_at_wide_gaps_and_column_tops() -> None:
    """A step over 1.5 times the usual one, down or up the page, starts a paragraph."""
    lines: list[tuple[str, float | None]] = [
        ("one", 700.0),
        ("two", 686.0),
        ("three", 658.0),
        ("four", 644.0),
        ("", None),
        ("five", 700.0),
        ("six", 686.0),
    ]

    assert ["one\ntwo", "three\nfour", "five\nsix"] == paragraphs(lines)


def test_metadata() -> None:
    """Title, authors (split on semicolons), dates, keywords, language and page count come
    from the info dictionary and the catalog; there is no charset."""
    body = pdfs.text_pdf(
        ["a", "b"],
        title="  A  Report (draft) ",
        author="Ann Smith; Bob Jones",
        created="D:20240131120000+01'00'",
        modified="D:20240201",
        keywords="queues, fetching; pdf",
        language="pt-BR",
    )

    expected = PageMetadata(
        title="A Report (draft)",
        authors=("Ann Smith", "Bob Jones"),
        published="2024-01-31T12:00:00+01:00",
        modified="2024-02-01",
        keywords=("queues", "fetching", "pdf"),
        language="pt-BR",
        page_count=2,
    )
    assert expected == pdf_document(body, max_pages=50).metadata


def test_metadata_in_utf16() -> None:
    """Info strings beyond Latin-1 (UTF-16 with a byte order mark) are read whole."""
    body = pdfs.text_pdf(["a"], title="Отчёт 报告", author="Ann and Bob")

    metadata = pdf_document(body, max_pages=50).metadata

    assert ("Отчёт 报告", ("Ann and Bob",)) == (metadata.title, metadata.authors)


def test_metadata_keeps_no_control_characters() -> None:
    """Info strings lose escape sequences, control characters and bidi overrides, as an
    HTML page's do. (In UTF-16, as PDFDocEncoding, the Latin-1 form, has no controls; and
    8-bit sequences, as pdfium reads ESC in UTF-16 as the start of a language code.)"""
    body = pdfs.text_pdf(
        ["a"],
        title="\x9b31m报告\x9b0m\x07 report\rdraft\u202e",
        author="安娜\x9d0;x\x9c Smith",
        language="pt-BR\x9b2J\u202e",
    )

    metadata = pdf_document(body, max_pages=50).metadata

    assert ("报告 report draft", ("安娜 Smith",), "pt-BR") == (
        metadata.title,
        metadata.authors,
        metadata.language,
    )


def test_no_metadata() -> None:
    """A PDF with an empty info dictionary has only its page count."""
    assert PageMetadata(page_count=1) == pdf_document(pdfs.text_pdf(["a"]), 50).metadata


@pytest.mark.parametrize(
    ("value", "iso"),
    [
        ("D:2024", "2024"),
        ("D:202401", "2024-01"),
        ("D:20240131", "2024-01-31"),
        ("20240131", "2024-01-31"),
        ("D:2024013112", "2024-01-31T12:00"),
        ("D:202401311205", "2024-01-31T12:05"),
        ("D:20240131120000+01'00'", "2024-01-31T12:00:00+01:00"),
        ("D:20240131120000+01'00", "2024-01-31T12:00:00+01:00"),
        ("D:20240131120000-05'30'", "2024-01-31T12:00:00-05:30"),
        ("D:20240131120000+01", "2024-01-31T12:00:00+01:00"),
        ("D:20240131120000Z", "2024-01-31T12:00:00Z"),
        ("D:20240131120000Z00'00'", "2024-01-31T12:00:00Z"),
        ("D:20240131120000", "2024-01-31T12:00:00"),
        ("D:20240231", None),
        ("D:20241301", None),
        ("D:20240131250000", None),
        ("D:20240131120000+24'00'", None),
        ("D:2024013", None),
        ("Tuesday", None),
        ("D:20240131 junk", None),
        ("", None),
    ],
)
def test_pdf_date(value: str, iso: str | None) -> None:
    """PDF dates become ISO 8601 as precise as they are; malformed ones None."""
    assert iso == pdf_date(value)


def test_only_max_pages_are_read() -> None:
    """Pages after the first max_pages are not read; the page count is still the whole."""
    document = pdf_document(pdfs.text_pdf(PAGES), max_pages=2)

    assert ("\f".join(PAGES[:2]), 3) == (document.text, document.metadata.page_count)
    assert "<!-- page 3 -->" not in (document.markdown or "")


@pytest.mark.parametrize(
    "body",
    [b"", b"<html>not a pdf</html>", b"%PDF-1.7\n", pdfs.text_pdf(PAGES)[:300]],
    ids=["empty", "html", "header-only", "truncated"],
)
def test_not_a_pdf_is_unparseable(body: bytes) -> None:
    """A body pdfium cannot open raises UnparseableContent."""
    with pytest.raises(UnparseableContent, match="not a readable PDF: data format error"):
        pdf_document(body, max_pages=50)


def test_encrypted_pdf_is_unparseable() -> None:
    """A PDF the empty password does not open raises UnparseableContent, saying why."""
    with pytest.raises(UnparseableContent, match="incorrect password"):
        pdf_document(pdfs.encrypted_pdf(), max_pages=50)


def test_deeply_nested_objects_end_quickly() -> None:
    """100,000 nested arrays in a page dictionary: pdfium gives up on the nesting and reads
    the page's text, in well under a second."""
    body = pdfs.deeply_nested_pdf(100_000)

    started = time.perf_counter()
    document = pdf_document(body, max_pages=50)
    elapsed = time.perf_counter() - started

    assert ("Nested", 1) == (document.text, document.metadata.page_count)
    assert elapsed < 2.0


def test_huge_page_count_reads_only_max_pages_quickly() -> None:
    """100,000 pages: the count is read, only max_pages pages are, quickly."""
    body = pdfs.many_pages_pdf(100_000)

    started = time.perf_counter()
    document = pdf_document(body, max_pages=50)
    elapsed = time.perf_counter() - started

    assert ("\f".join(["Same page"] * 50), 100_000) == (
        document.text,
        document.metadata.page_count,
    )
    assert elapsed < 2.0


def test_compression_bomb_is_small_and_inflates_to_its_size() -> None:
    """The bomb's builder (run through the pool elsewhere, never in-process) writes about a
    thousandth of what its stream inflates to, and the stream is valid zlib."""
    body = pdfs.compression_bomb_pdf(1 << 30)
    stream = pdfs.deflated_zeros(64)
    inflater = zlib.decompressobj()
    inflated = sum(
        len(inflater.decompress(stream[i : i + 4096])) for i in range(0, len(stream), 4096)
    )

    assert len(body) < 2 << 20
    assert (64 << 20, True) == (inflated, inflater.eof)


def test_words_hyphenated_across_lines_are_joined_and_control_characters_dropped() -> None:
    """A word split by a soft hyphen at a line's end comes back whole (pdfium joins it and
    marks the join, the mark is dropped); a form feed in a page's text is dropped, so form
    feeds only split pages."""
    document = pdf_document(pdfs.text_pdf(["man\xad\nagement and a form\ffeed"]), max_pages=50)

    assert "management and a formfeed" == document.text


def test_long_info_entries_are_cut() -> None:
    """Info entries are cut to FIELD_MAX_CHARS, however long the PDF makes them."""
    metadata = pdf_document(pdfs.text_pdf(["a"], title="T" * 100_000), max_pages=50).metadata

    assert "T" * FIELD_MAX_CHARS == metadata.title
