"""`app.content.diff`: the text GNU `diff -u --label 'version 1' --label 'version 2'` prints."""

import pytest

from app.content.diff import line_count, lines, unified

NO_NEWLINE = "\\ No newline at end of file\n"
HEAD = "--- version 1\n+++ version 2\n"

CASES = [
    ("same\n", "same\n", ""),
    ("a\nb", "a\nb\n", f"{HEAD}@@ -1,2 +1,2 @@\n a\n-b\n{NO_NEWLINE}+b\n"),
    ("a\nb\n", "a\nb", f"{HEAD}@@ -1,2 +1,2 @@\n a\n-b\n+b\n{NO_NEWLINE}"),
    ("", "a", f"{HEAD}@@ -0,0 +1 @@\n+a\n{NO_NEWLINE}"),
    ("x\nend", "y\nend", f"{HEAD}@@ -1,2 +1,2 @@\n-x\n+y\n end\n{NO_NEWLINE}"),
    # Only "\n" ends a line: a line separator or a carriage return stays inside its line.
    (
        "a\u2028b\nc",
        "a\u2028b\nd",
        f"{HEAD}@@ -1,2 +1,2 @@\n a\u2028b\n-c\n{NO_NEWLINE}+d\n{NO_NEWLINE}",
    ),
    ("a\r\nb\r\n", "a\r\nc\r\n", f"{HEAD}@@ -1,2 +1,2 @@\n a\r\n-b\r\n+c\r\n"),
]


@pytest.mark.parametrize(("old", "new", "expected"), CASES)
def test_unified_reads_as_diff_u(old, new, expected):
    """Each case as GNU diff prints it: a last line without "\\n" is marked, never glued."""
    assert expected == unified(old, new, "version 1", "version 2")


@pytest.mark.parametrize("text", ["", "a", "a\n", "a\nb", "\n\n", "a\u2028b\r\nc"])
def test_line_count_counts_the_lines(text):
    """`line_count` agrees with `lines` without making them."""
    assert len(lines(text)) == line_count(text)
