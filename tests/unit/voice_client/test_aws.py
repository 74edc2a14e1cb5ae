"""voice_client.aws: the Region every subcommand uses (AWS_REGION included) and one line, never a
traceback, when AWS cannot be reached; arguments are checked before AWS is touched."""

from __future__ import annotations

import os
import subprocess
import sys

import botocore.exceptions
import pytest

from tests.conftest import ROOT
from voice_client.aws import aws_session, describe_aws_failure
from voicectl import cli

#: An environment with no AWS configuration at all: no credentials, no Region, no profile, no
#: instance metadata.
BARE_AWS = {
    "AWS_CONFIG_FILE": "/nonexistent/config",
    "AWS_SHARED_CREDENTIALS_FILE": "/nonexistent/credentials",
    "AWS_EC2_METADATA_DISABLED": "true",
}


@pytest.fixture
def bare_aws(monkeypatch, tmp_path):
    """No AWS_* variables but those of BARE_AWS, for in-process tests."""
    for name in list(os.environ):
        if name.startswith("AWS_"):
            monkeypatch.delenv(name)
    for name, value in BARE_AWS.items():
        monkeypatch.setenv(name, value)


def voicectl(*argv: str, **env: str) -> subprocess.CompletedProcess:
    """Run ``python -m voicectl`` in a bare AWS environment plus ``env``."""
    environment = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")} | BARE_AWS | env
    return subprocess.run(
        [sys.executable, "-m", "voicectl", *argv],
        cwd=ROOT,
        env=environment,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_the_region_comes_from_the_option_then_aws_region_then_aws_default_region(
    bare_aws, monkeypatch, tmp_path
):
    config = tmp_path / "config"
    config.write_text("[profile team]\nregion = ap-south-1\n")
    monkeypatch.setenv("AWS_CONFIG_FILE", str(config))
    assert aws_session("team").region_name == "ap-south-1"
    monkeypatch.setenv("AWS_DEFAULT_REGION", "eu-central-1")
    assert aws_session("team").region_name == "eu-central-1"
    monkeypatch.setenv("AWS_REGION", "eu-west-3")
    assert aws_session("team").region_name == "eu-west-3"  # boto3 alone would say eu-central-1
    assert aws_session("team", "us-west-2").region_name == "us-west-2"
    monkeypatch.setenv("AWS_REGION", "")  # empty counts as unset
    assert aws_session().region_name == "eu-central-1"


def test_no_region_and_a_missing_profile_are_usage_errors(bare_aws):
    with pytest.raises(cli.UsageError, match="no AWS Region: pass --region, set AWS_REGION"):
        aws_session()
    assert aws_session(region_required=False).region_name is None
    with pytest.raises(
        cli.UsageError, match="The config profile \\(nope\\) could not be found; list profiles with"
    ):
        aws_session("nope")


@pytest.mark.parametrize(
    ("error", "code", "message"),
    [
        (
            botocore.exceptions.NoCredentialsError(),
            1,
            "no AWS credentials found (Unable to locate credentials). Configure",
        ),
        (botocore.exceptions.NoRegionError(), 2, "no AWS Region: pass --region"),
        (
            botocore.exceptions.ProfileNotFound(profile="x"),
            2,
            "The config profile (x) could not be found; list profiles",
        ),
        (
            botocore.exceptions.TokenRetrievalError(provider="sso", error_msg="expired"),
            1,
            "the AWS credentials could not be loaded (Error when retrieving token from sso: "
            "expired); renew them",
        ),
        (
            botocore.exceptions.ClientError(
                {"Error": {"Code": "ExpiredToken", "Message": "gone"}}, "GetCallerIdentity"
            ),
            1,
            "AWS rejected the credentials (An error occurred (ExpiredToken) when calling the "
            "GetCallerIdentity operation: gone); renew them",
        ),
        (
            botocore.exceptions.ClientError(
                {"Error": {"Code": "AccessDeniedException", "Message": "no"}}, "ListStacks"
            ),
            1,
            "access denied: An error occurred (AccessDeniedException)",
        ),
        (
            botocore.exceptions.ClientError(
                {"Error": {"Code": "ValidationError", "Message": "bad"}}, "DescribeStacks"
            ),
            1,
            "AWS refused a request: An error occurred (ValidationError)",
        ),
        (
            botocore.exceptions.EndpointConnectionError(endpoint_url="https://sts.amazonaws.com"),
            1,
            "could not reach AWS (Could not connect to the endpoint URL: "
            '"https://sts.amazonaws.com"); check the network',
        ),
    ],
)
def test_aws_failures_become_one_line_and_an_exit_code(error, code, message):
    described = describe_aws_failure(error)
    assert described is not None and described[0] == code and described[1].startswith(message), (
        described
    )


def test_other_exceptions_keep_their_traceback():
    assert describe_aws_failure(ValueError("a bug")) is None
    assert describe_aws_failure(KeyError("x")) is None


def test_stage_model_checks_the_revision_before_anything_else():
    """No Region, no credentials: the malformed revision is still what the user hears about, with
    the allowed form."""
    result = voicectl("stage-model", "--s3-uri", "s3://bucket/models/voxtral/", "--revision", "abc")
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        "voicectl stage-model: revision 'abc' is not a full 40-character commit hash; branches "
        "and tags can move, so the weights would not be pinned. Pick a commit at "
        "https://huggingface.co/mistralai/Voxtral-Mini-4B-Realtime-2602/commits/main"
    ]


