"""The front door's answers to refused calls over HTTP/2 with a raw h2 client on loopback: the
complete answer, then the stream reset at once (RST_STREAM NO_ERROR) while the caller is still
sending; data the caller sends afterwards is dropped, the connection serves the next request, and
the log holds no traceback. Also the certificate's extra names (``--name``), ``UNSIGNED-PAYLOAD``
and the mode of the files holding the local secret."""

from __future__ import annotations

import json
import logging
import socket
import ssl

import h2.config
import h2.connection
import h2.events
import pytest
from h2.errors import ErrorCodes
from hyperframe.frame import DataFrame

from tests.e2e.local.conftest import ACCESS_KEY_ID, REGION, SECRET_ACCESS_KEY, VOXTRAL


class RawH2:
    """One HTTP/2 connection over TLS to the front door, driven frame by frame."""

    def __init__(self, url: str, ca_file, server_hostname: str = "localhost") -> None:
        port = int(url.rsplit(":", 1)[1])
        context = ssl.create_default_context(cafile=str(ca_file))
        context.set_alpn_protocols(["h2"])
        self.sock = context.wrap_socket(
            socket.create_connection(("127.0.0.1", port), timeout=10),
            server_hostname=server_hostname,
        )
        assert self.sock.selected_alpn_protocol() == "h2"
        self.conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True))
        self.conn.initiate_connection()
        self.host = f"localhost:{port}"
        self.flush()

    def flush(self) -> None:
        self.sock.sendall(self.conn.data_to_send())

    def request(
        self, path: str, headers: list[tuple[str, str]] = (), body: bytes | None = None
    ) -> int:
        """Open a POST stream (left open for more data unless ``body`` is given) and return its
        id."""
        stream_id = self.conn.get_next_available_stream_id()
        self.conn.send_headers(
            stream_id,
            [
                (":method", "POST"),
                (":path", path),
                (":scheme", "https"),
                (":authority", self.host),
                *headers,
            ],
            end_stream=False,
        )
        if body is not None:
            self.conn.send_data(stream_id, body, end_stream=True)
        self.flush()
        return stream_id

    def events_until(self, stream_id: int, kinds: tuple[type, ...]) -> list:
        """Read frames until an event of one of ``kinds`` arrives for ``stream_id``; return every
        event read."""
        seen = []
        while True:
            data = self.sock.recv(65536)
            assert data, "the front door closed the connection"
            events = self.conn.receive_data(data)
            self.flush()
            seen += events
            if any(
                isinstance(event, kinds) and getattr(event, "stream_id", None) == stream_id
                for event in events
            ):
                return seen

    def close(self) -> None:
        self.sock.close()


def answer(events, stream_id: int) -> tuple[int, dict]:
    status = next(
        int(dict(event.headers)[b":status"])
        for event in events
        if isinstance(event, h2.events.ResponseReceived) and event.stream_id == stream_id
    )
    body = b"".join(
        event.data
        for event in events
        if isinstance(event, h2.events.DataReceived) and event.stream_id == stream_id
    )
    return status, json.loads(body or b"{}")


def signed_headers(
    url: str, path: str, *, secret: str = SECRET_ACCESS_KEY
) -> list[tuple[str, str]]:
    """SigV4 headers for an event stream POST to ``path`` (botocore's signer, as the SDKs sign)."""
    from botocore.auth import SigV4Auth
    from botocore.awsrequest import AWSRequest
    from botocore.credentials import Credentials

    port = url.rsplit(":", 1)[1]
    request = AWSRequest(
        method="POST",
        url=f"https://localhost:{port}{path}",
        headers={
            "x-amz-content-sha256": "STREAMING-AWS4-HMAC-SHA256-EVENTS",
            "content-type": "application/vnd.amazon.eventstream",
        },
    )
    SigV4Auth(Credentials(ACCESS_KEY_ID, secret), "sagemaker", REGION).add_auth(request)
    return [
        (name.lower(), value) for name, value in request.headers.items() if name.lower() != "host"
    ]


REFUSED = [
    ("unknown-path", "/no/such/operation", None, 404),
    (
        "unknown-endpoint",
        "/endpoints/no-such-endpoint/invocations-bidirectional-stream",
        "signed",
        400,
    ),
    (
        "bad-signature",
        f"/endpoints/{VOXTRAL}/invocations-bidirectional-stream",
        "wrong-secret",
        403,
    ),
    ("unsigned", f"/endpoints/{VOXTRAL}/invocations-bidirectional-stream", None, 403),
]


