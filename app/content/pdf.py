"""A PDF's text, Markdown and metadata, read with pdfium (pypdfium2).

Pure as far as Python sees: bytes in, a `Document` out. pdfium is native code that trusts
nothing about a hostile file's cost, so the caller runs this in a worker process with a
deadline and a memory cap; here only the pages read are bounded (`max_pages`). Every
pdfium failure is `UnparseableContent`, and every pdfium object is closed before return.

The text is pdftotext's shape: a page's lines as pdfium orders them, a blank line where
the page leaves a paragraph's gap, pages separated by a form feed. The Markdown has the
same paragraphs, each page after a `<!-- page N -->` line.
"""

import ctypes
import itertools
import re
import statistics
import unicodedata
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta, timezone

import pypdfium2 as pdfium  # type: ignore[import-untyped]
import pypdfium2.raw as pdfium_c  # type: ignore[import-untyped]

from app.content.document import Document
from app.content.metadata import field_text
from app.content.types import UnparseableContent
from app.model import PageMetadata

PAGE_BREAK = "\f"

PARAGRAPH_GAP = 1.5
"""A step between two lines' baselines over this many times the page's line spacing starts
a paragraph: a blank line in the source, a heading's larger type, or a column's top."""


def pdf_document(body: bytes, max_pages: int) -> Document:
    """The text, Markdown and metadata of a PDF, reading its first `max_pages` pages only
    (`page_count` is still the whole document's)."""
    try:
        pdf = pdfium.PdfDocument(body)
    except pdfium.PdfiumError as exc:
        raise UnparseableContent(f"not a readable PDF: {_reason(exc)}") from None
    try:
        page_count = len(pdf)
        pages = [paragraphs(_page_lines(pdf, index)) for index in range(min(page_count, max_pages))]
        metadata = _metadata(pdf, page_count)
    except pdfium.PdfiumError as exc:
        raise UnparseableContent(f"PDF page unreadable: {_reason(exc)}") from None
    finally:
        pdf.close()  # closes its pages and text pages too
    text = PAGE_BREAK.join("\n\n".join(page) for page in pages)
    markdown = "\n\n".join(
        "\n\n".join([f"<!-- page {number} -->", *map(markdown_paragraph, page)])
        for number, page in enumerate(pages, start=1)
    )
    return Document(text=text, markdown=markdown, metadata=metadata)


def _reason(exc: Exception) -> str:
    # pypdfium2 says "Failed to load document (PDFium: Incorrect password error)."
    message = str(exc)
    inner = re.search(r"\(PDFium: (.*)\)", message)
    return (inner.group(1) if inner else message).rstrip(".").lower()


def _page_lines(pdf: pdfium.PdfDocument, index: int) -> list[tuple[str, float | None]]:
    page = pdf.get_page(index)
    try:
        textpage = page.get_textpage()
        try:
            return list(_lines(textpage))
        finally:
            textpage.close()
    finally:
        page.close()


def _lines(textpage: pdfium.PdfTextPage) -> Iterator[tuple[str, float | None]]:
    """Each line of a page's text with its baseline, from its first character's origin
    (None for a blank line, or where pdfium will not say)."""
    start = 0
    for line in _page_text(textpage).split("\r\n"):
        yield _clean(line), _baseline(textpage, start) if line.strip() else None
        start += len(line) + 2  # the text index counts pdfium's "\r\n" as two characters


def _page_text(textpage: pdfium.PdfTextPage) -> str:
    """The page's text in pdfium's order, lines ending "\r\n". All of it, text off the
    page's box too: `get_text_bounded` would clip that, but its text is not the character
    list that `_baseline` indexes."""
    chars = pdfium_c.FPDFText_CountChars(textpage)
    if chars <= 0:
        return ""
    # pdfium writes UTF-16 without being told the buffer's size, two units for a character
    # beyond the BMP (pypdfium2's `get_text_range` allows one): room for the worst case.
    buffer = (ctypes.c_ushort * (2 * chars + 1))()
    written = pdfium_c.FPDFText_GetText(textpage, 0, chars, buffer)
    return bytes(buffer)[: 2 * max(written - 1, 0)].decode("utf-16-le", errors="replace")


def _baseline(textpage: pdfium.PdfTextPage, text_index: int) -> float | None:
    char = pdfium_c.FPDFText_GetCharIndexFromTextIndex(textpage, text_index)
    x, y = ctypes.c_double(), ctypes.c_double()
    if char < 0 or not pdfium_c.FPDFText_GetCharOrigin(textpage, char, x, y):
        return None
    return float(y.value)


def _clean(line: str) -> str:
    """No control characters: not the mark pdfium leaves where it joined a word hyphenated
    across lines (U+FFFE, or U+0002), not a form feed that would read as a page break, not
    a lone CR; no trailing spaces."""
    line = line.replace("\ufffe", "")
    return "".join(c for c in line if c == "\t" or unicodedata.category(c) != "Cc").rstrip()


