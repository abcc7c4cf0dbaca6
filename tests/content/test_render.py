"""app.content.render: trafilatura's tree as plain text and as Markdown that reads back the same."""

import re

import pytest
import trafilatura
from hypothesis import given, settings
from hypothesis import strategies as st
from lxml import etree
from markdown_it import MarkdownIt
from trafilatura.settings import Document

from app.content.render import MAX_DEPTH, Rendered, render

COMMONMARK_GFM = MarkdownIt("commonmark").enable(["table", "strikethrough"])


def extracted(html: str) -> etree._Element:
    """The tree trafilatura makes of an article, with the options the extraction uses."""
    document = trafilatura.bare_extraction(
        f"<html><body><article>{html}</article></body></html>",
        url="https://example.com/a/",
        output_format="python",
        include_formatting=True,
        include_links=True,
        include_tables=True,
        include_images=True,
        include_comments=False,
        with_metadata=False,
    )
    assert isinstance(document, Document)
    return document.body


def tree(xml: str) -> etree._Element:
    return etree.fromstring(f"<body>{xml}</body>")


def rendered_text(markdown: str) -> str:
    """The text a CommonMark+GFM renderer shows for the Markdown, whitespace left out."""
    pieces: list[str] = []
    tokens = COMMONMARK_GFM.parse(markdown)
    while tokens:
        token = tokens.pop(0)
        if token.type == "inline":
            tokens[:0] = token.children or []
        elif token.type in ("text", "code_inline", "code_block", "fence"):
            pieces.append(token.content)
    return re.sub(r"\s+", "", "".join(pieces))


# ---- each construct, from the HTML trafilatura reads --------------------------------------


@pytest.mark.parametrize(
    ("html", "text", "markdown"),
    [
        pytest.param(
            "<h1>Title</h1><h3>Part <em>one</em></h3><p>Body.</p>",
            "Title\nPart one\nBody.",
            "# Title\n\n### Part *one*\n\nBody.",
            id="headings",
        ),
        pytest.param(
            "<p>A <b>bold</b>, <i>italic</i>, <u>underlined</u>, <del>gone</del>, H<sub>2</sub>O,"
            " x<sup>2</sup> and <code>a_b()</code> word.</p>",
            "A bold, italic, underlined, gone, H2O, x2 and a_b() word.",
            "A **bold**, *italic*, underlined, ~~gone~~, H<sub>2</sub>O, x<sup>2</sup> and"
            " `a_b()` word.",
            id="inline formatting",
        ),
        pytest.param(
            "<p>See <a href='/doc'>the doc</a>, <a href='mailto:a@b.org'>mail</a> and"
            " <a href='javascript:go()'>a script</a>.</p>",
            "See the doc, mail and a script.",
            "See [the doc](https://example.com/doc), [mail](mailto:a@b.org) and a script.",
            id="links",
        ),
        pytest.param(
            "<p>First line<br>second   line</p>",
            "First line\nsecond line",
            "First line\\\nsecond line",
            id="line break",
        ),
        pytest.param(
            "<ul><li>one<ul><li>two<ol><li>three</li><li>four</li></ol></li></ul></li>"
            "<li>five</li></ul>",
            "one\ntwo\nthree\nfour\nfive",
            "- one\n  - two\n    1. three\n    2. four\n- five",
            id="nested lists",
        ),
        pytest.param(
            "<ol><li>one</li></ol><ol><li>two</li></ol>",
            "one\ntwo",
            "1. one\n\n1) two",
            id="lists one after another stay apart",
        ),
        pytest.param(
            "<blockquote><p>One said.</p><p>Two said.</p></blockquote>",
            "One said.\nTwo said.",
            "> One said.\n>\n> Two said.",
            id="quote of two paragraphs",
        ),
        pytest.param(
            "<pre><code class='language-go'>func main() {\n\tfmt.Println(\"```\")\n}\n"
            "</code></pre>",
            'func main() {\n\tfmt.Println("```")\n}',
            '````go\nfunc main() {\n\tfmt.Println("```")\n}\n````',
            id="code block with a fence inside",
        ),
        pytest.param(
            "<table><thead><tr><th>Name</th><th>a|b</th></tr></thead><tbody><tr><td>c</td>"
            "<td><code>x|y</code></td></tr><tr><td>only</td></tr></tbody></table>",
            "Name\ta|b\nc\tx|y\nonly",
            "| Name | a\\|b |\n| --- | --- |\n| c | `x\\|y` |\n| only | |",
            id="table with pipes and a short row",
        ),
        pytest.param(
            "<p>Intro.</p><img src='/p.png' alt='A [photo]'>",
            "Intro.",
            "Intro.\n\n![A \\[photo\\]](https://example.com/p.png)",
            id="image",
        ),
    ],
)
def test_constructs_from_html(html: str, text: str, markdown: str) -> None:
    """Each construct trafilatura keeps reads as its text, and as its Markdown."""
    assert Rendered(text, markdown) == render(extracted(html))


