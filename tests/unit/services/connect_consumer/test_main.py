"""services/connect_consumer/__main__.py: the consumer's entry point checks its environment (one
line naming the variable, exit 2), ``--help`` lists the variables, ``--check`` builds each target's
client."""

from __future__ import annotations

import ast
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from connect_consumer import __main__ as entry, service

ROOT = Path(__file__).resolve().parents[4]
BASE = {
    "CALLS_QUEUE_URL": "https://sqs.us-east-1.amazonaws.com/123456789012/calls",
    "BUS_NAME": "transcripts",
    "TABLE_NAME": "calls",
}
ECS = {
    "ENDPOINT_URL": "wss://voxtral.example.com/invocations-bidirectional-stream",
    "TOKEN_SECRET_ARN": "arn:aws:secretsmanager:us-east-1:123456789012:secret:token-AbCdEf",
}
TARGETS = "ENDPOINT_NAME (SageMaker) or ENDPOINT_URL with TOKEN_SECRET_ARN (the ECS target)"
REQUIRED = "the service needs CALLS_QUEUE_URL, BUS_NAME, TABLE_NAME"


def test_the_target_is_the_endpoint_name_or_the_ecs_url_with_its_token():
    sagemaker = {**BASE, "ENDPOINT_NAME": "voxtral-realtime"}
    assert entry.target_of(sagemaker) == ("sagemaker", "voxtral-realtime")
    assert entry.target_of({**BASE, **ECS}) == ("ecs", ECS["ENDPOINT_URL"])
    # The construct sets the other target's variables empty: empty is unset.
    empty = {"ENDPOINT_URL": "", "TOKEN_SECRET_ARN": ""}
    assert entry.target_of({**sagemaker, **empty}) == ("sagemaker", "voxtral-realtime")


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"ENDPOINT_NAME": "e"}, f"CALLS_QUEUE_URL, BUS_NAME, TABLE_NAME are not set; {REQUIRED}"),
        ({**BASE, "BUS_NAME": "", "ENDPOINT_NAME": "e"}, f"BUS_NAME is not set; {REQUIRED}"),
        (
            {**BASE, "MAX_CALLS": "0", "ENDPOINT_NAME": "e"},
            "MAX_CALLS='0' is not a whole number of calls of at least 1",
        ),
        # An Arabic-Indic three: a digit to isdigit() and int(); refused (the construct writes
        # ASCII).
        (
            {**BASE, "MAX_CALLS": "٣", "ENDPOINT_NAME": "e"},
            "MAX_CALLS='٣' is not a whole number of calls of at least 1",
        ),
        (
            {**BASE, "METRIC_DIMENSIONS": '["Deployment"]', "ENDPOINT_NAME": "e"},
            "METRIC_DIMENSIONS='[\"Deployment\"]' is not a JSON object of strings "
            '(e.g. {"Deployment": "RealtimeVoice"})',
        ),
        (
            {**BASE, "METRIC_DIMENSIONS": "{Deployment: x}", "ENDPOINT_NAME": "e"},
            "METRIC_DIMENSIONS='{Deployment: x}' is not a JSON object of strings "
            '(e.g. {"Deployment": "RealtimeVoice"})',
        ),
        (BASE, f"no target: set {TARGETS}"),
        (
            {**BASE, **ECS, "ENDPOINT_NAME": "e"},
            f"both ENDPOINT_NAME and ENDPOINT_URL are set; set {TARGETS}, not both",
        ),
        (
            {**BASE, **ECS, "TOKEN_SECRET_ARN": ""},
            "ENDPOINT_URL is set without TOKEN_SECRET_ARN, its bearer token's secret",
        ),
        (
            {**BASE, **ECS, "ENDPOINT_URL": "https://x"},
            "ENDPOINT_URL='https://x' is not a WebSocket URL (wss://HOST/PATH)",
        ),
    ],
)
def test_a_bad_environment_is_named_with_what_is_allowed(env, message):
    with pytest.raises(entry.EnvError) as raised:
        entry.target_of(env)
    assert str(raised.value) == message


