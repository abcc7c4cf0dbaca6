"""One line of inline content, read from trafilatura's tree as plain text and as Markdown.

Owns what Markdown asks of running text: escaping what would read as syntax (and nothing else:
periods, parentheses and hyphens in sentences stay as they are), emphasis CommonMark reads as
such, links to safe addresses only, code spans, and the characters that are noise. `render`
builds blocks out of these runs. Pure.

Invisible format characters are removed (soft hyphen, zero-width space, word joiner, BOM,
bidirectional marks and controls, invisible operators): they split words for search and
matching. ZWJ and ZWNJ stay: they spell Persian and Indic words and join emoji.
"""

import re
import unicodedata
from collections.abc import Iterator

# lxml ships no type information: its elements are typed `Any` here, at our boundary.
from lxml import etree

# Deeper elements are read as the plain text of their subtree, so a hostile tree cannot
# exhaust the stack: each level costs a few Python frames.
MAX_DEPTH = 48
# HTML names trafilatura leaves untranslated that are blocks, and its own blocks: in a line
# (a cell, a link), their text is set apart by spaces.
BLOCK_TAGS = frozenset(
    "address article aside blockquote center colgroup dd details div dl dt fieldset figcaption"
    " figure footer form header li main nav ol pre section summary tbody td tfoot th thead tr ul"
    " p head list item quote table row cell".split()
)

# Private-use characters stand for an `lb`, for emphasis marks and around a code span's content
# until a line is finished. They are removed from the input with the invisible characters, so
# none can come from a page.
_BREAK = "\ue001"
_OPEN = {"**": "\ue002", "*": "\ue003", "~~": "\ue004"}
_CLOSE = {"**": "\ue005", "*": "\ue006", "~~": "\ue007"}
_MARK = {sentinel: mark for marks in (_OPEN, _CLOSE) for mark, sentinel in marks.items()}
_OPENING = frozenset(_OPEN.values())
_MARKS = re.compile(f"[{''.join(_MARK)}]")
# A code span's fences are chosen when its line is finished, when it is known which spans touch:
# those are one, or their fences would make one run of backticks.
_CODE_OPEN = "\ue008"
_CODE_CLOSE = "\ue009"
_CODE_SPAN = re.compile(f"{_CODE_OPEN}([^{_CODE_CLOSE}]*){_CODE_CLOSE}")
INVISIBLE = dict.fromkeys(
    map(
        ord,
        "\u00ad\u180e\u200b\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2060\u2061\u2062\u2063"
        "\u2064\u2066\u2067\u2068\u2069\ufeff\ue001\ue002\ue003\ue004\ue005\ue006\ue007\ue008\ue009",
    )
)
"""`str.translate` table removing the invisible characters and this module's own markers."""

# What a run's edges may hold outside its marks: whitespace (as `str.split` sees it) and breaks.
_EDGE_CHARS = "".join(c for c in map(chr, range(0x3001)) if c.isspace()) + _BREAK
# Characters that would read as syntax anywhere in a line: `_` only at a word's edge (CommonMark
# never reads `snake_case` as emphasis), `<` only before what could be a tag or an autolink, `&`
# only before what could be an entity.
_SYNTAX_CHARS = frozenset("\\`*[]|~_<&")
_INLINE_SYNTAX = re.compile(r"[\\`*\[\]|~]|(?<![^\W_])_|_(?![^\W_])|<(?=[A-Za-z/!?])|&(?=#?\w+;)")
# What would start a block at the beginning of a line: an ATX heading, a list item, a quote, a
# setext underline or thematic break, a table's delimiter row. Escaping its first character is
# enough.
_BLOCK_SYNTAX = re.compile(r"#{1,6}(?:\s|$)|[-+](?:\s|$)|>|=+\s*$|:?-+:?\s*$")
_ORDERED_SYNTAX = re.compile(r"(\d{1,9})([.)](?:\s|$))")
_SCHEME = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*):")
_LINK_SCHEMES = frozenset({"http", "https", "mailto"})
_URL_ESCAPES = str.maketrans({c: f"%{ord(c):02X}" for c in " ()<>|\\`\n\t\r"})