def test_stage_model_without_region_or_credentials_says_so_in_one_line(tmp_path):
    no_region = voicectl(
        "stage-model", "--stack", "RealtimeVoice-Voxtral", "--from-dir", str(tmp_path)
    )
    assert (no_region.returncode, no_region.stderr.strip()) == (
        2,
        "voicectl stage-model: no AWS Region: pass --region, set AWS_REGION, or set a region in "
        "your profile",
    )
    # With AWS_REGION (which boto3 alone ignores) the Region is found; then the missing credentials
    # stop it, before any download or upload.
    no_credentials = voicectl(
        "stage-model",
        "--stack",
        "RealtimeVoice-Voxtral",
        "--from-dir",
        str(tmp_path),
        AWS_REGION="eu-west-1",
    )
    assert no_credentials.returncode == 1
    assert no_credentials.stderr.strip().splitlines() == [
        "voicectl stage-model: no AWS credentials found (Unable to locate credentials). "
        "Configure them the usual way (for example `aws configure sso` and `export "
        "AWS_PROFILE=<profile>`, or an instance or container role), then run the command again."
    ]


def test_the_staging_build_command_reports_without_a_traceback(tmp_path):
    """``python -m stage_model`` as the ModelStaging build runs it (from its staged source, no
    voicectl): no credentials is one line too, said before anything is downloaded."""
    from constructs_lib.artifacts.model_staging import stage_build_source

    source = stage_build_source(tmp_path / "build")

    environment = (
        {k: v for k, v in os.environ.items() if not k.startswith("AWS_") and k != "PYTHONPATH"}
        | BARE_AWS
        | {"PYTHONDONTWRITEBYTECODE": "1", "AWS_REGION": "eu-west-1"}
    )
    result = subprocess.run(
        [sys.executable, "-m", "stage_model", "--stack", "S", "--from-dir", str(tmp_path)],
        cwd=source,
        env=environment,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert (result.returncode, result.stderr.strip()) == (
        1,
        "voicectl stage-model: Unable to locate credentials",
    ), result.stderr


@pytest.mark.parametrize(
    "argv",
    [
        [
            "transcribe",
            "tests/clients/data/speech_22k_stereo.wav",
            "--endpoint",
            "voxtral-realtime",
        ],
        [
            "speak",
            "Hello",
            "--endpoint",
            "sonic-tts",
            "--voice",
            "v",
            "--out",
            "{tmp}/no-region.wav",
        ],
    ],
)
def test_endpoint_clients_without_a_region_stop_with_one_line(argv, tmp_path):
    result = voicectl(*(argument.format(tmp=tmp_path) for argument in argv))
    assert result.returncode == 2, result.stderr
    assert (
        result.stderr.strip()
        .splitlines()[-1]
        .endswith("no AWS Region: pass --region, set AWS_REGION, or set a region in your profile")
    )
    assert "Traceback" not in result.stderr