def paragraphs(lines: list[tuple[str, float | None]]) -> list[str]:
    """Lines with their baselines (PDF units, up the page) grouped into paragraphs: a new
    one where the step down from the line before is over PARAGRAPH_GAP times the line
    spacing, or goes up the page by as much (the next column). The line spacing is the
    smallest step down, not counting those under half the median (a line pdfium split at a
    superscript): a page with few lines has as many paragraph gaps as line steps."""
    steps = [
        above - below
        for (_, above), (_, below) in itertools.pairwise(lines)
        if above is not None and below is not None and above > below
    ]
    median = statistics.median(steps) if steps else 0.0
    usual = min((step for step in steps if step >= median / 2), default=None)
    result: list[list[str]] = []
    previous: float | None = None
    for text, baseline in lines:
        if not text.strip():
            continue
        gap = (
            usual is not None
            and previous is not None
            and baseline is not None
            and abs(previous - baseline) > PARAGRAPH_GAP * usual
        )
        if gap or not result:
            result.append([])
        result[-1].append(text)
        previous = baseline
    return ["\n".join(paragraph) for paragraph in result]


# A line that Markdown would read as a heading, list item, quote, rule, fence, table row,
# setext underline or HTML block, by its first characters.
_BLOCK_START = re.compile(r"[#>*+\-=`~|<_]|\d{1,9}(?=[.)])")


def markdown_paragraph(paragraph: str) -> str:
    """A paragraph as Markdown: each line's leading spaces dropped (four would make code)
    and a character that would start a block escaped; the text is otherwise as is."""
    return "\n".join(_markdown_line(line.lstrip()) for line in paragraph.split("\n"))


def _markdown_line(line: str) -> str:
    start = _BLOCK_START.match(line)
    if start is None:
        return line
    at = start.end() if line[0].isdigit() else 0  # "1." -> "1\.", "#" -> "\#"
    return line[:at] + "\\" + line[at:]


def _metadata(pdf: pdfium.PdfDocument, page_count: int) -> PageMetadata:
    # Each entry cleaned and cut like an HTML title: a hostile info dictionary may hold
    # megabytes, and the metadata is stored with every job.
    info = {key: field_text(value) for key, value in pdf.get_metadata_dict().items()}
    return PageMetadata(
        title=info.get("Title") or None,
        description=info.get("Subject") or None,
        authors=_split(info.get("Author", ""), ";"),
        published=pdf_date(info.get("CreationDate", "")),
        modified=pdf_date(info.get("ModDate", "")),
        language=_language(pdf),
        keywords=_split(info.get("Keywords", ""), ",;"),
        page_count=page_count,
    )


def _split(value: str, separators: str) -> tuple[str, ...]:
    parts = re.split(f"[{re.escape(separators)}]", value)
    return tuple(part.strip() for part in parts if part.strip())


def _language(pdf: pdfium.PdfDocument) -> str | None:
    """The catalog's /Lang, or None."""
    size = pdfium_c.FPDFCatalog_GetLanguage(pdf, None, 0)
    if size <= 2:  # nothing but the terminating NUL
        return None
    buffer = ctypes.create_string_buffer(size)
    pdfium_c.FPDFCatalog_GetLanguage(
        pdf, ctypes.cast(buffer, pdfium_c.POINTER(pdfium_c.FPDF_WCHAR)), size
    )
    return field_text(buffer.raw[: size - 2].decode("utf-16-le", errors="replace")) or None


# D:YYYYMMDDHHmmSSOHH'mm', every part after the year optional (PDF 32000 7.9.4).
_PDF_DATE = re.compile(
    r"(?:D:)?(?P<year>\d{4})(?P<month>\d\d)?(?P<day>\d\d)?(?P<hour>\d\d)?(?P<minute>\d\d)?"
    r"(?P<second>\d\d)?(?:(?P<utc>Z)(?:00'?(?:00'?)?)?|(?P<sign>[+-])(?P<tzh>\d\d)'?(?:(?P<tzm>\d\d)'?)?)?"
)


def pdf_date(value: str) -> str | None:
    """A PDF date in ISO 8601, as precise as it is: `D:20240131` is "2024-01-31",
    `D:20240131120000+01'00'` is "2024-01-31T12:00:00+01:00"; None if it is no date."""
    match = _PDF_DATE.fullmatch(value.strip())
    if match is None:
        return None
    parts = match.groupdict()
    try:
        moment = datetime(
            int(parts["year"]),
            int(parts["month"] or 1),
            int(parts["day"] or 1),
            int(parts["hour"] or 0),
            int(parts["minute"] or 0),
            int(parts["second"] or 0),
        )
        offset = _offset(parts)
    except ValueError:
        return None
    if parts["month"] is None:
        return moment.strftime("%Y")
    if parts["day"] is None:
        return moment.strftime("%Y-%m")
    if parts["hour"] is None:
        return moment.date().isoformat()
    spec = "minutes" if parts["second"] is None else "seconds"
    iso = moment.replace(tzinfo=offset).isoformat(timespec=spec)
    return iso.removesuffix("+00:00") + "Z" if parts["utc"] else iso


def _offset(parts: dict[str, str | None]) -> timezone | None:
    if parts["utc"]:
        return UTC
    if parts["sign"] is None:
        return None
    minutes = int(parts["tzh"] or 0) * 60 + int(parts["tzm"] or 0)
    if minutes >= 24 * 60:
        raise ValueError("offset out of range")
    return timezone(timedelta(minutes=-minutes if parts["sign"] == "-" else minutes))