def parts(element: etree._Element) -> Iterator[str | etree._Element]:
    """An element's text and its children's subtrees and tails, in order; comments skipped."""
    if element.text:
        yield element.text
    for child in element:
        if isinstance(child.tag, str):
            yield child
        if child.tail:
            yield child.tail


def subtree_text(element: etree._Element, spaced: bool = True) -> str:
    """The subtree's text, an `lb` a new line and, if `spaced`, blocks apart by spaces. lxml
    walks the subtree, so there is no recursion in Python however deep it is."""
    pieces: list[str] = []
    for event, node in etree.iterwalk(element, events=("start", "end")):
        block = spaced and node.tag in BLOCK_TAGS
        if event == "start":
            text = node.text if isinstance(node.tag, str) else ""
            pieces.append("\n" if node.tag in ("lb", "br") else f"{' ' * block}{text or ''}")
        elif node is not element:
            pieces.append(f"{' ' * block}{node.tail or ''}")
    return "".join(pieces)


def longest_run(text: str, char: str) -> int:
    runs = re.findall(f"{re.escape(char)}+", text)
    return max(map(len, runs), default=0)


def href(target: str | None) -> str | None:
    """A link's address if it is http(s), mailto or relative, made safe inside `(...)`."""
    target = (target or "").strip()
    scheme = _SCHEME.match(target)
    if not target or (scheme and scheme[1].lower() not in _LINK_SCHEMES):
        return None
    return target.translate(_URL_ESCAPES)


def _escape(text: str) -> str:
    if _SYNTAX_CHARS.isdisjoint(text):  # most text: a set test is many times faster than `sub`
        return text
    return _INLINE_SYNTAX.sub(r"\\\g<0>", text)


def _escape_line_start(line: str) -> str:
    ordered = _ORDERED_SYNTAX.match(line)
    if ordered:
        return f"{ordered[1]}\\{line[len(ordered[1]) :]}"
    return "\\" + line if _BLOCK_SYNTAX.match(line) else line


