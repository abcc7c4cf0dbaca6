"""PDFs for the tests, written byte by byte: no PDF library makes them, so a test of the
reader never depends on a writer's habits.

`text_pdf` is a small valid document: Helvetica text, one content stream a page, an
info dictionary. The hostile ones are built to cost a reader dearly while costing the
test little:

    deeply_nested_pdf(depth)      a page whose dictionary holds `depth` nested arrays
    many_pages_pdf(n)             n pages sharing one content stream
    compression_bomb_pdf(size)    a page whose content inflates to `size` bytes of zeros
    encrypted_pdf()               encrypted under a password nobody knows
"""

import zlib

PAGE_WIDTH, PAGE_HEIGHT = 612, 792
FONT_SIZE, LEADING = 12, 14
MARGIN = 72
FONT = b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>"


def pdf_string(value: str) -> bytes:
    """A PDF string: literal (parentheses and backslashes escaped) when it is Latin-1,
    else UTF-16BE with its byte order mark, in hex, as PDF text strings allow."""
    try:
        raw = value.encode("latin-1")
    except UnicodeEncodeError:
        return b"<FEFF" + value.encode("utf-16-be").hex().upper().encode() + b">"
    return b"(" + _escape(raw) + b")"


def _escape(raw: bytes) -> bytes:
    return raw.replace(b"\\", b"\\\\").replace(b"(", b"\\(").replace(b")", b"\\)")


def page_content(text: str) -> bytes:
    """The content stream that shows `text` in Helvetica, a line of the page a line of text
    from the top-left margin down (an empty line leaves a line's gap)."""
    ops = [b"BT /F1 %d Tf %d TL %d %d Td" % (FONT_SIZE, LEADING, MARGIN, PAGE_HEIGHT - MARGIN)]
    for line in text.split("\n"):
        if line:
            ops.append(b"(" + _escape(line.encode("cp1252")) + b") Tj")
        ops.append(b"T*")
    ops.append(b"ET")
    return b"\n".join(ops)


def stream(content: bytes, extra: bytes = b"") -> bytes:
    return b"<< /Length %d %s>>\nstream\n" % (len(content), extra) + content + b"\nendstream"


def assemble(objects: list[bytes], info: bytes | None = None, encrypt: bytes = b"") -> bytes:
    """A whole file: objects numbered from 1 (object 1 is the catalog), a cross-reference
    table with each object's byte offset, and a trailer; `info` is the info dictionary's
    object number as a reference ("6 0 R"), `encrypt` trailer entries to add."""
    out = bytearray(b"%PDF-1.7\n%\xe2\xe3\xcf\xd3\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % number + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % offset for offset in offsets)
    info_entry = b" /Info " + info if info else b""
    out += b"trailer\n<< /Size %d /Root 1 0 R%s%s >>\n" % (len(objects) + 1, info_entry, encrypt)
    out += b"startxref\n%d\n%%%%EOF\n" % xref
    return bytes(out)


def info_dictionary(**entries: str | None) -> bytes:
    """`<< /Title (...) ... >>` of the entries that are not None."""
    items = (
        b"/%s %s" % (key.encode(), pdf_string(value))
        for key, value in entries.items()
        if value is not None
    )
    return b"<< " + b" ".join(items) + b" >>"


def text_pdf(
    pages: list[str],
    *,
    title: str | None = None,
    author: str | None = None,
    created: str | None = None,
    modified: str | None = None,
    keywords: str | None = None,
    language: str | None = None,
) -> bytes:
    """A valid PDF with one page of Helvetica text for each string of `pages`. Dates are
    PDF date strings (`D:20240131120000+01'00'`), written as given."""
    n = len(pages)
    # 1 catalog, 2 page tree, 3 font, 4 info, then each page and its content stream.
    page_numbers = [5 + 2 * i for i in range(n)]
    lang = b" /Lang " + pdf_string(language) if language is not None else b""
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R%s >>" % lang,
        _page_tree(page_numbers),
        FONT,
        info_dictionary(
            Title=title, Author=author, CreationDate=created, ModDate=modified, Keywords=keywords
        ),
    ]
    for number, text in zip(page_numbers, pages, strict=True):
        objects.append(_page(contents=number + 1))
        objects.append(stream(page_content(text)))
    return assemble(objects, info=b"4 0 R")