def test_the_variables_listed_are_those_the_service_reads():
    """A variable the service starts to read fails here until ``ENVIRONMENT`` and the docs list
    it."""
    read = set()
    for node in ast.walk(ast.parse(Path(service.__file__).read_text())):
        if isinstance(node, ast.Subscript) and ast.unparse(node.value) == "os.environ":
            read.add(ast.literal_eval(node.slice))
        elif isinstance(node, ast.Call) and ast.unparse(node.func) in (
            "os.environ.get",
            "os.getenv",
        ):
            read.add(ast.literal_eval(node.args[0]))
    assert read == set(entry.ENVIRONMENT) - {"AWS_DEFAULT_REGION"}  # boto3 reads the Region itself
    docs = (ROOT / "docs" / "connect.md").read_text()
    assert [name for name in entry.ENVIRONMENT if f"| `{name}` |" not in docs] == []


def test_help_lists_every_variable_and_exits_0(capsys):
    with pytest.raises(SystemExit) as exited:
        entry.main(["--help"])
    assert exited.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: python -m connect_consumer [-h] [--check]\n")
    for name, text in entry.ENVIRONMENT.items():
        assert f"\n  {name:<20}{text}\n" in out


def clear(monkeypatch, **env: str) -> None:
    """The process environment holds ``env`` and none of the consumer's other variables."""
    for name in (*entry.ENVIRONMENT, "AWS_REGION", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)


@pytest.mark.parametrize(
    ("target", "ready"),
    [
        ({"ENDPOINT_NAME": "voxtral-realtime"}, "SageMaker endpoint 'voxtral-realtime'"),
        (ECS, f"ECS target {ECS['ENDPOINT_URL']!r}"),
    ],
)
def test_check_builds_the_targets_client_and_exits_without_an_aws_call(
    monkeypatch, capsys, target, ready
):
    clear(monkeypatch, **BASE, **target, MAX_CALLS="20", AWS_DEFAULT_REGION="eu-west-1")
    monkeypatch.setattr(service, "main", lambda: pytest.fail("--check started the service"))
    assert entry.main(["--check"]) == 0
    assert capsys.readouterr().out == (
        f"connect_consumer: ready: {ready} in eu-west-1; calls from "
        f"{BASE['CALLS_QUEUE_URL']}, 20 at once\n"
    )


def test_check_without_a_region_names_the_variable(monkeypatch, capsys, tmp_path):
    clear(monkeypatch, **BASE, ENDPOINT_NAME="e", AWS_CONFIG_FILE=str(tmp_path / "none"))
    assert entry.main(["--check"]) == entry.EXIT_USAGE
    assert capsys.readouterr().err == (
        "connect_consumer: no AWS Region: set AWS_DEFAULT_REGION (ECS sets it in every task)\n"
    )


def test_the_service_starts_only_with_a_usable_environment(monkeypatch, capsys):
    started: list[bool] = []
    monkeypatch.setattr(service, "main", lambda: started.append(True) or 0)
    clear(monkeypatch)
    assert entry.main([]) == entry.EXIT_USAGE and started == []
    assert capsys.readouterr().err == (
        f"connect_consumer: CALLS_QUEUE_URL, BUS_NAME, TABLE_NAME are not set; {REQUIRED}\n"
    )
    clear(monkeypatch, **BASE, ENDPOINT_NAME="voxtral-realtime")
    assert entry.main([]) == 0 and started == [True]


def test_python_dash_m_and_the_console_script_run_the_entry_point():
    done = subprocess.run(
        [sys.executable, "-m", "connect_consumer", "--help"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert "\nenvironment:\n  CALLS_QUEUE_URL" in done.stdout
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts["voice-connect-consumer"] == f"{entry.__name__}:main"