# ---- hand-built trees: what HTML rarely makes ---------------------------------------------


@pytest.mark.parametrize(
    ("xml", "text", "markdown"),
    [
        pytest.param(
            "<list rend='ul'><item><p>one</p><p>two</p></item></list>",
            "one\ntwo",
            "- one\n\n  two",
            id="item of two paragraphs",
        ),
        pytest.param(
            "<list rend='ol'><item><code>a\n  b</code></item></list>",
            "a\n  b",
            "1. ```\n   a\n     b\n   ```",
            id="code block in an item",
        ),
        pytest.param(
            "<quote><quote><p>deep</p></quote><p>shallow</p></quote>",
            "deep\nshallow",
            "> > deep\n>\n> shallow",
            id="nested quote",
        ),
        pytest.param(
            "<p>a <ref target='https://x.org/(1)'>in <ref target='https://y.org'>out</ref></ref></p>",
            "a in out",
            "a [in out](https://x.org/%281%29)",
            id="link in a link, parentheses in an address",
        ),
        pytest.param(
            "<p>Wow!<ref target='https://x.org'>link</ref></p>",
            "Wow!link",
            "Wow\\![link](https://x.org)",
            id="an exclamation mark before a link",
        ),
        pytest.param(
            "<p><hi rend='#b'>Name:</hi>value and <hi rend='#b'>a</hi><hi rend='#b'>b</hi>c</p>",
            "Name:value and abc",
            "Name:value and **ab**c",
            id="emphasis CommonMark would not read is dropped; adjacent ones merge",
        ),
        pytest.param(
            "<p><hi rend='#b'> spaced </hi>out<hi rend='#i'><hi rend='#i'>twice</hi></hi></p>",
            "spaced outtwice",
            "**spaced** out*twice*",
            id="spaces outside marks, one mark for nested emphasis",
        ),
        pytest.param(
            "<p><hi rend='#t'>a `tick`</hi> and <code>`</code></p>",
            "a `tick` and `",
            "`` a `tick` `` and `` ` ``",
            id="inline code with backticks",
        ),
        pytest.param(
            "<div><contrib-group>Smith J</contrib-group>, <contrib-group>Li X</contrib-group>."
            "<section><p>inner</p></section></div>tail text",
            "Smith J, Li X.\ninner\ntail text",
            "Smith J, Li X.\n\ninner\n\ntail text",
            id="unknown tags: custom ones inline, HTML blocks as blocks, tails kept",
        ),
        pytest.param(
            "<p/><head rend='h2'> </head><list rend='ul'><item/></list><table><row><cell/></row>"
            "</table><code>\n \n</code><quote/><p>kept</p>",
            "kept",
            "kept",
            id="empty elements leave nothing",
        ),
        pytest.param(
            "<p>zero\u200bwidth soft\u00adhyphen \ufeffbom \u200e mark, \u0645\u06cc\u200c"
            "\u062e\u0648\u0627\u0647\u0645 \U0001f469\u200d\U0001f4bb</p>",
            "zerowidth softhyphen bom mark, \u0645\u06cc\u200c\u062e\u0648\u0627\u0647\u0645"
            " \U0001f469\u200d\U0001f4bb",
            "zerowidth softhyphen bom mark, \u0645\u06cc\u200c\u062e\u0648\u0627\u0647\u0645"
            " \U0001f469\u200d\U0001f4bb",
            id="invisible characters dropped, ZWNJ and ZWJ kept",
        ),
        pytest.param(
            "<table><row><cell role='head'>k</cell><cell role='head'>v</cell></row>"
            "<row><cell>a<lb/>b</cell><cell><p>c</p><p>d</p></cell></row></table>",
            "k\tv\na b\tc d",
            "| k | v |\n| --- | --- |\n| a b | c d |",
            id="line breaks and paragraphs in a cell are spaces",
        ),
        pytest.param(
            "<p>a\ue001b\ue002c\ue008d <hi rend='#sup'> </hi>e</p>",
            "abcd e",
            "abcd e",
            id="private-use characters this module uses inside are dropped from the input",
        ),
        pytest.param(
            "<head rend='h2'>C#</head><head>no level</head>",
            "C#\nno level",
            "## C\\#\n\n## no level",
            id="heading ending in # and heading without a level",
        ),
    ],
)
def test_constructs_from_trees(xml: str, text: str, markdown: str) -> None:
    """Nesting, odd trees and edge cases read as their text, and as Markdown."""
    assert Rendered(text, markdown) == render(tree(xml))


