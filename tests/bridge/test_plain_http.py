"""services/bridge/plain_http.py: what a request other than GET is answered, from its head alone
(the same answers over a socket: test_server.py)."""

from __future__ import annotations

import http
import json

import pytest

from bridge.plain_http import answer_non_get, json_response

PATHS = ("/invocations-bidirectional-stream", "/ping", "/invocations")


def answer(head: str):
    response = answer_non_get(head.encode("latin-1"), *PATHS)
    return response.status_code, json.loads(response.body), response.headers


def test_post_invocations_points_to_the_streaming_call():
    status, body, headers = answer("POST /invocations?x=1 HTTP/1.1\r\nContent-Length: 12")
    assert status == 400 and body["code"] == "use_bidirectional_stream"
    assert (
        "InvokeEndpointWithBidirectionalStream" in body["error"]
        and "/invocations-bidirectional-stream" in body["error"]
    )
    assert headers["Connection"] == "close" and headers["Content-Type"] == "application/json"
    assert headers["Content-Length"] == str(len(json.dumps(body).encode()))


def test_another_method_is_told_what_the_bridge_answers():
    status, body, headers = answer("DELETE /models HTTP/1.1")
    assert (status, headers["Allow"]) == (405, "GET")
    assert body == {
        "error": "DELETE /models is not supported; the bridge answers GET /ping and WebSocket "
        "/invocations-bidirectional-stream"
    }


@pytest.mark.parametrize(
    "head",
    [
        # str.isdigit() accepts it, int() does not
        "POST /invocations HTTP/1.1\r\nContent-Length: ²",
        "POST /invocations HTTP/1.1\r\nContent-Length: " + "9" * 11,
        "POST /invocations HTTP/1.1\r\nContent-Length: 1\r\ncontent-length: 2",
    ],
)
def test_a_content_length_that_is_not_one_short_ascii_number_is_a_bad_request(head):
    status, body, _ = answer(head)
    assert (status, body) == (
        400,
        {
            "error": "Content-Length must be one value of 1 to 10 ASCII digits",
            "code": "bad_request",
        },
    )


def test_a_malformed_request_line_is_a_bad_request():
    assert answer("POST /invocations")[:2] == (
        400,
        {"error": "malformed HTTP request line", "code": "bad_request"},
    )
    assert json_response(http.HTTPStatus.OK, {"a": 1}).body == b'{"a": 1}'
