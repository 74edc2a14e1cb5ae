"""Check AWS Signature Version 4 as SageMaker runtime does: the request's ``Authorization`` header,
and for an event stream request each event envelope's ``:chunk-signature``, chained from the
request's signature.

Sources: AWS IAM User Guide, "Create a signed AWS API request" (canonical request, string to sign,
signing key, the 5-minute limit on a request's timestamp), and the event stream signing scheme the
AWS SDKs use for ``STREAMING-AWS4-HMAC-SHA256-EVENTS`` bodies
(``aws_sdk_signers.signers.AsyncEventSigner``: each envelope carries ``:date`` and
``:chunk-signature``; its string to sign is ``AWS4-HMAC-SHA256-PAYLOAD``, the envelope time, the
scope, the previous signature, SHA-256 of the encoded ``:date`` header and SHA-256 of the payload;
the final envelope is empty). The error codes and messages are the ones AWS's front end returns for
these faults.

The canonical request and the signing key come from botocore's ``SigV4Auth`` (an implementation
independent of the smithy signer the bidirectional client uses, so a mistake in one does not hide in
the other); only the event string to sign is assembled here, since no library verifies event
signatures.
"""

from __future__ import annotations

import datetime
import hashlib
import hmac
import re
from collections.abc import Iterable
from dataclasses import dataclass

SIGNING_NAME = "sagemaker"
"""SigV4 signing name of SageMaker Runtime and SageMaker Runtime HTTP2 (their service models'
``signingName``)."""

ALGORITHM = "AWS4-HMAC-SHA256"
EVENT_ALGORITHM = "AWS4-HMAC-SHA256-PAYLOAD"
TIMESTAMP_FORMAT = "%Y%m%dT%H%M%SZ"

MAX_CLOCK_SKEW = datetime.timedelta(minutes=5)

EVENT_STREAM_PAYLOAD = "STREAMING-AWS4-HMAC-SHA256-EVENTS"
"""``X-Amz-Content-SHA256`` of a request whose body is a signed event stream
(InvokeEndpointWithBidirectionalStream): each event then carries its own signature, chained from the
request's (AWS SDKs' event stream signer)."""

UNSIGNED_PAYLOAD = "UNSIGNED-PAYLOAD"
"""The ``X-Amz-Content-SHA256`` value that leaves a body out of the signature. AWS documents it for
Amazon S3 only (S3 API Reference, "Authenticating Requests: Using the Authorization Header");
SageMaker Runtime's API Reference documents SigV4 for its calls and no unsigned payload for
InvokeEndpointWithResponseStream or InvokeEndpointWithBidirectionalStream, so the local runtime
refuses it: accepting it would let a changed body pass under the same signature. (Whether SageMaker
itself accepts it is unconfirmed.)"""
"""A signed request is accepted for 5 minutes either side of its ``X-Amz-Date`` (IAM User Guide,
SigV4)."""

_AUTHORIZATION = re.compile(
    r"^AWS4-HMAC-SHA256\s+Credential=(?P<credential>[^,\s]+)\s*,\s*SignedHeaders=(?P<signed>[^,\s]+)\s*,"
    r"\s*Signature=(?P<signature>[0-9a-f]{64})\s*$"
)


class SignatureError(Exception):
    """The request is not signed, or not signed with the local credentials.

    Attributes:
        code: AWS's error code (``MissingAuthenticationTokenException``,
            ``IncompleteSignatureException``, ``UnrecognizedClientException``,
            ``InvalidSignatureException``).
        status: HTTP status AWS answers with (403, or 400 for an incomplete signature).
    """

    def __init__(self, code: str, message: str, status: int = 403) -> None:
        super().__init__(message)
        self.code = code
        self.status = status


@dataclass(frozen=True)
class LocalCredentials:
    """The one access key the local runtime accepts (static credentials; a session token is not
    checked)."""

    access_key_id: str
    secret_access_key: str

    def __post_init__(self) -> None:
        if not self.access_key_id or not self.secret_access_key:
            raise ValueError("the local runtime needs an access key ID and a secret access key")


@dataclass(frozen=True)
class SignedRequest:
    """A request whose signature checked out.

    Attributes:
        access_key_id: the caller's access key ID.
        timestamp: its ``X-Amz-Date`` (``YYYYMMDDTHHMMSSZ``).
        signature: its signature (64 hex digits): the seed of an event stream's signature chain.
    """

    access_key_id: str
    timestamp: str
    signature: str


class _Headers:
    """A case-insensitive view of a request's headers (repeated headers keep every value, in
    order)."""

    def __init__(self, headers: Iterable[tuple[str, str]]) -> None:
        self._values: dict[str, list[str]] = {}
        for name, value in headers:
            self._values.setdefault(name.lower(), []).append(value)

    def get(self, name: str) -> str | None:
        values = self._values.get(name.lower())
        return None if not values else ",".join(values)

    def all(self, name: str) -> list[str]:
        return self._values.get(name.lower(), [])