# ---- escaping -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "markdown"),
    [
        ("# not a heading", "\\# not a heading"),
        ("- not an item", "\\- not an item"),
        ("+ not an item", "\\+ not an item"),
        ("1. not an item", "1\\. not an item"),
        ("2024) not an item", "2024\\) not an item"),
        ("> not a quote", "\\> not a quote"),
        ("*not emphasis*", "\\*not emphasis\\*"),
        ("_not emphasis_ but snake_case", "\\_not emphasis\\_ but snake_case"),
        ("`not code`", "\\`not code\\`"),
        ("[not](a link)", "\\[not\\](a link)"),
        ("<div> and <!-- x --> but a < b", "\\<div> and \\<!-- x --> but a < b"),
        ("&amp; and &#169; but AT&T", "\\&amp; and \\&#169; but AT&T"),
        ("~~not struck~~ a|b", "\\~\\~not struck\\~\\~ a\\|b"),
        ("a \\* b", "a \\\\\\* b"),
        (
            "Plain (parenthesised) e.g. 3.5 - it's fine!",
            "Plain (parenthesised) e.g. 3.5 - it's fine!",
        ),
    ],
)
def test_escaping(text: str, markdown: str) -> None:
    """Text that would read as syntax is escaped, ordinary punctuation is not, and the Markdown
    renders back to the text."""
    actual = render(tree(f"<p>{text.replace('&', '&amp;').replace('<', '&lt;')}</p>"))
    assert Rendered(text, markdown) == actual
    assert re.sub(r"\s+", "", text) == rendered_text(actual.markdown)


@pytest.mark.parametrize(
    "line",
    ["# h", "- i", "1. i", "> q", "===", "---", "- - -", "12345) x", "+"],
)
def test_line_starts_after_a_break_are_escaped(line: str) -> None:
    """A line after an `lb` that would start a block stays in its paragraph."""
    actual = render(tree(f"<p>before<lb/>{line}</p>"))
    assert f"before\n{line}" == actual.text
    assert re.sub(r"\s+", "", f"before{line}") == rendered_text(actual.markdown)


def test_round_trip_of_a_mixed_page() -> None:
    """A page with every construct renders, as Markdown, to the text."""
    body = extracted(
        "<h2>Notes *and* [refs]</h2><p>1. Start <b>*bold*</b> <a href='/x_y'>_link_</a>"
        " a_b &lt;br&gt; `x`</p><ul><li>- item <i>#tag</i><ol><li>2. sub</li></ol></li></ul>"
        "<blockquote><p>&gt; q</p></blockquote><table><tr><th>| h</th></tr><tr><td>`|`</td>"
        "</tr></table><pre><code>  keep\n\tthis\n</code></pre>"
    )
    actual = render(body)
    assert re.sub(r"\s+", "", actual.text) == rendered_text(actual.markdown)


# Pieces of text that are syntax, or next to syntax, in Markdown.
PIECES = [
    "a",
    "b_c",
    " ",
    ".",
    "(",
    ")",
    "!",
    ":",
    "*",
    "_",
    "#",
    "- ",
    "1.",
    "`",
    "``",
    "[x]",
    "|",
    "<b>",
    "&amp;",
    "\\",
    "~",
    ">",
    "=",
    "+",
    "\n",
    "\u200b",
    "\ue002",
    "http://x.y",
]
TAGS = {
    "p": {},
    "head": {"rend": "h2"},
    "list": {"rend": "ol"},
    "item": {},
    "quote": {},
    "code": {},
    "table": {},
    "row": {},
    "cell": {},
    "hi": {"rend": "#b"},
    "i": {"rend": "#i"},
    "t": {"rend": "#t"},
    "ref": {"target": "/x"},
    "lb": {},
    "del": {},
    "div": {},
    "span": {},
}
texts = st.lists(st.sampled_from(PIECES), max_size=4).map("".join)
Node = tuple[str, str, str, list]  # tag, text, tail, children
trees: st.SearchStrategy[Node] = st.recursive(
    st.tuples(st.just("lb"), st.just(""), texts, st.just([])),
    lambda children: st.tuples(
        st.sampled_from(sorted(TAGS)), texts, texts, st.lists(children, max_size=3)
    ),
    max_leaves=25,
)


