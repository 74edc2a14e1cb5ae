"""``voicectl transcribe``: its target options as both ``transcribe`` and ``mic`` take them
(``--url ... --token-secret ARN``, the ECS target: the bearer token read from Secrets Manager, moto
in process, and sent on the upgrade to the real bridge with BRIDGE_TOKEN set, on 127.0.0.1), and
``--max-stream-s``. The library under it: tests/unit/voice_client/test_transcribe.py."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from tests.unit.voice_client.clients_testkit import Servers
from tests.unit.voice_client.token_testkit import DELTAS, REGION, TOKEN, WRONG
from voice_client.realtime import RealtimeError
from voicectl import cli
from voicectl.cli import UsageError
from voicectl.commands import transcribe


@pytest.fixture
def servers() -> Iterator[Servers]:
    with Servers(bridge_token=TOKEN, deltas=DELTAS, generate=True) as running:
        yield running


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


# ---- voicectl transcribe --max-stream-s --------------------------------------------------------


def test_max_stream_s_defaults_below_sagemakers_reported_30_minutes_and_reaches_the_machine(
    parse, recording, monkeypatch
):
    assert (
        parse(["transcribe", str(recording), "--url", "ws://127.0.0.1:1/x"]).max_stream_s
        == 1500
        < 30 * 60
    )
    seen = {}

    async def fake_stream(chunks, opener, **options):
        seen.update(options)
        raise RealtimeError("stop here", code="test")

    monkeypatch.setattr("voice_client.transcribe.transcribe_stream", fake_stream)
    args = parse(
        ["transcribe", str(recording), "--url", "ws://127.0.0.1:1/x", "--max-stream-s", "600"]
    )
    assert transcribe.run(args) == 1
    assert seen["max_stream_s"] == 600


@pytest.mark.parametrize("value", ["5", "nan", "inf", "-1"])
def test_max_stream_s_must_be_finite_and_at_least_10_s(parse, recording, value):
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
