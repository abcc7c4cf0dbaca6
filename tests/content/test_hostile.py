"""app.content.hostile: pages cheap to recognise as hostile are refused before trafilatura,
with a reason that names the cap and its setting; the scan before the parse reads the markup
as libxml2 does, so that no element past the cap reaches the parse; real pages pass."""

import gzip

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.content.charsets import charset_of, decode
from app.content.extract import PARSE_MAX_CHARS, ExtractionLimits, extract
from app.content.hostile import PageCaps, check_markup, check_tree
from app.content.html import _parse
from app.content.types import UnparseableContent
from bench.eval_pages import default_data

ONE_P_OF_100_000_ATTRIBUTES = (
    b"<html><body><p "
    + b" ".join(b"a%d=x" % n for n in range(100_000))
    + b">text</p></body></html>"
)
"""The issue's first page: libxml2 alone would parse it past any deadline."""
PARAGRAPHS_200_000 = b"<html><body>" + b"<p>x</p>" * 200_000 + b"</body></html>"
"""The issue's second: trafilatura would read it past the deadline."""


@pytest.mark.parametrize(
    ("page", "reason"),
    [
        (
            ONE_P_OF_100_000_ATTRIBUTES,
            "hostile page: 100,000 attributes on one element"
            " (limit 1,000, INGEST_EXTRACT_MAX_ATTRIBUTES_PER_ELEMENT)",
        ),
        (
            PARAGRAPHS_200_000,
            "hostile page: 200,002 elements (limit 50,000, INGEST_EXTRACT_MAX_ELEMENTS)",
        ),
    ],
)
def test_the_issues_hostile_pages_are_refused_saying_why(page: bytes, reason: str) -> None:
    """Both of the issue's pages are refused (UnparseableContent, a fatal failure) by the
    default caps, the reason naming the cap and its setting."""
    with pytest.raises(UnparseableContent) as refused:
        extract(page, "text/html")
    assert reason == str(refused.value)


def caps(**values: int) -> ExtractionLimits:
    return ExtractionLimits(page=PageCaps(**values))


def attributes(count: int) -> str:
    return " ".join(f"a{n}" for n in range(count))


@pytest.mark.parametrize(
    ("page", "limits", "refused"),
    [
        ("<p>x</p>" * 9, caps(elements=11), None),  # and html, body
        ("<p>x</p>" * 10, caps(elements=11), "12 elements (limit 11, INGEST_EXTRACT_MAX_"),
        (f"<p {attributes(5)}>x</p><p {attributes(5)}>y</p>", caps(attributes=10), None),
        (f"<p {attributes(5)}>x</p><p {attributes(6)}>y</p>", caps(attributes=10), "11 attr"),
        (f"<p {attributes(5)}>x</p>", caps(attributes_per_element=5), None),
        (f"<p {attributes(6)}>x</p>", caps(attributes_per_element=5), "6 attributes on one"),
    ],
)
def test_each_cap_refuses_past_it_and_not_at_it(
    page: str, limits: ExtractionLimits, refused: str | None
) -> None:
    """A page at a cap is extracted; one past it is refused, the reason counting what it has."""
    try:
        extract(page.encode(), "text/html", limits=limits)
        reason = None
    except UnparseableContent as exc:
        reason = str(exc)
    assert (refused is None, True) == (reason is None, refused is None or refused in str(reason))


def scan_refuses(page: str, limit: int) -> bool:
    try:
        check_markup(page, PageCaps(attributes_per_element=limit))
    except UnparseableContent:
        return True
    return False


def most_attributes(page: str) -> int:
    """The most attributes libxml2 gives one element of the page."""
    tree = _parse(page)
    return 0 if tree is None else max(len(element.attrib) for element in tree.iter())


FAT = f"<p {attributes(4)}>"


