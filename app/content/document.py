"""What extraction makes of a body."""

from dataclasses import dataclass

from app.model import PageMetadata


@dataclass(frozen=True)
class Document:
    text: str
    """The main text, one paragraph a line (HTML), or the body's own text."""
    markdown: str | None
    """The main content as Markdown; None for a type that has no text (`types.has_text`)."""
    metadata: PageMetadata
