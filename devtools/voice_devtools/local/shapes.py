"""What SageMaker runtime puts on the wire, for the local front door: error responses and event
stream messages.

Error responses follow the restJson1 protocol both runtime APIs use (the SDKs read the error name
from the ``X-Amzn-ErrorType`` header): ``ValidationError`` (InvokeEndpointWithResponseStream) and
``InputValidationError`` (InvokeEndpointWithBidirectionalStream) with HTTP 400, ``ModelError`` with
424 and the container's status and message (``OriginalStatusCode``, ``OriginalMessage``,
``LogStreamArn``, ``ErrorCode`` ``CLIENT_ERROR_FROM_MODEL`` / ``SERVER_ERROR_FROM_MODEL``), and the
front end's own authentication errors (403). Sources: the SageMaker API Reference pages of both
operations (errors and their status codes) and the error bodies SageMaker returns (``Endpoint <name>
of account <id> not found.``; ``Received client error (<status>) from primary with message "<body>".
See <log URL> in account <id> for more information.``).

Event stream messages use the AWS event stream encoding (``application/vnd.amazon.eventstream``)
through ``smithy_aws_event_stream``, the codec the bidirectional SDK itself uses: a ``PayloadPart``
event carries the bytes as its payload and ``DataType`` / ``CompletionState`` as headers;
``ModelStreamError`` and ``InternalStreamFailure`` are exception messages with a JSON payload
(``{"Message", "ErrorCode"}``).
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass, field
from typing import Any

EVENT_STREAM_CONTENT_TYPE = "application/vnd.amazon.eventstream"

UTF8 = "UTF8"
BINARY = "BINARY"
PARTIAL = "PARTIAL"
COMPLETE = "COMPLETE"

ACCOUNT_ID = "123456789012"
"""Account the local endpoints belong to (the documentation account ID AWS uses in its examples)."""


@dataclass(eq=False)  # compared by identity, as exceptions are
class ServiceError(Exception):
    """An error response of SageMaker runtime.

    Attributes:
        status: HTTP status.
        code: error name, sent as ``X-Amzn-ErrorType``.
        message: human-readable message.
        members: other members of the error shape (``ErrorCode``, ``OriginalStatusCode``, ...).
        message_key: ``Message`` for SageMaker's modeled errors, ``message`` for the AWS front end's
            own errors.
    """

    status: int
    code: str
    message: str
    members: dict[str, Any] = field(default_factory=dict)
    message_key: str = "Message"

    def __str__(self) -> str:
        return f"{self.code}: {self.message}"

    def response(self) -> tuple[int, list[tuple[bytes, bytes]], bytes]:
        """Status, headers and JSON body of the error response."""
        body = json.dumps({self.message_key: self.message, **self.members}).encode()
        headers = [
            (b"content-type", b"application/json"),
            (b"x-amzn-errortype", self.code.encode()),
            (b"x-amzn-requestid", str(uuid.uuid4()).encode()),
            (b"content-length", str(len(body)).encode()),
        ]
        return self.status, headers, body


def validation_error(message: str, *, bidirectional: bool) -> ServiceError:
    """A bad request: ``InputValidationError`` on the bidirectional API, ``ValidationError`` on the
    others (400)."""
    code = "InputValidationError" if bidirectional else "ValidationError"
    return ServiceError(400, code, message, message_key="Message" if bidirectional else "message")


def endpoint_not_found(name: str, *, bidirectional: bool) -> ServiceError:
    """The error SageMaker returns for an endpoint name it does not know."""
    return validation_error(
        f"Endpoint {name} of account {ACCOUNT_ID} not found.", bidirectional=bidirectional
    )


def log_stream_arn(region: str, endpoint: str) -> str:
    """ARN of the endpoint's log group, as a ModelError's ``LogStreamArn`` gives it."""
    return f"arn:aws:logs:{region}:{ACCOUNT_ID}:log-group:/aws/sagemaker/Endpoints/{endpoint}"


def model_error(
    region: str, endpoint: str, *, status: int | None, original: str, variant: str
) -> ServiceError:
    """``ModelError`` (424): the container refused the request or failed; ``status`` is its HTTP
    status, if any."""
    kind = "client" if status is not None and status < 500 else "server"
    members: dict[str, Any] = {
        "ErrorCode": f"{kind.upper()}_ERROR_FROM_MODEL",
        "OriginalMessage": original,
        "LogStreamArn": log_stream_arn(region, endpoint),
    }
    if status is not None:
        members["OriginalStatusCode"] = status
    shown = f" ({status})" if status is not None else ""
    message = (
        f'Received {kind} error{shown} from {variant} with message "{original}". See the log group '
        f"/aws/sagemaker/Endpoints/{endpoint} in account {ACCOUNT_ID} for more information."
    )
    return ServiceError(424, "ModelError", message, members)


def encode_event(headers: dict[str, Any], payload: bytes) -> bytes:
    """One event stream message (prelude, headers, payload, CRCs) with smithy's encoder."""
    from smithy_aws_event_stream.events import EventMessage

    return EventMessage(headers=headers, payload=payload).encode()


def payload_part(
    data: bytes, *, data_type: str | None = None, completion_state: str | None = None
) -> bytes:
    """A ``PayloadPart`` event; ``data_type``/``completion_state`` are left out when None
    (InvokeEndpointWithResponseStream parts have neither)."""
    headers: dict[str, Any] = {
        ":message-type": "event",
        ":event-type": "PayloadPart",
        ":content-type": "application/octet-stream",
    }
    if data_type is not None:
        headers["DataType"] = data_type
    if completion_state is not None:
        headers["CompletionState"] = completion_state
    return encode_event(headers, data)


def exception_event(name: str, message: str, error_code: str | None = None) -> bytes:
    """A modeled exception of the response stream (``ModelStreamError``,
    ``InternalStreamFailure``)."""
    body: dict[str, str] = {"Message": message}
    if error_code is not None:
        body["ErrorCode"] = error_code
    return encode_event(
        {
            ":message-type": "exception",
            ":exception-type": name,
            ":content-type": "application/json",
        },
        json.dumps(body).encode(),
    )


def error_event(code: str, message: str) -> bytes:
    """An unmodeled error message of the response stream (``:message-type`` ``error``), e.g. a bad
    event signature."""
    return encode_event(
        {":message-type": "error", ":error-code": code, ":error-message": message}, b""
    )
