"""bench.target: which page a request for /page/<i> is answered with."""

import asyncio

from bench.target import PageProtocol, response


class Transport(asyncio.Transport):
    def __init__(self) -> None:
        super().__init__()
        self.written: list[bytes] = []

    def write(self, data: bytes) -> None:  # type: ignore[override]
        self.written.append(data)

    def is_closing(self) -> bool:
        return False


def answered(answers: list[bytes], requests: bytes) -> list[bytes]:
    protocol = PageProtocol(answers, delay=0.0)
    transport = Transport()
    protocol.connection_made(transport)
    protocol.data_received(requests)
    return transport.written


def test_page_i_is_answered_with_the_i_th_answer_modulo_their_number() -> None:
    """/page/4 of three answers is the second; a path that is no page gets the first."""
    requests = b"GET /page/4 HTTP/1.1\r\nHost: x\r\n\r\nGET /other HTTP/1.1\r\nHost: x\r\n\r\n"
    assert [b"b", b"a"] == answered([b"a", b"b", b"c"], requests)


def test_one_answer_for_every_request() -> None:
    """With one answer (the 2 KB page), every path gets it."""
    page = response()
    assert [page, page] == answered([page], b"GET /page/7 HTTP/1.1\r\n\r\n" * 2)


def test_an_eval_page_is_served_as_text_html_with_no_charset() -> None:
    """The head names the type without a charset and the body's length."""
    expected = b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: 5\r\n\r\nbytes"
    assert expected == response(b"bytes", "text/html")
