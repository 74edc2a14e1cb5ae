"""voice_client.transcribe: its target options as both ``transcribe`` and ``mic`` use them
(``--url ... --token-secret ARN``, the ECS target: the bearer token read from Secrets Manager, moto
in process, and sent on the upgrade to the real bridge with BRIDGE_TOKEN set, on 127.0.0.1), and
``--max-stream-s``."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator

import boto3
import pytest
from moto import mock_aws

from tests.unit.voice_client.clients_testkit import Servers
from voice_client import transcribe
from voice_client.realtime import RealtimeError
from voicectl import cli
from voicectl.cli import UsageError

TOKEN = "Zk3p9QwXr7Lm2Vb8Nc4Hs6Td1Fg5Jy0AeUoIiPl"
WRONG = "Zk3p9QwXr7Lm2Vb8Nc4Hs6Td1Fg5Jy0AeUoIiPX"  # the last character differs
DELTAS = ("Hello ", "from ", "ECS.")
REGION = "eu-west-1"


@pytest.fixture
def servers() -> Iterator[Servers]:
    with Servers(bridge_token=TOKEN, deltas=DELTAS, generate=True) as running:
        yield running


@pytest.fixture
def secrets(monkeypatch):
    """moto's Secrets Manager with fake credentials; AWS_REGION names another Region than the
    secrets' ARNs."""
    for key, value in {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_REGION": "us-east-2",
    }.items():
        monkeypatch.setenv(key, value)
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    with mock_aws():
        client = boto3.client("secretsmanager", region_name=REGION)

        def create(name: str, value: str) -> str:
            return client.create_secret(Name=name, SecretString=value)["ARN"]

        yield create


def test_transcribe_reads_the_token_secret_and_the_bridge_accepts_it(
    servers, secrets, parse, recording, capsys
):
    arn = secrets("voxtral-token", TOKEN)
    args = parse(
        [
            "transcribe",
            str(recording),
            "--url",
            servers.url,
            "--token-secret",
            arn,
            "--speed",
            "0",
            "--json",
        ]
    )
    assert transcribe.run(args) == 0
    out, err = capsys.readouterr()
    result = json.loads(out)
    (session,) = servers.vllm.sessions
    assert session.text.startswith("".join(DELTAS))
    assert (result["transcript"], result["complete"]) == (session.text, True)
    assert servers.bridge.metrics.unauthorized_count == 0 and servers.bridge.metrics.started >= 1
    assert TOKEN not in out + err


@pytest.mark.parametrize("how", ["secret", "env", "none"])
def test_a_wrong_or_missing_token_is_one_clear_line(
    servers, secrets, parse, recording, capsys, monkeypatch, how
):
    options: list[str] = []
    if how == "secret":
        arn = secrets("old-token", WRONG)
        options = ["--token-secret", arn]
    elif how == "env":
        monkeypatch.setenv("VOICE_BRIDGE_TOKEN", WRONG)
        options = ["--token-env", "VOICE_BRIDGE_TOKEN"]
    code = cli.run_command(
        "transcribe",
        transcribe.run,
        parse(["transcribe", str(recording), "--url", servers.url, *options, "--speed", "0"]),
    )
    out, err = capsys.readouterr()
    assert code == transcribe.EXIT_FAILED
    assert err.splitlines()[0].startswith(
        "voicectl transcribe: "
    )  # no blank line before it (no delta came)
    (line,) = [text for text in err.splitlines() if text.startswith("voicectl transcribe: ")]
    if how == "secret":
        assert line == (
            f"voicectl transcribe: the bridge at {servers.url} refused the bearer token from "
            f"Secrets Manager secret {arn} (HTTP 401): check that it is the service's token "
            "secret (stack output TokenSecretArn) and that tasks started after its last "
            "rotation."
        )
    elif how == "env":
        assert (
            "refused the bearer token from environment variable VOICE_BRIDGE_TOKEN (HTTP 401)"
            in line
        )
    else:
        assert line == (
            f"voicectl transcribe: the bridge at {servers.url} requires a bearer token (HTTP "
            "401): pass --token-secret with the ARN of the stack's token secret (output "
            "TokenSecretArn)."
        )
    assert WRONG not in out + err and TOKEN not in out + err
    assert (
        servers.bridge.metrics.started == 0 and servers.bridge.metrics.unauthorized_count == 1
    )  # no retries


def test_token_env_sends_the_token(servers, parse, recording, capsys, monkeypatch):
    monkeypatch.setenv("VOICE_BRIDGE_TOKEN", TOKEN)
    args = parse(
        [
            "transcribe",
            str(recording),
            "--url",
            servers.url,
            "--token-env",
            "VOICE_BRIDGE_TOKEN",
            "--speed",
            "0",
        ]
    )
    assert transcribe.run(args) == 0
    (session,) = servers.vllm.sessions
    assert capsys.readouterr().out == session.text + "\n" and session.text.startswith(
        "".join(DELTAS)
    )


@pytest.mark.parametrize("command", ["transcribe", "mic"])
@pytest.mark.parametrize(
    "option",
    [
        ["--token-secret", "arn:aws:secretsmanager:eu-west-1:1:secret:t-AbCdEf"],
        ["--token-env", "VOICE_BRIDGE_TOKEN"],
    ],
)
def test_a_token_without_url_is_a_usage_error_naming_what_is_allowed(
    parse, recording, command, option
):
    argv = [
        command,
        *([str(recording)] if command == "transcribe" else []),
        "--endpoint",
        "voxtral",
        *option,
    ]
    with pytest.raises(UsageError) as info:
        transcribe.validate_target_arguments(parse(argv))
    assert str(info.value) == (
        f"{option[0]} goes with --url (a bridge that checks a bearer token: the ECS target's "
        "load balancer); with --endpoint, SageMaker authenticates your AWS credentials and "
        "needs no token"
    )