@pytest.mark.parametrize(
    ("case", "path", "signing", "status"), REFUSED, ids=[case[0] for case in REFUSED]
)
def test_a_refused_call_is_answered_and_reset_at_once_and_the_connection_serves_the_next(
    stack, caplog, case, path, signing, status
):
    caplog.set_level(logging.DEBUG)
    client = RawH2(stack.url, stack.ca_file)
    try:
        headers = (
            []
            if signing is None
            else signed_headers(
                stack.url, path, secret="wrong" if signing == "wrong-secret" else SECRET_ACCESS_KEY
            )
        )
        stream_id = client.request(
            path, headers
        )  # the request stream stays open, as an audio upload's does
        events = client.events_until(stream_id, (h2.events.StreamEnded,))
        # The caller did not read the answer yet and sends more (raw frames: what was in flight).
        client.sock.sendall(
            b"".join(DataFrame(stream_id, data=b"audio" * 100).serialize() for _ in range(3))
        )
        if not any(isinstance(event, h2.events.StreamReset) for event in events):
            events += client.events_until(stream_id, (h2.events.StreamReset,))
        got, body = answer(events, stream_id)
        assert got == status, body
        ended = [
            event
            for event in events
            if isinstance(event, h2.events.StreamEnded) and event.stream_id == stream_id
        ]
        (reset,) = [event for event in events if isinstance(event, h2.events.StreamReset)]
        assert ended and events.index(ended[0]) < events.index(
            reset
        )  # the whole answer first, then the reset
        assert reset.error_code == ErrorCodes.NO_ERROR
        # The data sent after the answer was dropped, and the connection goes on.
        second = client.request("/no/such/operation", body=b"x" * 1000)
        events = client.events_until(second, (h2.events.StreamEnded,))
        assert answer(events, second)[0] == 404
    finally:
        client.close()
    logged = "\n".join(
        record.getMessage() + (str(record.exc_info) if record.exc_info else "")
        for record in caplog.records
    )
    assert (
        "Traceback" not in logged
        and "KeyError" not in logged
        and not any(
            record.exc_info for record in caplog.records if record.levelno >= logging.WARNING
        )
    )


def test_the_certificate_covers_every_name_given_and_a_client_verifies_it(tmp_path):
    from cryptography import x509

    from voice_devtools.local.serving import make_certificate

    name = "runtime.sagemaker.us-east-1.amazonaws.com"
    tls = make_certificate(tmp_path, names=[name, "10.0.0.7"])
    certificate = x509.load_pem_x509_certificates(tls.server_file.read_bytes())[0]
    san = certificate.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert san.get_values_for_type(x509.DNSName) == ["localhost", name]
    assert [str(address) for address in san.get_values_for_type(x509.IPAddress)] == [
        "127.0.0.1",
        "::1",
        "10.0.0.7",
    ]
    assert tls.server_file.stat().st_mode & 0o777 == 0o600


def test_name_options_are_checked_and_give_hosts_lines_and_trust_commands(tmp_path):
    from voice_devtools.local.local_runtime import (
        hosts_lines,
        system_trust_commands,
        validate_names,
        write_private,
    )
    from voicectl.cli import UsageError

    assert validate_names(["runtime.sagemaker.us-east-1.amazonaws.com", "::1"]) == [
        "runtime.sagemaker.us-east-1.amazonaws.com",
        "::1",
    ]
    with pytest.raises(UsageError, match=r"--name 'bad name', '-x.example': not a host name"):
        validate_names(["bad name", "-x.example", "ok.example"])
    assert hosts_lines(["runtime.sagemaker.us-east-1.amazonaws.com", "127.0.0.2"]) == [
        "127.0.0.1 runtime.sagemaker.us-east-1.amazonaws.com",
        "::1 runtime.sagemaker.us-east-1.amazonaws.com",
    ]
    (debian, rhel, _macos) = system_trust_commands(tmp_path / "ca.pem")
    assert debian[1] == [
        f"sudo cp {tmp_path / 'ca.pem'} "
        "/usr/local/share/ca-certificates/voicectl-local-runtime.crt",
        "sudo update-ca-certificates",
    ]
    assert (
        debian[2][-1] == "sudo update-ca-certificates --fresh"
        and rhel[1][-1] == "sudo update-ca-trust"
    )
    secret = tmp_path / "env.sh"
    secret.write_text("old")
    secret.chmod(0o644)
    write_private(secret, "export AWS_SECRET_ACCESS_KEY=x\n")
    assert (secret.read_text(), secret.stat().st_mode & 0o777) == (
        "export AWS_SECRET_ACCESS_KEY=x\n",
        0o600,
    )


def test_refused_http1_calls_on_one_keep_alive_connection_log_no_traceback(client_env, caplog):
    # boto3's InvokeEndpoint speaks HTTP/1.1 and keeps the connection for the next call: a refusal
    # answered before its body was read made hypercorn close the TLS connection under the caller's
    # next request (ssl.SSLError APPLICATION_DATA_AFTER_CLOSE_NOTIFY, "Error in ASGI Framework" and
    # client_connected_cb).
    import boto3
    from botocore.exceptions import ClientError

    caplog.set_level(logging.DEBUG)
    client = boto3.client("sagemaker-runtime", endpoint_url=client_env.url)
    for name in ("no-such-endpoint", VOXTRAL, "another"):
        with pytest.raises(ClientError, match="UnknownOperationException"):
            client.invoke_endpoint(
                EndpointName=name, Body=b"{}" * 5000, ContentType="application/json"
            )
    client.close()
    assert not [
        record.getMessage()
        for record in caplog.records
        if record.exc_info or record.levelno >= logging.ERROR
    ]
