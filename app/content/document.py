"""What extraction makes of a body."""

from dataclasses import dataclass

from app.model import PageLink, PageMetadata


@dataclass(frozen=True)
class Document:
    text: str
    """The main text, one paragraph a line (HTML), or the body's own text."""
    markdown: str | None
    """The main content as Markdown; None for a type that has no text (`types.has_text`)."""
    metadata: PageMetadata
    links: tuple[PageLink, ...] = ()
    """An HTML page's distinct links, in document order (`app.content.links`); none of
    another type."""
    feeds: tuple[str, ...] = ()
    """The feeds an HTML page declares."""
    links_cut: int = 0
    """The page's distinct links not in `links`: past the limit, or too long."""