def test_token_secret_and_token_env_exclude_each_other(parse, recording, capsys):
    with pytest.raises(SystemExit):
        parse(
            [
                "transcribe",
                str(recording),
                "--url",
                "ws://127.0.0.1:1/x",
                "--token-secret",
                "a",
                "--token-env",
                "B",
            ]
        )
    assert "not allowed with argument" in capsys.readouterr().err


def test_an_unreadable_secret_names_it(secrets, parse, recording):
    secrets("other", TOKEN)
    missing = f"arn:aws:secretsmanager:{REGION}:123456789012:secret:missing-AbCdEf"
    args = parse(
        [
            "transcribe",
            str(recording),
            "--url",
            "ws://127.0.0.1:1/invocations-bidirectional-stream",
            "--token-secret",
            missing,
        ]
    )
    with pytest.raises(transcribe.RealtimeError) as info:
        transcribe.read_token(args)
    assert info.value.code == "token_secret"
    assert str(info.value).startswith(
        f"cannot read the bearer token from Secrets Manager secret {missing}: AWS refused "
        "a request: "
    )
    assert "ResourceNotFoundException" in str(info.value)


def test_an_unreadable_secret_is_the_first_line_on_stderr(secrets, parse, recording, capsys):
    missing = f"arn:aws:secretsmanager:{REGION}:123456789012:secret:missing-AbCdEf"
    code = cli.run_command(
        "transcribe",
        transcribe.run,
        parse(
            [
                "transcribe",
                str(recording),
                "--url",
                "ws://127.0.0.1:1/invocations-bidirectional-stream",
                "--token-secret",
                missing,
            ]
        ),
    )
    out, err = capsys.readouterr()
    assert (code, out) == (transcribe.EXIT_FAILED, "")
    assert err.splitlines()[0].startswith(
        f"voicectl transcribe: cannot read the bearer token from Secrets Manager "
        f"secret {missing}: AWS refused a request: "
    )
    assert len(err.splitlines()) == 1


@pytest.mark.parametrize(
    "value", ["", "with space in it 0123456789", "trailing-newline-0123456789\n"]
)
def test_a_token_a_header_cannot_carry_is_refused_without_showing_it(
    parse, recording, monkeypatch, value
):
    monkeypatch.setenv("VOICE_BRIDGE_TOKEN", value)
    args = parse(
        [
            "transcribe",
            str(recording),
            "--url",
            "ws://127.0.0.1:1/x",
            "--token-env",
            "VOICE_BRIDGE_TOKEN",
        ]
    )
    with pytest.raises(UsageError) as info:
        transcribe.read_token(args)
    assert str(info.value).startswith(
        "the bearer token from environment variable VOICE_BRIDGE_TOKEN is empty or holds"
    )
    assert value.strip() == "" or value.strip() not in str(info.value)


def test_an_unset_token_env_is_named(parse, recording, monkeypatch):
    monkeypatch.delenv("NO_SUCH_TOKEN_VAR", raising=False)
    args = parse(
        [
            "transcribe",
            str(recording),
            "--url",
            "ws://127.0.0.1:1/x",
            "--token-env",
            "NO_SUCH_TOKEN_VAR",
        ]
    )
    with pytest.raises(
        UsageError,
        match=r"^--token-env NO_SUCH_TOKEN_VAR: the environment variable NO_SUCH_TOKEN_VAR is "
        r"not set$",
    ):
        transcribe.read_token(args)


def test_mic_opens_its_streams_with_the_token_through_the_same_target(servers, secrets, parse):
    """``voicectl mic`` opens its target with :func:`voice_client.transcribe.open_target`: with
    --token-secret its streams carry the token (a stream opens and gets session.created through the
    bridge that checks it)."""
    arn = secrets("voxtral-token", TOKEN)
    args = parse(["mic", "--url", servers.url, "--token-secret", arn])
    transcribe.validate_target_arguments(args)

    async def scenario() -> str:
        async with transcribe.open_target(args) as opener:
            transport = await opener()
            try:
                return json.loads(await transport.receive_text())["type"]
            finally:
                await transport.close()

    assert asyncio.run(scenario()) == "session.created"
    assert servers.bridge.metrics.unauthorized_count == 0


# ---- voicectl transcribe --max-stream-s --------------------------------------------------------


def test_max_stream_s_defaults_below_sagemakers_reported_30_minutes_and_reaches_the_machine(
    parse, recording, monkeypatch
):
    from voice_client import transcribe

    assert (
        parse(["transcribe", str(recording), "--url", "ws://127.0.0.1:1/x"]).max_stream_s
        == 1500
        < 30 * 60
    )
    seen = {}

    async def fake_stream(chunks, opener, **options):
        seen.update(options)
        raise RealtimeError("stop here", code="test")

    monkeypatch.setattr(transcribe, "transcribe_stream", fake_stream)
    args = parse(
        ["transcribe", str(recording), "--url", "ws://127.0.0.1:1/x", "--max-stream-s", "600"]
    )
    assert transcribe.run(args) == 1
    assert seen["max_stream_s"] == 600


@pytest.mark.parametrize("value", ["5", "nan", "inf", "-1"])
def test_max_stream_s_must_be_finite_and_at_least_10_s(parse, recording, value):
    from voice_client import transcribe
    from voicectl.cli import UsageError

    with pytest.raises(
        UsageError, match="--max-stream-s must be a finite number of seconds, at least 10"
    ):
        transcribe.run(
            parse(
                [
                    "transcribe",
                    str(recording),
                    "--url",
                    "ws://127.0.0.1:1/x",
                    "--max-stream-s",
                    value,
                ]
            )
        )