class Inline:
    """One run of inline content, built as plain text and Markdown side by side.

    Pieces are joined and their whitespace collapsed when the run is finished, so a space at the
    edge of one text node and the next counts once.
    """

    def __init__(self, breaks: bool = True, in_cell: bool = False) -> None:
        self.plain: list[str] = []
        self.markdown: list[str] = []
        self.breaks = breaks  # whether an `lb` breaks the line, or is a space (headings, cells)
        self.in_cell = in_cell
        self.in_link = False  # CommonMark has no link in a link: an inner one is its text
        self.marks: set[str] = set()  # emphasis already around: `**` in `**` adds nothing
        self._opened: list[int] = []  # where the wrapped runs around what is added start

    def add(self, part: str | etree._Element, depth: int) -> None:
        """A text, or an element's subtree (not its tail)."""
        if isinstance(part, str):
            text = part.translate(INVISIBLE)
            self.plain.append(text)
            self.markdown.append(_escape(text))
            return
        tag = part.tag
        rend = part.get("rend")
        if tag == "lb":
            self._both(_BREAK if self.breaks else " ")
        elif tag == "hi" and rend in ("#b", "#i"):
            self._emphasis("**" if rend == "#b" else "*", part, depth)
        elif tag == "del":
            self._emphasis("~~", part, depth)
        elif tag == "hi" and rend in ("#sub", "#sup"):  # GFM keeps these HTML tags
            self._around(part, depth, f"<{rend[1:]}>", f"</{rend[1:]}>")
        elif tag == "code" or (tag == "hi" and rend == "#t"):
            self._code(subtree_text(part))
        elif tag == "ref":
            self._link(part, depth)
        elif tag == "graphic":
            source = href(part.get("src"))
            if source:
                alt = " ".join((part.get("alt") or "").translate(INVISIBLE).split())
                self.markdown.append(f"![{_escape(alt)}]({source})")
        elif tag in BLOCK_TAGS:  # a block inside a line (a cell, a link): apart by spaces
            self._both(" ")
            self.add_content(part, depth)
            self._both(" ")
        else:
            self.add_content(part, depth)

    def add_content(self, element: etree._Element, depth: int) -> None:
        if depth > MAX_DEPTH:
            self.add(subtree_text(element), depth)
            return
        for part in parts(element):
            self.add(part, depth + 1)

    def _both(self, text: str) -> None:
        self.plain.append(text)
        self.markdown.append(text)

    def _emphasis(self, mark: str, element: etree._Element, depth: int) -> None:
        if mark in self.marks:
            self.add_content(element, depth)
            return
        self.marks.add(mark)
        start = len(self.markdown)
        wrapped = self._around(element, depth, _OPEN[mark], _CLOSE[mark])
        self.marks.discard(mark)
        if not wrapped:
            return
        # `<b>a</b><b>b</b>` is one emphasis: `**a****b**` would be read as text. Not when an
        # emphasis around this one opened after the other closed: its mark will come between.
        before = start - 1
        while before >= self._floor() and not self.markdown[before]:
            before -= 1
        joins = before >= self._floor() and self.markdown[before] == _CLOSE[mark]
        if joins and not self.markdown[start]:
            self.markdown[before] = self.markdown[start + 1] = ""

    def _around(self, element: etree._Element, depth: int, opening: str, closing: str) -> bool:
        """Adds the element's content with marks around it, and the whitespace at its edges
        outside them (CommonMark reads `** bold**` as text); none around nothing. Whether it
        put them."""
        start = len(self.markdown)
        self._opened.append(start)
        self.add_content(element, depth)
        self._opened.pop()
        inner = "".join(self.markdown[start:])
        core = inner.strip(_EDGE_CHARS)
        if not core:
            return False
        lead = inner[: len(inner) - len(inner.lstrip(_EDGE_CHARS))]
        trail = inner[len(inner.rstrip(_EDGE_CHARS)) :]
        self.markdown[start:] = [lead, opening, core, closing, trail]
        return True

    def _floor(self) -> int:
        """Where the innermost wrapped run around what is being added starts."""
        return self._opened[-1] if self._opened else 0

    def _link(self, element: etree._Element, depth: int) -> None:
        address = href(element.get("target"))
        if self.in_link or address is None:
            self.add_content(element, depth)
            return
        self._escape_bang()
        self.in_link = True
        self._around(element, depth, "[", f"]({address})")
        self.in_link = False

    def _escape_bang(self) -> None:
        """Escapes a `!` right before a link's `[`, which would make it an image."""
        index = len(self.markdown) - 1
        while index >= 0 and not self.markdown[index]:
            index -= 1
        before = self.markdown[index] if index >= 0 else ""
        backslashes = len(before) - 1 - len(before[:-1].rstrip("\\"))
        if before.endswith("!") and backslashes % 2 == 0:
            self.markdown[index] = before[:-1] + "\\!"

    def _code(self, code: str) -> None:
        code = code.translate(INVISIBLE)
        content = " ".join(code.split())
        if not content:
            self._both(code)
            return
        lead = " " if code[0].isspace() else ""
        trail = " " if code[-1].isspace() else ""
        self.plain.append(f"{lead}{content}{trail}")
        if self.in_cell:  # GFM splits a row at every unescaped `|`, even in code
            content = content.replace("|", "\\|")
        self.markdown += [lead, f"{_CODE_OPEN}{content}{_CODE_CLOSE}", trail]

    def line(self) -> tuple[str, str]:
        """The run as one line of text and of Markdown (a heading, a cell)."""
        return _lines("".join(self.plain), " "), _lines(_resolve("".join(self.markdown)), " ")

    def paragraph(self, text: str | None = None) -> tuple[str, str] | None:
        """The run (or `text` added to it) as the lines of a paragraph, or None if it is empty."""
        if text:
            self.add(text, 0)
        markdown = "".join(self.markdown)
        if not markdown or markdown.isspace():
            return None
        lines = _lines(_resolve(markdown), "\n").split("\n")
        markdown = "\\\n".join(map(_escape_line_start, lines))
        return (_lines("".join(self.plain), "\n"), markdown) if markdown else None


