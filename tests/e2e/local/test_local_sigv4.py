"""The front door's SigV4 checks against requests and events signed by the AWS SDKs' own signers
(botocore for the request, aws_sdk_signers for the event chain): what they sign passes, any change
to it fails with AWS's error."""

from __future__ import annotations

import asyncio
import datetime

import pytest

from voice_devtools.local.sigv4 import (
    EventSignatureChain,
    LocalCredentials,
    SignatureError,
    verify_request,
)

CREDENTIALS = LocalCredentials("AKIALOCALTEST0001", "local-test-secret")
HOST = "localhost:8443"
PATH = "/endpoints/voxtral-realtime/invocations-response-stream"


def signed(
    body: bytes = b'{"a": 1}',
    *,
    secret: str = CREDENTIALS.secret_access_key,
    region: str = "us-east-1",
    service: str = "sagemaker",
) -> list[tuple[str, str]]:
    """Headers of a POST signed now by botocore's SigV4Auth, as boto3 signs
    InvokeEndpointWithResponseStream."""
    from botocore.auth import SigV4Auth
    from botocore.awsrequest import AWSRequest
    from botocore.credentials import Credentials

    request = AWSRequest(
        method="POST",
        url=f"https://{HOST}{PATH}",
        data=body,
        headers={
            "Content-Type": "application/json",
            "X-Amzn-SageMaker-Accept": "text/event-stream",
        },
    )
    SigV4Auth(Credentials(CREDENTIALS.access_key_id, secret), service, region).add_auth(request)
    return list(request.headers.items())


def check(headers, body: bytes = b'{"a": 1}', **overrides):
    arguments = {
        "method": "POST",
        "host": HOST,
        "raw_path": PATH,
        "query": "",
        "headers": headers,
        "body": body,
        "credentials": CREDENTIALS,
        "region": "us-east-1",
    }
    arguments.update(overrides)
    return verify_request(**arguments)


def test_a_request_signed_by_botocore_passes():
    result = check(signed())
    assert result.access_key_id == CREDENTIALS.access_key_id
    signed_at = datetime.datetime.strptime(result.timestamp, "%Y%m%dT%H%M%SZ").replace(
        tzinfo=datetime.UTC
    )
    assert abs(datetime.datetime.now(datetime.UTC) - signed_at) < datetime.timedelta(seconds=60)
    assert len(result.signature) == 64


@pytest.mark.parametrize(
    "change, code, message",
    [
        (
            {"headers_fn": lambda h: [(k, v) for k, v in h if k.lower() != "authorization"]},
            "MissingAuthenticationTokenException",
            "Missing Authentication Token",
        ),
        (
            {"secret": "another-secret"},
            "InvalidSignatureException",
            "does not match the signature you provided",
        ),
        (
            {"body": b'{"a": 2}'},
            "InvalidSignatureException",
            "does not match the signature you provided",
        ),
        (
            {"region": "eu-west-1"},
            "InvalidSignatureException",
            "Credential should be scoped to a valid region",
        ),
        (
            {"service": "s3"},
            "InvalidSignatureException",
            "Credential should be scoped to correct service: 'sagemaker'",
        ),
        ({"now": datetime.timedelta(minutes=6)}, "InvalidSignatureException", "Signature expired"),
        (
            {"now": -datetime.timedelta(minutes=6)},
            "InvalidSignatureException",
            "Signature not yet current",
        ),
        (
            {
                "headers_fn": lambda h: [
                    (k, v.replace("AKIALOCALTEST0001", "AKIAOTHER00000000")) for k, v in h
                ]
            },
            "UnrecognizedClientException",
            "The security token included in the request is invalid",
        ),
        (
            {
                "headers_fn": lambda h: [
                    (k, "AWS4-HMAC-SHA256 garbage" if k.lower() == "authorization" else v)
                    for k, v in h
                ]
            },
            "IncompleteSignatureException",
            "requires 'Credential'",
        ),
        (
            {
                "headers_fn": lambda h: [
                    (k, "application/x-other" if k.lower() == "content-type" else v) for k, v in h
                ]
            },
            "InvalidSignatureException",
            "does not match the signature you provided",
        ),
    ],
)
def test_anything_changed_or_missing_is_refused_with_aws_error(change, code, message):
    headers_fn = change.pop("headers_fn", lambda h: h)
    body = change.pop("body", b'{"a": 1}')
    later = change.pop("now", None)
    headers = headers_fn(signed(**change))
    now = None if later is None else datetime.datetime.now(datetime.UTC) + later
    with pytest.raises(SignatureError) as raised:
        check(headers, body=body, now=now)
    assert raised.value.code == code
    assert message in str(raised.value)
    assert raised.value.status == (400 if code == "IncompleteSignatureException" else 403)


