"""The main text of an HTML page."""

import re

from selectolax.lexbor import LexborHTMLParser

TITLE_MAX_CHARS = 1000

# Removed with their content before the main text is taken: code, chrome and navigation.
_NOT_MAIN_TEXT = [
    "script",
    "style",
    "noscript",
    "template",
    "iframe",
    "object",
    "embed",
    "svg",
    "canvas",
    "nav",
    "header",
    "footer",
    "aside",
    "form",
    "button",
    "select",
    "dialog",
]
# Tags that break a line, so a block's text does not run into the next one's. A marker is
# put before each in the source: one regular expression over the text is far cheaper than
# inserting a node per block into a large tree.
_BLOCK_TAG = re.compile(
    r"<(?=/?(?:address|article|blockquote|br|dd|details|div|dl|dt|figcaption|figure|h[1-6]|hr"
    r"|li|main|ol|p|pre|section|summary|table|td|th|tr|ul)[\s/>])",
    re.IGNORECASE,
)
_BREAK = "\ue000"  # a private-use character: never meaningful in fetched text


def main_text(document: str) -> tuple[str | None, str]:
    tree = LexborHTMLParser(_BLOCK_TAG.sub(_BREAK + "<", document))
    node = tree.css_first("head > title") or tree.css_first("title")
    title = None
    if node is not None:
        title = " ".join(node.text().replace(_BREAK, " ").split())[:TITLE_MAX_CHARS] or None
    tree.strip_tags(_NOT_MAIN_TEXT)
    articles = tree.css("article")
    main = (
        tree.css_first("main, [role=main]")
        or (articles[0] if len(articles) == 1 else None)
        or tree.body
        or tree.root
    )
    if main is None:
        return title, ""
    # Whitespace in the source is not layout: only the block breaks make lines.
    lines = (" ".join(part.split()) for part in main.text().split(_BREAK))
    return title, "\n".join(line for line in lines if line)
