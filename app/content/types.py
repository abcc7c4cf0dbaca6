"""Media types: which ones are kept, which ones hold text, and the charset a header names."""

HTML_TYPES = ("text/html", "application/xhtml+xml")
PDF_TYPE = "application/pdf"


class UnparseableContent(ValueError):
    """A body that its content type describes, but that does not parse as one (JSON, PDF)."""


def media_type(content_type: str | None) -> str:
    """`text/html` of `Text/HTML; charset=utf-8`; "" when there is none."""
    return (content_type or "").split(";", 1)[0].strip().lower()


def is_allowed_type(media: str, allowed: tuple[str, ...]) -> bool:
    """Whether a media type is in the allow-list; `text/*` admits every text type."""
    if not media:
        return False
    kind = media.split("/", 1)[0]
    return media in allowed or f"{kind}/*" in allowed


def header_charset(content_type: str | None) -> str | None:
    """The charset parameter of a Content-Type, unquoted, or None."""
    for param in (content_type or "").split(";")[1:]:
        name, _, value = param.partition("=")
        if name.strip().lower() == "charset":
            return value.strip().strip("\"'") or None
    return None


def is_html(media: str) -> bool:
    return media in HTML_TYPES


def is_json(media: str) -> bool:
    return media == "application/json" or media.endswith("+json")


def is_xml(media: str) -> bool:
    return media in ("application/xml", "text/xml") or media.endswith("+xml")


def is_pdf(media: str) -> bool:
    return media == PDF_TYPE


def has_text(media: str) -> bool:
    """Whether a body of this type is text, or holds text we extract (a PDF). Images and
    archives have none: their jobs keep the body, and `/text` says there is no text. A
    missing type is read as text, as the fetcher decoded it."""
    return (
        not media
        or media.startswith("text/")
        or is_html(media)
        or is_json(media)
        or is_xml(media)
        or is_pdf(media)
    )