def _lines(text: str, newline: str) -> str:
    """The text's lines, at its breaks, with whitespace collapsed and empty lines dropped."""
    lines = (" ".join(line.split()) for line in text.split(_BREAK))
    return newline.join(line for line in lines if line)


def _resolve(markdown: str) -> str:
    """The line's emphasis marks and code spans written out.

    A pair of marks is dropped where CommonMark would not read it as emphasis: `**Name:**value`
    is none, as a closing run after punctuation must be followed by a space or punctuation.
    Dropping a pair changes its neighbours' neighbours, so pairs are checked again until none is
    dropped. Code spans that touch then are one."""
    # Each mark looked for in turn: a scan in C, where `isdisjoint` asks of every character.
    if any(sentinel in markdown for sentinel in _MARK):
        markdown = _resolve_marks(markdown)
    if _CODE_OPEN in markdown:
        markdown = _CODE_SPAN.sub(_code_span, markdown.replace(_CODE_CLOSE + _CODE_OPEN, ""))
    return markdown


def _resolve_marks(markdown: str) -> str:
    pairs: list[tuple[int, int]] = []
    opened: list[int] = []
    for match in _MARKS.finditer(markdown):
        if match[0] in _OPENING:
            opened.append(match.start())
        else:
            pairs.append((opened.pop(), match.start()))
    kept = {index: _MARK[markdown[index]] for pair in pairs for index in pair}
    dropped = True
    while dropped:
        dropped = False
        for start, end in pairs:
            if not kept[start]:
                continue
            if not (_flanks(markdown, kept, start, True) and _flanks(markdown, kept, end, False)):
                kept[start] = kept[end] = ""
                dropped = True
    return _MARKS.sub(lambda match: kept[match.start()], markdown)


def _code_span(match: re.Match[str]) -> str:
    content = match[1]
    fence = "`" * (longest_run(content, "`") + 1)
    pad = " " if content[0] == "`" or content[-1] == "`" else ""
    return f"{fence}{pad}{content}{pad}{fence}"


def _flanks(markdown: str, kept: dict[int, str], index: int, left: bool) -> bool:
    """Whether the mark at `index` is a left- (opening) or right-flanking (closing) run."""
    before = _neighbour(markdown, kept, index, -1)
    after = _neighbour(markdown, kept, index, 1)
    inner, outer = (after, before) if left else (before, after)
    if inner.isspace():
        return False
    return not _is_punctuation(inner) or outer.isspace() or _is_punctuation(outer)


def _neighbour(markdown: str, kept: dict[int, str], index: int, step: int) -> str:
    """The character next to a mark: marks of its own character are of its run and dropped
    marks are nothing, so both are stepped over; a space at either end, or for a break."""
    own = _MARK[markdown[index]][0]
    index += step
    while 0 <= index < len(markdown) and markdown[index] in _MARK:
        if kept[index] and kept[index][0] != own:
            return kept[index][0]
        index += step
    if not 0 <= index < len(markdown) or markdown[index] == _BREAK:
        return " "
    return "`" if markdown[index] in (_CODE_OPEN, _CODE_CLOSE) else markdown[index]


def _is_punctuation(char: str) -> bool:
    return unicodedata.category(char)[0] in "PS"