@pytest.mark.parametrize(
    ("page", "built"),
    [
        (f"<script><!--<script></script>--></script>{FAT}", True),  # escaped twice, then undone
        (f"<script><!--<script></script></script>{FAT}", True),  # undone, then the escaped end
        (f"<script><!--</script>{FAT}", True),
        (f"<script><!--<script></script><!-- </script>{FAT} -->", True),  # no comment
        (f"<script><!-- --> x</script>{FAT}", True),
        (f"<script>'<!--'</script>{FAT}", True),
        (f"<script type=x/>{FAT}</script>", False),  # "x/" is the value: not self-closed
        (f"<script/>{FAT}", True),  # self-closed: no script text
        (f"<scriptx>{FAT}", True),
        (f"<\u017fcript>{FAT}", True),  # only ASCII letters fold: no script
        (f"<textarea><!--</textarea>{FAT}-->", True),
        (f"<title><script></title>{FAT}", True),
        (f"<style></stylex>{FAT}</style>", False),
        (f"<xmp></xmp\t{FAT}", False),  # the end tag's attributes
        (f"<iframe></IFRAME>{FAT}", True),
        (f"<noscript><!--</noscript>{FAT}-->", False),  # noscript is no raw text
        (f"<plaintext></plaintext>{FAT}", False),  # text to the end
        (f"<!-- --!>{FAT}", True),
        (f"<!-->{FAT}", True),
        (f"<!--->{FAT}", True),
        (f"<!-- -- >{FAT}-->", False),
        (f"<!DOCTYPE html x='>'{FAT}", True),
        (f"<?php echo '>'; {FAT}", True),
        (f"</p a='>'{FAT}", False),
        (f"</ x='>'{FAT}", True),
        (f"<b title='{FAT}'>", False),
        (f"<b a\"b='>' {attributes(4)}>", True),  # the quote is part of a name
        ('<b a="x"a0=""a1=""a2=""a3="">', True),  # no blank needed after a quoted value
        ("<b/a1/a2/a3/a4>", True),
    ],
)
def test_the_scan_reads_markup_as_libxml2_does(page: str, built: bool) -> None:
    """Markup that hides an element of 4 attributes, or seems to: libxml2 builds one or not
    (as said), and the scan before the parse refuses the page (at a cap of 3) exactly then."""
    assert (built, built) == (most_attributes(page) > 3, scan_refuses(page, 3))


def test_a_tag_cut_off_by_the_end_of_the_page_counts() -> None:
    """A tag the page's end cuts off is dropped by libxml2, but only once it has read (and
    compared) its attributes: the scan counts them."""
    page = f"<b {attributes(4)}"
    assert (0, True) == (most_attributes(page), scan_refuses(page, 3))


FRAGMENTS = [
    *("<p", "<b", "</p", "<script", "</script", "<SCRIPT", "</Script", "<script/"),
    *("<style", "</style", "<title", "</title", "<textarea", "</textarea", "<xmp", "</xmp"),
    *("<iframe", "</iframe", "<noembed", "</noembed", "<noframes", "</noframes"),
    *("<plaintext", "<noscript", "<html", "<body", "<head", "<svg", "<scriptx"),
    *("<!--", "-->", "--!>", "<!-->", "<!--->", "-", "<!", "<?", "</", "</>", "<!DOCTYPE"),
    *('"', "'", "=", " ", "\n", "\t", "\r", "\f", "/", ">", "/>", "<", "x", "\x00", "\u017f"),
]


@st.composite
def pages(draw: st.DrawFn) -> str:
    """Markup of the fragments above and of attributes all named apart."""
    parts = draw(st.lists(st.sampled_from([*FRAGMENTS, "ATTRIBUTES"]), max_size=40))
    named = iter(range(10_000))
    return "".join(
        " ".join(f" a{next(named)}" for _ in range(3)) if part == "ATTRIBUTES" else part
        for part in parts
    )


@settings(max_examples=1500, deadline=None)
@given(page=pages(), limit=st.integers(min_value=1, max_value=4))
def test_a_page_the_scan_passes_has_no_element_past_the_cap(page: str, limit: int) -> None:
    """Whatever the markup, a page the scan passes parses into no element of more
    attributes than the cap: the scan never reads as text what libxml2 reads as a tag."""
    assert scan_refuses(page, limit) or most_attributes(page) <= limit


def test_no_page_of_the_evaluation_set_is_refused() -> None:
    """The 990 real pages of ../shared/extraction-eval, read as extraction reads them, pass
    the default caps (the most they hold: 43 attributes on one element, 10,106 elements,
    10,154 attributes)."""
    data = default_data()
    if not (data / "expected.json").is_file():
        pytest.skip(f"no evaluation set at {data}")
    refused = []
    for path in sorted((data / "pages").glob("*.html.gz")):
        body = gzip.decompress(path.read_bytes())
        page = decode(body, charset_of(body, "text/html").codec)[:PARSE_MAX_CHARS]
        try:
            check_markup(page, PageCaps())
            tree = _parse(page)
            if tree is not None:
                check_tree(tree, page, PageCaps())
        except UnparseableContent as exc:
            refused.append(f"{path.name}: {exc}")
    assert [] == refused