def _botocore_signer(credentials: LocalCredentials, region: str, signed_headers: list[str]):
    """botocore's SigV4Auth, restricted to the headers the caller says it signed (botocore would
    pick its own)."""
    from botocore.auth import SigV4Auth
    from botocore.awsrequest import HTTPHeaders
    from botocore.credentials import Credentials

    class _Verifier(SigV4Auth):
        def headers_to_sign(self, request):  # botocore API
            selected = HTTPHeaders()
            for name in signed_headers:
                for value in request.headers.get_all(name) or []:
                    selected.add_header(name, value)
            return selected

    return _Verifier(
        Credentials(credentials.access_key_id, credentials.secret_access_key), SIGNING_NAME, region
    )


def _check_payload_hash(declared: str | None, body: bytes | None) -> None:
    """Refuse an ``X-Amz-Content-SHA256`` the signature would trust without checking it (botocore's
    canonical request takes the header's value as the payload hash when the header is present).

    With a body (InvokeEndpointWithResponseStream): ``UNSIGNED-PAYLOAD`` is refused
    (:data:`UNSIGNED_PAYLOAD`) and any other value must be the body's SHA-256. Without (an event
    stream): the value must be :data:`EVENT_STREAM_PAYLOAD`, as the SDKs send it, when the header is
    there.

    Raises:
        SignatureError: naming the value and what is accepted.
    """
    if declared is None:
        return
    if body is None:
        if declared != EVENT_STREAM_PAYLOAD:
            raise SignatureError(
                "InvalidSignatureException",
                f"X-Amz-Content-SHA256 {declared[:80]!r} is not accepted "
                f"for an event stream request: sign it as {EVENT_STREAM_PAYLOAD} (each event then "
                "carries its own signature)",
            )
        return
    if declared == UNSIGNED_PAYLOAD:
        raise SignatureError(
            "InvalidSignatureException",
            f"X-Amz-Content-SHA256 {UNSIGNED_PAYLOAD} is not accepted: "
            "SageMaker Runtime documents no unsigned payload for this operation; sign the body "
            "(its SHA-256, as the AWS SDKs do by default)",
        )
    computed = hashlib.sha256(body).hexdigest()
    if declared.lower() != computed:
        raise SignatureError(
            "InvalidSignatureException",
            f"The provided X-Amz-Content-SHA256 {declared[:80]!r} does "
            f"not match the body's SHA-256 ({computed}): the body changed after it was signed",
            status=400,
        )