def test_the_event_chain_follows_the_sdks_event_signer():
    """Envelopes signed by aws_sdk_signers.AsyncEventSigner (what the bidirectional SDK uses) pass
    in order; a changed payload, a replayed envelope or a wrong key fails."""
    from aws_sdk_signers import AsyncEventSigner
    from smithy_aws_core.identity import AWSCredentialsIdentity
    from smithy_aws_event_stream.events import EventHeaderEncoder, EventMessage

    seed = check(signed())
    identity = AWSCredentialsIdentity(
        access_key_id=CREDENTIALS.access_key_id, secret_access_key=CREDENTIALS.secret_access_key
    )

    async def sign_all(payloads):
        signer = AsyncEventSigner(
            initial_signature=seed.signature.encode(), event_encoder_cls=EventHeaderEncoder
        )
        properties = {"region": "us-east-1", "service": "sagemaker"}
        envelopes = [
            await signer.sign(
                event=EventMessage(payload=payload), identity=identity, properties=properties
            )
            for payload in payloads
        ]
        envelopes.append(
            await signer.sign_empty(event=EventMessage(), identity=identity, properties=properties)
        )
        return envelopes

    envelopes = asyncio.run(sign_all([b"first", b"second"]))
    chain = EventSignatureChain(seed, CREDENTIALS, "us-east-1")
    for envelope in envelopes:
        chain.verify(envelope.headers, envelope.payload)

    chain = EventSignatureChain(seed, CREDENTIALS, "us-east-1")
    chain.verify(envelopes[0].headers, envelopes[0].payload)
    with pytest.raises(SignatureError, match="does not match"):
        chain.verify(envelopes[1].headers, envelopes[1].payload + b"!")
    chain = EventSignatureChain(seed, CREDENTIALS, "us-east-1")
    with pytest.raises(
        SignatureError, match="does not match"
    ):  # out of order: the second needs the first's
        chain.verify(envelopes[1].headers, envelopes[1].payload)
    with pytest.raises(SignatureError, match="does not match"):
        EventSignatureChain(
            seed, LocalCredentials(CREDENTIALS.access_key_id, "x"), "us-east-1"
        ).verify(envelopes[0].headers, envelopes[0].payload)
    with pytest.raises(SignatureError, match="not signed"):
        EventSignatureChain(seed, CREDENTIALS, "us-east-1").verify({}, b"unsigned")


def signed_with_content_hash(content_hash: str, body: bytes) -> list[tuple[str, str]]:
    """Headers of a POST signed by botocore with ``X-Amz-Content-SHA256: content_hash`` (which
    botocore then signs as the payload hash, whatever the body)."""
    from botocore.auth import SigV4Auth
    from botocore.awsrequest import AWSRequest
    from botocore.credentials import Credentials

    request = AWSRequest(
        method="POST",
        url=f"https://{HOST}{PATH}",
        data=body,
        headers={"Content-Type": "application/json", "X-Amz-Content-SHA256": content_hash},
    )
    SigV4Auth(
        Credentials(CREDENTIALS.access_key_id, CREDENTIALS.secret_access_key),
        "sagemaker",
        "us-east-1",
    ).add_auth(request)
    return list(request.headers.items())


def test_unsigned_payload_is_refused_so_a_changed_body_cannot_pass_under_the_same_signature():
    headers = signed_with_content_hash("UNSIGNED-PAYLOAD", b'{"transcript": "original"}')
    for body in (b'{"transcript": "original"}', b'{"transcript": "changed"}'):
        with pytest.raises(
            SignatureError,
            match="UNSIGNED-PAYLOAD is not accepted: SageMaker Runtime documents no "
            "unsigned payload",
        ) as raised:
            check(headers, body=body)
        assert (raised.value.code, raised.value.status) == ("InvalidSignatureException", 403)


def test_a_declared_body_hash_must_be_the_bodys():
    import hashlib

    original = b'{"transcript": "original"}'
    headers = signed_with_content_hash(hashlib.sha256(original).hexdigest(), original)
    assert check(headers, body=original).access_key_id == CREDENTIALS.access_key_id
    with pytest.raises(SignatureError, match="does not match the body's SHA-256") as raised:
        check(headers, body=b'{"transcript": "changed"}')
    assert raised.value.status == 400


def test_an_event_stream_request_must_declare_the_event_stream_payload():
    headers = [
        (name, "UNSIGNED-PAYLOAD" if name.lower() == "x-amz-content-sha256" else value)
        for name, value in signed_with_content_hash("STREAMING-AWS4-HMAC-SHA256-EVENTS", b"")
    ]
    with pytest.raises(
        SignatureError, match="'UNSIGNED-PAYLOAD' is not accepted for an event stream request"
    ):
        check(headers, body=None)
    good = signed_with_content_hash("STREAMING-AWS4-HMAC-SHA256-EVENTS", b"")
    assert check(good, body=None).access_key_id == CREDENTIALS.access_key_id
