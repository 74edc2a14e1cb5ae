"""voicectl/connect/service.py: the consumer task's metrics as embedded metric format lines, and the endpoint the
environment names (the ECS target: its URL with the bearer token from Secrets Manager, against moto and a WebSocket
server on loopback). Taking calls from the queue: tests/unit/voicectl/test_connect_replay.py runs ``serve``."""

from __future__ import annotations

import asyncio
import json

import boto3
from moto import mock_aws
from websockets.asyncio.server import serve as serve_websocket

from voicectl.connect import service


def test_a_metric_is_one_embedded_metric_format_line(capsys):
    service.emit_metric("MillisBehindNow", 250.0, "Milliseconds", Track="AUDIO_FROM_CUSTOMER")
    service.emit_metric("ActiveCalls", 3)
    with_dimension, plain = (json.loads(line) for line in capsys.readouterr().out.splitlines())
    assert with_dimension["_aws"]["CloudWatchMetrics"] == [{
        "Namespace": "VoiceConnect", "Dimensions": [["Track"]],
        "Metrics": [{"Name": "MillisBehindNow", "Unit": "Milliseconds"}]}]
    assert with_dimension["MillisBehindNow"] == 250.0 and with_dimension["Track"] == "AUDIO_FROM_CUSTOMER"
    assert plain["_aws"]["CloudWatchMetrics"][0]["Dimensions"] == [[]] and plain["ActiveCalls"] == 3
    assert isinstance(plain["_aws"]["Timestamp"], int)


def test_sqs_limits_are_kept():
    assert service.RECEIVE_WAIT_S <= 20 and service.RECEIVE_MAX <= 10  # ReceiveMessage's maximums
    assert service.VISIBILITY_EXTEND_S < service.VISIBILITY_TIMEOUT_S <= 12 * 3600


def test_the_ecs_target_is_opened_with_the_bearer_token_of_the_secret(monkeypatch):
    seen: list[str | None] = []

    def record(connection, request):
        seen.append(request.headers.get("Authorization"))

    async def scenario(session) -> None:
        async with serve_websocket(lambda connection: connection.wait_closed(), "127.0.0.1", 0,
                                   process_request=record) as server:
            port = server.sockets[0].getsockname()[1]
            monkeypatch.setenv("ENDPOINT_URL", f"ws://127.0.0.1:{port}/invocations-bidirectional-stream")
            async with service.opener_from_env(session) as opener:
                transport = await opener()
                await transport.close()

    monkeypatch.delenv("ENDPOINT_NAME", raising=False)
    with mock_aws():
        session = boto3.Session(aws_access_key_id="testing", aws_secret_access_key="testing", region_name="us-east-1")
        arn = session.client("secretsmanager").create_secret(Name="bridge-token", SecretString="t0ken")["ARN"]
        monkeypatch.setenv("TOKEN_SECRET_ARN", arn)
        asyncio.run(asyncio.wait_for(scenario(session), 10))
    assert seen == ["Bearer t0ken"]
