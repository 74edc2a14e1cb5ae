"""The bridge's plain HTTP answers: the JSON responses, and what a request other than GET is told.

websockets' HTTP/1.1 parser (`websockets.http11.Request.parse`, used by `ServerProtocol`) accepts
only GET. SageMaker's `POST /invocations` (the non-streaming InvokeEndpoint) and anything else a
caller may send deserve a clear error rather than a dropped connection, so the bridge reads the
request head of a non-GET request itself, here, and answers it. It never reads the body: after the
answer the bridge half-closes the connection and discards what follows until the caller closes (see
`legs.ClientLeg`), so the answer cannot be lost to a reset, whatever the body's framing.

Only what the answer needs is parsed: the request line, and `Content-Length` when present, checked
to be plain ASCII digits of a sane length (a value such as `²`, which `str.isdigit()` accepts and
`int()` refuses, or 5000 digits, gets 400 instead of an exception).
"""

from __future__ import annotations

import http
import json
import re

from websockets.datastructures import Headers
from websockets.http11 import Response

#: Largest request head (request line and headers) the bridge reads, bytes; a larger one gets 431.
#: websockets' own limits are 8 KiB per line and 128 headers (`websockets.http11`).
MAX_HEAD_BYTES = 16 * 1024
#: Longest Content-Length value accepted, in digits: 10 digits is up to 9.3 GiB, far above any body
#: a caller has reason to send here (InvokeEndpoint's body is at most 6 MB: sagemaker-runtime's
#: service model, `BodyBlob` max 6291456).
MAX_CONTENT_LENGTH_DIGITS = 10
_ASCII_DIGITS = re.compile(rb"[0-9]{1,%d}" % MAX_CONTENT_LENGTH_DIGITS)


def json_response(
    status: http.HTTPStatus, body: dict[str, object], extra: dict[str, str] | None = None
) -> Response:
    """An HTTP response with a JSON body and `Connection: close` (websockets' `Response` event)."""
    payload = json.dumps(body).encode()
    headers = Headers(
        {
            "Content-Type": "application/json",
            "Content-Length": str(len(payload)),
            "Connection": "close",
            **(extra or {}),
        }
    )
    return Response(status.value, status.phrase, headers, payload)


def answer_non_get(
    head: bytes, stream_path: str, ping_path: str, invocations_path: str
) -> Response:
    """The answer to a request head (`head`, up to but not including the blank line) whose method is
    not GET.

    - `POST /invocations` (InvokeEndpoint): 400 `use_bidirectional_stream`, naming the streaming
      path;
    - a malformed request line, or a `Content-Length` that is not 1 to 10 ASCII digits (or differs
      between two headers): 400 naming what is wrong;
    - anything else: 405 with `Allow: GET`.
    """
    text = head.decode("latin-1")
    request_line, *header_lines = text.split("\r\n")
    parts = request_line.split(" ")
    if len(parts) != 3 or not parts[2].startswith("HTTP/"):
        return json_response(
            http.HTTPStatus.BAD_REQUEST,
            {"error": "malformed HTTP request line", "code": "bad_request"},
        )
    method, target, _ = parts
    lengths = {
        value.strip().encode("latin-1")
        for name, _, value in (line.partition(":") for line in header_lines)
        if name.strip().lower() == "content-length"
    }
    if any(not _ASCII_DIGITS.fullmatch(value) for value in lengths) or len(lengths) > 1:
        return json_response(
            http.HTTPStatus.BAD_REQUEST,
            {
                "error": f"Content-Length must be one value of 1 to {MAX_CONTENT_LENGTH_DIGITS} "
                "ASCII digits",
                "code": "bad_request",
            },
        )
    path = target.split("?", 1)[0]
    if method == "POST" and path == invocations_path:
        return json_response(
            http.HTTPStatus.BAD_REQUEST,
            {
                "error": (
                    "This endpoint streams: call InvokeEndpointWithBidirectionalStream, which "
                    f"SageMaker delivers to the container as a WebSocket at {stream_path}; POST "
                    f"{invocations_path} (InvokeEndpoint) is not supported."
                ),
                "code": "use_bidirectional_stream",
            },
        )
    return json_response(
        http.HTTPStatus.METHOD_NOT_ALLOWED,
        {
            "error": f"{method} {path} is not supported; the bridge answers GET {ping_path} and "
            f"WebSocket {stream_path}"
        },
        {"Allow": "GET"},
    )