def built(node: Node) -> etree._Element:
    name, text, tail, children = node
    element = etree.Element({"i": "hi", "t": "hi"}.get(name, name), TAGS[name])
    element.text, element.tail = text, tail
    element.extend(map(built, children))
    return element


@settings(max_examples=300, deadline=None)
@given(st.lists(trees, max_size=4))
def test_markdown_renders_to_the_text(nodes: list[Node]) -> None:
    """Whatever the tree, its Markdown renders (CommonMark with GFM) to its text."""
    body = etree.Element("body")
    body.extend(map(built, nodes))
    actual = render(body)
    assert re.sub(r"\s+", "", actual.text) == rendered_text(actual.markdown)


# ---- code, depth ---------------------------------------------------------------------------


def test_code_whitespace_is_kept_exactly() -> None:
    """A code block keeps tabs, runs of spaces, blank lines and indentation, in both outputs."""
    code = "def f():\n\treturn  1   # two\n\n\n    x = [\n        1,\n    ]"
    xml = f"<code lang='python'>\n\n{code}\n</code>"
    assert Rendered(code, f"```python\n{code}\n```") == render(tree(xml))


def test_code_block_from_highlighted_spans() -> None:
    """A code block's text is its whole subtree's, with `lb` as a new line."""
    xml = "<code><span>if</span> x:<lb/>    <span class='k'>pass</span></code>"
    assert Rendered("if x:\n    pass", "```\nif x:\n    pass\n```") == render(tree(xml))


@pytest.mark.parametrize(
    "levels",
    [("list", "item"), ("quote",), ("div",), ("hi",), ("ref",), ("table", "row", "cell")],
)
def test_deep_nesting_does_not_crash(levels: tuple[str, ...]) -> None:
    """A tree nested far deeper than Python's recursion limit still reads as its text."""
    root = etree.Element("body")
    node = etree.SubElement(root, "p")
    for _ in range(5000):
        for tag in levels:
            node = etree.SubElement(node, tag, rend="#b", target="https://x.org")
    node.text = "leaf"
    assert "leaf" == render(root).text


def test_depth_limit_keeps_the_text() -> None:
    """Lists nested past MAX_DEPTH keep their structure to the limit and their text beyond."""
    depth = MAX_DEPTH + 10
    xml = "".join(f"<list rend='ul'><item>{n}" for n in range(depth)) + "</item></list>" * depth
    actual = render(tree(xml))
    assert [str(n) for n in range(depth)] == re.findall(r"\d+", actual.text)
    assert [str(n) for n in range(depth)] == re.findall(r"\d+", actual.markdown)


TITLE = "*Stars* & [links] #"
HEADING = "# \\*Stars\\* & \\[links\\] \\#"


@pytest.mark.parametrize(
    ("xml", "markdown"),
    [
        ("<p>Body.</p>", f"{HEADING}\n\nBody."),
        ("<list rend='ul'><item>one</item></list>", f"{HEADING}\n\n- one"),
        ("<head rend='h2'>Part one</head><p>Body.</p>", "## Part one\n\nBody."),
        ("<p>*stars*  &amp; [LINKS] #</p><p>Body.</p>", "\\*stars\\* & \\[LINKS\\] #\n\nBody."),
        ("", ""),
    ],
)
def test_the_title_heads_markdown_without_a_heading(xml: str, markdown: str) -> None:
    """The page's title, escaped, is a level-1 heading on top of content that opens with
    neither a heading nor the title itself (case and spacing aside), and of no empty
    content; the text is the same as without a title."""
    actual = render(tree(xml), TITLE)
    assert (render(tree(xml)).text, markdown) == (actual.text, actual.markdown)
