"""Plain text and Markdown of a page's main content, read from trafilatura's tree in one pass.

Owns how trafilatura's blocks read as text and as Markdown (CommonMark, with GFM tables and
strikethrough): `p`, `head rend="h1".."h6"`, `list rend="ul|ol|dl"` of `item`, `quote`, `code`,
`table` of `row` of `cell`. Their lines of inline content (`hi`, `ref`, `del`, `lb`, `graphic`,
`code` in a line) are `inline`'s. HTML names trafilatura leaves untranslated (`div`, `tr`, `td`,
`li`...) are blocks; other unknown names (`contrib-group`) are read as their text, inline. Pure:
never parses HTML and never mutates the tree. What each output holds: `Rendered`.

Nesting deeper than `MAX_DEPTH` elements is read as the plain text of the rest of that subtree.
"""

import re
from dataclasses import dataclass
from typing import Literal

# lxml ships no type information: its elements are typed `Any` here, at our boundary.
from lxml import etree

from app.content.inline import (
    BLOCK_TAGS,
    INVISIBLE,
    MAX_DEPTH,
    Inline,
    longest_run,
    parts,
    subtree_text,
)

__all__ = ["MAX_DEPTH", "Rendered", "render"]

_CODE_BLOCK_PARENTS = frozenset({"body", "div", "quote", "section", "article", "main"})
_LANGUAGE = re.compile(r"(?:lang|language)-([\w+#.-]+)|([\w+#.-]+)")


@dataclass(frozen=True)
class Rendered:
    """A page's main content as plain text and as Markdown."""

    text: str
    """For search indexes: a line per block (paragraph, heading, list item, table row, quote
    paragraph), no blank lines, no markup; whitespace in a block collapsed to one space, and
    an `lb` breaks the line. A code block keeps its lines and indentation. A row's cells are
    joined by a tab: whitespace to tokenizers and to matchers that normalize whitespace, so no
    character is put in a sentence that runs across cells."""
    markdown: str
    """Blocks apart by a blank line, text escaped where it would read as syntax, so that the
    Markdown renders to the same text; but the page's title, when given, heads it (`# Title`)
    if the content opens with neither a heading nor the title (trafilatura leaves out an
    `<h1>` outside `<article>`). The text stays the main content alone: the title is in the
    metadata."""


@dataclass(frozen=True)
class _Block:
    text: str
    markdown: str
    kind: Literal["paragraph", "list", "heading", "other"] = "paragraph"  # what may follow it


def render(body: etree._Element, title: str | None = None) -> Rendered:
    """The text and Markdown of trafilatura's `Document.body`, or of any element in its
    vocabulary. `title` (the page's) heads the Markdown, not the text, as a level-1 heading
    if the content has some and opens with neither a heading nor the title itself."""
    blocks = _flow(body, 0)
    text = _text(blocks)
    if title and blocks and not _opens_with(blocks[0], title):
        run = Inline(breaks=False)
        run.add(title, 0)
        blocks = _heading_line(run, 1) + blocks
    return Rendered(text, _join(blocks, tight=False))


def _opens_with(block: _Block, title: str) -> bool:
    """Whether `block` is a heading, or a line that says `title` (case and spacing aside)."""
    return (
        block.kind == "heading"
        or " ".join(block.text.split()).casefold() == " ".join(title.split()).casefold()
    )


def _text(blocks: list[_Block]) -> str:
    return "\n".join(block.text for block in blocks if block.text)


def _join(blocks: list[_Block], tight: bool) -> str:
    """Blocks apart by a blank line; in a tight list item, a nested list right under its text."""
    parts: list[str] = []
    for before, block in zip([None, *blocks], blocks, strict=False):
        if before is not None:
            close = tight and before.kind == "paragraph" and block.kind == "list"
            parts.append("\n" if close else "\n\n")
        parts.append(block.markdown)
    return "".join(parts)


def _flow(element: etree._Element, depth: int) -> list[_Block]:
    """The blocks of a container whose children are blocks, inline content, or both."""
    if depth > MAX_DEPTH:
        return _paragraph(Inline(), subtree_text(element))
    blocks: list[_Block] = []
    run = Inline()
    for part in parts(element):  # whitespace between blocks starts no paragraph
        if isinstance(part, str) or not _is_block(part, element.tag):
            if run.markdown or not isinstance(part, str) or not part.isspace():
                run.add(part, depth + 1)
            continue
        blocks += _paragraph(run)
        run = Inline()
        after_list = bool(blocks) and blocks[-1].kind == "list"
        blocks += _block(part, depth + 1, after_list)
    return blocks + _paragraph(run)


def _paragraph(run: Inline, text: str | None = None) -> list[_Block]:
    lines = run.paragraph(text)
    return [] if lines is None else [_Block(*lines)]