def verify_request(
    *,
    method: str,
    host: str,
    raw_path: str,
    query: str,
    headers: Iterable[tuple[str, str]],
    body: bytes | None,
    credentials: LocalCredentials,
    region: str,
    now: datetime.datetime | None = None,
) -> SignedRequest:
    """Check the SigV4 ``Authorization`` header of one request.

    Args:
        method, host, raw_path, query: the request line as received (``raw_path`` still
            percent-encoded).
        headers: every request header (name, value).
        body: the request body, or None when it is an event stream (its hash is then the
            ``X-Amz-Content-SHA256`` header, ``STREAMING-AWS4-HMAC-SHA256-EVENTS``).
        credentials, region: what the local runtime accepts.
        now: the current time (UTC); tests pass their own.

    Returns:
        The checked request's key ID, timestamp and signature.

    Raises:
        SignatureError: no ``Authorization`` header, a malformed one, another access key, a scope
            for another Region, service or day, a timestamp more than 5 minutes away, or a signature
            that does not match.
    """
    from botocore.awsrequest import AWSRequest, HTTPHeaders

    view = _Headers(headers)
    authorization = view.get("authorization")
    if authorization is None:
        raise SignatureError("MissingAuthenticationTokenException", "Missing Authentication Token")
    match = _AUTHORIZATION.match(authorization)
    if match is None:
        raise SignatureError(
            "IncompleteSignatureException",
            "Authorization header requires 'Credential', 'SignedHeaders' and 'Signature' "
            f"parameters, in the {ALGORITHM} form. Authorization={authorization[:120]}",
            status=400,
        )
    key_id, _, scope = match["credential"].partition("/")
    if key_id != credentials.access_key_id:
        raise SignatureError(
            "UnrecognizedClientException", "The security token included in the request is invalid."
        )
    timestamp = view.get("x-amz-date")
    if timestamp is None:
        raise SignatureError(
            "IncompleteSignatureException",
            "Authorization header requires existence of either a 'X-Amz-Date' or a 'Date' header.",
            status=400,
        )
    try:
        signed_at = datetime.datetime.strptime(timestamp, TIMESTAMP_FORMAT).replace(
            tzinfo=datetime.UTC
        )
    except ValueError:
        raise SignatureError(
            "IncompleteSignatureException",
            f"Date must be in ISO-8601 'basic format'. Got '{timestamp}'.",
            status=400,
        ) from None
    scope_parts = scope.split("/")
    if len(scope_parts) != 4 or scope_parts[3] != "aws4_request":
        raise SignatureError(
            "IncompleteSignatureException",
            f"Credential should be scoped to a valid region, not '{scope}'.",
            status=400,
        )
    day, scope_region, service, _ = scope_parts
    if day != timestamp[:8]:
        raise SignatureError(
            "InvalidSignatureException",
            "Date in Credential scope does not match YYYYMMDD from ISO-8601 version of date "
            f"from HTTP: '{day}' != '{timestamp[:8]}', from '{timestamp}'.",
        )
    if scope_region != region:
        raise SignatureError(
            "InvalidSignatureException",
            f"Credential should be scoped to a valid region, not "
            f"'{scope_region}'. (This local runtime serves {region}.)",
        )
    if service != SIGNING_NAME:
        raise SignatureError(
            "InvalidSignatureException",
            f"Credential should be scoped to correct service: '{SIGNING_NAME}'.",
        )
    now = now or datetime.datetime.now(datetime.UTC)
    if signed_at < now - MAX_CLOCK_SKEW:
        raise SignatureError(
            "InvalidSignatureException",
            f"Signature expired: {timestamp} is now earlier than "
            f"{(now - MAX_CLOCK_SKEW).strftime(TIMESTAMP_FORMAT)} "
            f"({now.strftime(TIMESTAMP_FORMAT)} - 5 min.)",
        )
    if signed_at > now + MAX_CLOCK_SKEW:
        latest = (now + MAX_CLOCK_SKEW).strftime(TIMESTAMP_FORMAT)
        raise SignatureError(
            "InvalidSignatureException",
            f"Signature not yet current: {timestamp} is still later "
            f"than {latest} ({now.strftime(TIMESTAMP_FORMAT)} + 5 min.)",
        )
    _check_payload_hash(view.get("x-amz-content-sha256"), body)
    signed_headers = match["signed"].split(";")
    if "host" not in signed_headers:
        raise SignatureError("InvalidSignatureException", "'Host' must be a signed header.")
    request_headers = HTTPHeaders()
    for name in signed_headers:
        for value in view.all(name):
            request_headers.add_header(name, value)
    if view.get("host") is None:
        request_headers.add_header("host", host)
    url = f"https://{view.get('host') or host}{raw_path}" + (f"?{query}" if query else "")
    request = AWSRequest(method=method, url=url, headers=request_headers, data=body)
    request.context["timestamp"] = timestamp
    signer = _botocore_signer(credentials, region, signed_headers)
    canonical = signer.canonical_request(request)
    expected = signer.signature(signer.string_to_sign(request, canonical), request)
    if not hmac.compare_digest(expected, match["signature"]):
        raise SignatureError(
            "InvalidSignatureException",
            "The request signature we calculated does not match the signature you provided. "
            "Check your AWS Secret Access Key and signing method. Consult the service "
            "documentation for details.",
        )
    return SignedRequest(access_key_id=key_id, timestamp=timestamp, signature=expected)


class EventSignatureChain:
    """Checks each envelope of an event stream request body, in order, against the running
    signature.

    Create it from the :class:`SignedRequest`; call :meth:`verify` with each envelope's headers and
    payload.
    """

    def __init__(self, request: SignedRequest, credentials: LocalCredentials, region: str) -> None:
        self._prior = request.signature
        self._credentials = credentials
        self._region = region

    def verify(self, headers: dict[str, object], payload: bytes) -> None:
        """Check one envelope and advance the chain.

        Args:
            headers: the envelope's decoded headers (``:date`` a datetime, ``:chunk-signature`` 32
                bytes).
            payload: the envelope's payload (the encoded inner event; empty for the final envelope).

        Raises:
            SignatureError: the envelope is not signed, or its signature does not follow from the
                previous one.
        """
        from botocore.awsrequest import AWSRequest
        from smithy_aws_event_stream.events import EventHeaderEncoder

        date, signature = headers.get(":date"), headers.get(":chunk-signature")
        if not isinstance(date, datetime.datetime) or not isinstance(signature, bytes):
            raise SignatureError(
                "InvalidSignatureException",
                "An event of the request stream is not signed: it "
                "needs the ':date' and ':chunk-signature' headers.",
            )
        encoder = EventHeaderEncoder()
        encoder.encode_headers({":date": date})
        timestamp = date.astimezone(datetime.UTC).strftime(TIMESTAMP_FORMAT)
        scope = f"{timestamp[:8]}/{self._region}/{SIGNING_NAME}/aws4_request"
        string_to_sign = "\n".join(
            (
                EVENT_ALGORITHM,
                timestamp,
                scope,
                self._prior,
                hashlib.sha256(encoder.get_result()).hexdigest(),
                hashlib.sha256(payload).hexdigest(),
            )
        )
        keyed = AWSRequest(method="POST", url="https://localhost/")
        keyed.context["timestamp"] = timestamp
        expected = _botocore_signer(self._credentials, self._region, []).signature(
            string_to_sign, keyed
        )
        if not hmac.compare_digest(expected, signature.hex()):
            raise SignatureError(
                "InvalidSignatureException",
                "The signature of an event of the request stream does not match: it must be "
                "chained from the request's signature and the previous event's.",
            )
        self._prior = expected
