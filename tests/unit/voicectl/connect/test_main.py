"""voicectl/connect/__main__.py: the consumer's entry point checks its environment (one line naming the variable and
what is allowed, exit 2), ``--help`` lists the variables, ``--check`` loads each target's client and exits."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

from voicectl.connect import __main__ as entry
from voicectl.connect import service

ROOT = Path(__file__).resolve().parents[4]
BASE = {"CALLS_QUEUE_URL": "https://sqs.us-east-1.amazonaws.com/123456789012/calls", "BUS_NAME": "transcripts",
        "TABLE_NAME": "calls"}
ECS = {"ENDPOINT_URL": "wss://voxtral.example.com/invocations-bidirectional-stream",
       "TOKEN_SECRET_ARN": "arn:aws:secretsmanager:us-east-1:123456789012:secret:token-AbCdEf"}


def test_the_target_is_the_endpoint_name_or_the_ecs_url_with_its_token():
    assert entry.target_of({**BASE, "ENDPOINT_NAME": "voxtral-realtime"}) == ("sagemaker", "voxtral-realtime")
    assert entry.target_of({**BASE, **ECS}) == ("ecs", ECS["ENDPOINT_URL"])
    # The construct sets the other target's variables empty: empty is unset.
    assert entry.target_of({**BASE, "ENDPOINT_NAME": "voxtral-realtime", "ENDPOINT_URL": "", "TOKEN_SECRET_ARN": ""}) \
        == ("sagemaker", "voxtral-realtime")


@pytest.mark.parametrize(("env", "message"), [
    ({"ENDPOINT_NAME": "e"}, "CALLS_QUEUE_URL, BUS_NAME, TABLE_NAME are not set; the service needs CALLS_QUEUE_URL, "
                             "BUS_NAME, TABLE_NAME"),
    ({**BASE, "BUS_NAME": "", "ENDPOINT_NAME": "e"}, "BUS_NAME is not set; the service needs CALLS_QUEUE_URL, "
                                                     "BUS_NAME, TABLE_NAME"),
    ({**BASE, "MAX_CALLS": "0", "ENDPOINT_NAME": "e"}, "MAX_CALLS='0' is not a whole number of calls of at least 1"),
    ({**BASE, "MAX_CALLS": "٣", "ENDPOINT_NAME": "e"}, "MAX_CALLS='٣' is not a whole number of calls of at least 1"),
    (BASE, "no target: set ENDPOINT_NAME (SageMaker) or ENDPOINT_URL with TOKEN_SECRET_ARN (the ECS target)"),
    ({**BASE, **ECS, "ENDPOINT_NAME": "e"}, "both ENDPOINT_NAME and ENDPOINT_URL are set; set ENDPOINT_NAME "
                                            "(SageMaker) or ENDPOINT_URL with TOKEN_SECRET_ARN (the ECS target), "
                                            "not both"),
    ({**BASE, **ECS, "TOKEN_SECRET_ARN": ""}, "ENDPOINT_URL is set without TOKEN_SECRET_ARN, the secret of its "
                                              "bearer token"),
    ({**BASE, **ECS, "ENDPOINT_URL": "https://x"}, "ENDPOINT_URL='https://x' is not a WebSocket URL "
                                                   "(wss://HOST/PATH)"),
])
def test_a_bad_environment_is_named_with_what_is_allowed(env, message):
    with pytest.raises(entry.EnvError) as raised:
        entry.target_of(env)
    assert str(raised.value) == message


def test_the_variables_listed_are_those_the_service_reads():
    """A variable the service starts reading shows here until ``ENVIRONMENT`` (``--help``) and docs list it."""
    read = set()
    for node in ast.walk(ast.parse(Path(service.__file__).read_text())):
        if isinstance(node, ast.Subscript) and ast.unparse(node.value) == "os.environ":
            read.add(ast.literal_eval(node.slice))
        elif isinstance(node, ast.Call) and ast.unparse(node.func) in ("os.environ.get", "os.getenv"):
            read.add(ast.literal_eval(node.args[0]))
    assert read == set(entry.ENVIRONMENT) - {"AWS_DEFAULT_REGION"}  # boto3 reads the Region itself
    docs = (ROOT / "docs" / "connect.md").read_text()
    assert all(f"`{name}`" in docs for name in entry.ENVIRONMENT)


def test_help_lists_every_variable_and_exits_0(capsys):
    with pytest.raises(SystemExit) as exited:
        entry.main(["--help"])
    assert exited.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: python -m voicectl.connect [-h] [--check]")
    assert all(f"  {name:<17} {text}" in out for name, text in entry.ENVIRONMENT.items())


@pytest.mark.parametrize(("target", "ready"), [
    ({"ENDPOINT_NAME": "voxtral-realtime"}, "SageMaker endpoint 'voxtral-realtime'"),
    (ECS, f"ECS target {ECS['ENDPOINT_URL']!r}"),
])
def test_check_builds_the_targets_client_and_exits_without_an_aws_call(monkeypatch, capsys, target, ready):
    for name in entry.ENVIRONMENT:
        monkeypatch.delenv(name, raising=False)
    for name, value in {**BASE, **target, "MAX_CALLS": "20", "AWS_DEFAULT_REGION": "eu-west-1"}.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setattr(service, "main", lambda: pytest.fail("--check started the service"))
    assert entry.main(["--check"]) == 0
    assert capsys.readouterr().out == (f"voicectl.connect: ready: {ready} in eu-west-1; calls from "
                                       f"{BASE['CALLS_QUEUE_URL']}, 20 at once\n")


def test_check_without_a_region_says_which_variable(monkeypatch, capsys, tmp_path):
    for name in (*entry.ENVIRONMENT, "AWS_REGION", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    for name, value in {**BASE, "ENDPOINT_NAME": "e"}.items():
        monkeypatch.setenv(name, value)
    assert entry.main(["--check"]) == entry.EXIT_USAGE
    assert capsys.readouterr().err == ("voicectl.connect: no AWS Region: set AWS_DEFAULT_REGION (ECS sets it in every "
                                       "task)\n")


def test_the_service_starts_only_with_a_usable_environment(monkeypatch, capsys):
    started: list[bool] = []
    monkeypatch.setattr(service, "main", lambda: started.append(True) or 0)
    for name in entry.ENVIRONMENT:
        monkeypatch.delenv(name, raising=False)
    assert entry.main([]) == entry.EXIT_USAGE and started == []
    assert capsys.readouterr().err.startswith("voicectl.connect: CALLS_QUEUE_URL, BUS_NAME, TABLE_NAME are not set")
    for name, value in {**BASE, "ENDPOINT_NAME": "voxtral-realtime"}.items():
        monkeypatch.setenv(name, value)
    assert entry.main([]) == 0 and started == [True]


def test_python_dash_m_runs_the_entry_point():
    done = subprocess.run([sys.executable, "-m", "voicectl.connect", "--help"], cwd=ROOT, capture_output=True,
                          text=True, timeout=60, check=True)
    assert "environment:" in done.stdout and "CALLS_QUEUE_URL" in done.stdout


def test_the_console_script_is_the_entry_point():
    import tomllib

    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    module, _, function = scripts["voice-connect-consumer"].partition(":")
    assert (module, function) == (entry.__name__, "main")