def _is_block(element: etree._Element, parent_tag: object) -> bool:
    if element.tag == "code":
        return parent_tag in _CODE_BLOCK_PARENTS or "\n" in subtree_text(element)
    return element.tag in BLOCK_TAGS


def _block(element: etree._Element, depth: int, after_list: bool) -> list[_Block]:
    tag = element.tag
    if tag == "head":
        return _heading(element, depth)
    if tag == "list":
        return _list(element, depth, after_list)
    if tag in ("quote", "blockquote"):
        return _quote(element, depth)
    if tag == "table":
        return _table(element, depth)
    if tag == "code":
        return _code_block(element)
    return _flow(element, depth)


def _heading(element: etree._Element, depth: int) -> list[_Block]:
    run = Inline(breaks=False)
    run.add_content(element, depth)
    rend = element.get("rend") or ""
    return _heading_line(run, int(rend[1]) if re.fullmatch(r"h[1-6]", rend) else 2)


def _heading_line(run: Inline, level: int) -> list[_Block]:
    text, markdown = run.line()
    if not markdown:
        return []
    if markdown.endswith("#"):  # would be read as a closing sequence
        markdown = markdown[:-1] + "\\#"
    return [_Block(text, f"{'#' * level} {markdown}", "heading")]


def _list(element: etree._Element, depth: int, after_list: bool) -> list[_Block]:
    """Items in order, `1.` numbered if `ol`, else bulleted (`ul`, and `dl`: Markdown has no
    definition list). A list right after another is marked `*` or `1)`, or they would merge."""
    ordered = element.get("rend") == "ol"
    items = [
        _paragraph(Inline(), part) if isinstance(part, str) else _flow(part, depth + 1)
        for part in parts(element)
    ]
    texts: list[str] = []
    markdowns: list[str] = []
    for number, blocks in enumerate((item for item in items if item), 1):
        if ordered:
            marker = f"{number}{')' if after_list else '.'} "
        else:
            marker = "* " if after_list else "- "
        texts.append(_text(blocks))
        markdowns.append(_indent(_join(blocks, tight=True), marker))
    if not markdowns:
        return []
    return [_Block("\n".join(t for t in texts if t), "\n".join(markdowns), "list")]


def _indent(markdown: str, marker: str) -> str:
    """The first line after the marker, the others under the first's text."""
    first, *rest = markdown.split("\n")
    pad = " " * len(marker)
    return "\n".join([marker + first, *(pad + line if line else "" for line in rest)])


def _quote(element: etree._Element, depth: int) -> list[_Block]:
    blocks = _flow(element, depth)
    if not blocks:
        return []
    lines = _join(blocks, tight=False).split("\n")
    markdown = "\n".join("> " + line if line else ">" for line in lines)
    return [_Block(_text(blocks), markdown, "other")]


def _code_block(element: etree._Element) -> list[_Block]:
    """The code's own lines, exactly; only blank lines around it and the last newline dropped."""
    code = subtree_text(element, spaced=False).translate(INVISIBLE)
    code = code.replace("\r\n", "\n").replace("\r", "\n")
    code = re.sub(r"\A(?:[ \t]*\n)+", "", code).rstrip()
    if not code:
        return []
    fence = "`" * max(3, longest_run(code, "`") + 1)
    return [_Block(code, f"{fence}{_language(element)}\n{code}\n{fence}", "other")]


def _language(element: etree._Element) -> str:
    """The language a code block names (`lang`, `data-lang`, `class="language-x"`), or ""."""
    for node in element.iter():
        for attribute in ("lang", "data-lang", "class"):
            for token in (node.get(attribute) or "").split():
                match = _LANGUAGE.fullmatch(token)
                if match and (attribute != "class" or match[1]):
                    return match[1] or match[2]
    return ""


def _table(element: etree._Element, depth: int) -> list[_Block]:
    """A GFM table, every row as wide as the widest. The first row is its header: trafilatura
    puts a marked one (`cell role="head"`) first, and moving a later one would reorder the text."""
    rows: list[list[tuple[str, str]]] = []
    for row in parts(element):
        row_parts = [row] if isinstance(row, str) or len(row) == 0 else parts(row)
        cells = [_cell(part, depth + 2) for part in row_parts]
        if any(markdown for _, markdown in cells):
            rows.append(cells)
    if not rows:
        return []
    width = max(map(len, rows))
    lines = [
        "|" + "".join(f" {md} |" if md else " |" for _, md in row) + " |" * (width - len(row))
        for row in rows
    ]
    lines.insert(1, "|" + " --- |" * width)
    texts = ("\t".join(text for text, _ in row if text) for row in rows)
    text = "\n".join(text for text in texts if text)
    return [_Block(text, "\n".join(lines), "other")]


def _cell(part: str | etree._Element, depth: int) -> tuple[str, str]:
    run = Inline(breaks=False, in_cell=True)
    if isinstance(part, str):
        run.add(part, depth)
    else:
        run.add_content(part, depth)
    return run.line()
