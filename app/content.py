"""Pure helpers about fetched content. No I/O."""

from html.parser import HTMLParser

TITLE_SCAN_BYTES = 64 * 1024
"""Only the head of a body is searched for a title; titles live in <head>."""

HTML_TYPES = ("text/html", "application/xhtml+xml")


class _TitleParser(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self._in_title = False
        self.parts: list[str] = []
        self.done = False

    def handle_starttag(self, tag: str, attrs: object) -> None:
        if tag == "title" and not self.done:
            self._in_title = True

    def handle_endtag(self, tag: str) -> None:
        if tag == "title" and self._in_title:
            self._in_title = False
            self.done = True

    def handle_data(self, data: str) -> None:
        if self._in_title:
            self.parts.append(data)


def extract_title(head: bytes, content_type: str | None, charset: str | None) -> str | None:
    """The text of the first <title> of an HTML document, whitespace collapsed, or None."""
    media_type = (content_type or "").split(";", 1)[0].strip().lower()
    if media_type not in HTML_TYPES:
        return None
    try:
        text = head.decode(charset or "utf-8", errors="replace")
    # A charset name Python does not know (LookupError) or cannot decode with: idna and
    # "undefined" raise UnicodeError (a ValueError) whatever `errors` says.
    except (LookupError, ValueError):
        text = head.decode("utf-8", errors="replace")
    parser = _TitleParser()
    parser.feed(text)
    title = " ".join("".join(parser.parts).split())
    return title[:1000] or None