def _page_tree(page_numbers: list[int]) -> bytes:
    kids = b" ".join(b"%d 0 R" % number for number in page_numbers)
    return b"<< /Type /Pages /Kids [%s] /Count %d >>" % (kids, len(page_numbers))


def _page(contents: int, extra: bytes = b"") -> bytes:
    return (
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 %d %d] /Contents %d 0 R"
        b" /Resources << /Font << /F1 3 0 R >> >>%s >>" % (PAGE_WIDTH, PAGE_HEIGHT, contents, extra)
    )


def deeply_nested_pdf(depth: int) -> bytes:
    """One page of text whose page dictionary also holds `depth` arrays, each inside the
    next: a recursive parser without a limit runs out of stack."""
    nested = b"[" * depth + b"]" * depth
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        _page_tree([4]),
        FONT,
        _page(contents=5, extra=b" /Nested " + nested),
        stream(page_content("Nested")),
    ]
    return assemble(objects)


def many_pages_pdf(n: int) -> bytes:
    """n pages, each its own small object, all showing one shared content stream: about
    80 bytes a page."""
    first_page = 5
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        _page_tree(list(range(first_page, first_page + n))),
        FONT,
        stream(page_content("Same page")),
    ]
    objects += [_page(contents=4)] * n
    return assemble(objects)


def compression_bomb_pdf(inflated_bytes: int = 1 << 30) -> bytes:
    """One page whose FlateDecode content stream inflates to `inflated_bytes` (rounded up
    to a MiB) of zeros, whitespace to a content parser, from about a thousandth of that."""
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        _page_tree([4]),
        FONT,
        _page(contents=5),
        stream(deflated_zeros(-(-inflated_bytes // _MIB)), extra=b"/Filter /FlateDecode "),
    ]
    return assemble(objects)


_MIB = 1 << 20


def deflated_zeros(mebibytes: int) -> bytes:
    """A zlib stream of `mebibytes` MiB of zeros, made without compressing them all: a MiB
    is compressed once and its block repeated. A full flush ends each block on a byte and
    forgets the history, so every MiB after the first compresses to the same bytes; the
    checksum of the whole is summed apart, and an empty final block closes the stream."""
    zeros = bytes(_MIB)
    compressor = zlib.compressobj(9)
    first = compressor.compress(zeros) + compressor.flush(zlib.Z_FULL_FLUSH)
    block = compressor.compress(zeros) + compressor.flush(zlib.Z_FULL_FLUSH)
    checksum = 1
    for _ in range(mebibytes):
        checksum = zlib.adler32(zeros, checksum)
    # b"\x03\x00": a final block of fixed Huffman codes holding nothing but its end.
    return first + block * (mebibytes - 1) + b"\x03\x00" + checksum.to_bytes(4, "big")


def encrypted_pdf() -> bytes:
    """A page of text under the standard security handler (RC4, 40 bits) whose password
    check values (/O, /U) are arbitrary bytes: no password, the empty one included, opens it."""
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        _page_tree([4]),
        FONT,
        _page(contents=5),
        stream(page_content("Secret")),
        b"<< /Filter /Standard /V 1 /R 2 /O <%s> /U <%s> /P -4 >>" % (b"AB" * 32, b"CD" * 32),
    ]
    file_id = b"<" + b"0123456789ABCDEF" * 2 + b">"
    return assemble(objects, encrypt=b" /Encrypt 6 0 R /ID [%s %s]" % (file_id, file_id))
