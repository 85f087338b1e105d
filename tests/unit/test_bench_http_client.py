"""bench.http_client.ResponseParser: HTTP/1.1 answers split out of a connection's bytes."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bench.http_client import ProtocolError, ResponseParser

BODY = b'{"delivery_id":"x"}'
ANSWER = (
    b"HTTP/1.1 202 Accepted\r\nContent-Type: application/json; charset=utf-8\r\n"
    b"Content-Length: %d\r\nDate: Thu, 03 Dec 2026 14:00:00 GMT\r\n\r\n%s" % (len(BODY), BODY)
)


def test_one_answer_in_one_read() -> None:
    assert ResponseParser().feed(ANSWER) == [(202, BODY, True)]


@given(st.lists(st.integers(min_value=1, max_value=len(ANSWER) * 3 - 1), max_size=6))
def test_answers_split_anywhere_come_out_whole_and_in_order(cuts: list[int]) -> None:
    stream = ANSWER + ANSWER.replace(b"202 Accepted", b"422 Unprocessable") + ANSWER
    parser = ResponseParser()
    out: list[tuple[int, bytes, bool]] = []
    at = 0
    for cut in [*sorted(set(cuts)), len(stream)]:
        out += parser.feed(stream[at:cut])
        at = cut
    assert [status for status, _, _ in out] == [202, 422, 202]
    assert {body for _, body, _ in out} == {BODY}


def test_a_partial_answer_waits_for_the_rest() -> None:
    parser = ResponseParser()
    assert parser.feed(ANSWER[:-3]) == []
    assert parser.feed(ANSWER[-3:]) == [(202, BODY, True)]


def test_connection_close_and_http_1_0_are_not_kept_alive() -> None:
    closing = b"HTTP/1.1 503 Service Unavailable\r\nConnection: close\r\nContent-Length: 0\r\n\r\n"
    old = b"HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok"
    assert ResponseParser().feed(closing) == [(503, b"", False)]
    assert ResponseParser().feed(old) == [(200, b"ok", False)]


@pytest.mark.parametrize(
    "head",
    [
        b"HTTP/1.1 200 OK\r\nContent-Type: text/plain",  # no length: body would run to close
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked",
        b"HTTP/1.1 200 OK\r\nContent-Length: -1",
        b"SSH-2.0-OpenSSH_9.2p1 Debian",
        b"HTTP/1.1 OK",
    ],
)
def test_answers_it_cannot_read_are_an_error_not_a_guess(head: bytes) -> None:
    with pytest.raises(ProtocolError):
        ResponseParser().feed(head + b"\r\n\r\n")
