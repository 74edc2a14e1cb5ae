"""`make deploy|diff|destroy` preflight: clear stops without credentials or bootstrap; moto stands in for AWS."""

from __future__ import annotations

import os
import subprocess
import sys

import boto3
import pytest
from moto import mock_aws

from tests.conftest import ROOT
from voicectl.preflight import PreflightError, check, parse_context_args

NO_CREDENTIALS = {
    "AWS_CONFIG_FILE": "/nonexistent/config", "AWS_SHARED_CREDENTIALS_FILE": "/nonexistent/credentials",
    "AWS_EC2_METADATA_DISABLED": "true", "AWS_ACCESS_KEY_ID": "", "AWS_SECRET_ACCESS_KEY": "", "AWS_PROFILE": "",
}


@pytest.fixture
def fake_credentials(monkeypatch):
    for key, value in {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
                       "AWS_DEFAULT_REGION": "us-east-1"}.items():
        monkeypatch.setenv(key, value)


def test_make_deploy_without_credentials_stops_with_a_clear_message():
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env.update({k: v for k, v in NO_CREDENTIALS.items() if v})
    result = subprocess.run([sys.executable, "-m", "voicectl", "preflight", "deploy"], cwd=ROOT, env=env,
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 1
    assert result.stdout.startswith("make deploy: stopped: no AWS credentials found")
    assert "aws configure sso" in result.stdout
    assert "Traceback" not in result.stderr


def test_context_arguments_are_read_like_the_cdk_cli():
    assert parse_context_args(["-c", "region=eu-west-1", "--profile", "x", "--context=sonic.enabled=false"]) == {
        "region": "eu-west-1", "sonic.enabled": "false",
    }


SECRET = "arn:aws:secretsmanager:us-east-1:123456789012:secret:hub-token-AbCdEf"


@mock_aws
def test_not_bootstrapped_names_the_bootstrap_command(fake_credentials):
    with pytest.raises(PreflightError, match=r"not bootstrapped .* Run: make bootstrap CDK_ARGS=aws://123456789012/us-east-1"):
        check("diff", [], ROOT)


@mock_aws
def test_deploy_that_stages_the_gated_model_without_a_token_stops(fake_credentials):
    with pytest.raises(PreflightError, match=r"voxtral.stage_model is on but voxtral.hf_token_secret_arn is unset"):
        check("deploy", [], ROOT)
    boto3.client("ssm", region_name="us-east-1").put_parameter(
        Name="/cdk-bootstrap/hnb659fds/version", Value="30", Type="String")
    assert check("deploy", ["-c", "voxtral.stage_model=false"], ROOT)[0].startswith("deploy: account")


def test_a_missing_profile_stops_with_a_message_not_a_traceback(monkeypatch):
    monkeypatch.setenv("AWS_PROFILE", "does-not-exist")
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent/config")
    with pytest.raises(PreflightError, match="could not check the AWS credentials: The config profile"):
        check("deploy", [], ROOT)


@mock_aws
def test_bootstrapped_account_prints_what_will_happen(fake_credentials):
    boto3.client("ssm", region_name="us-east-1").put_parameter(
        Name="/cdk-bootstrap/hnb659fds/version", Value="30", Type="String")
    lines = check("deploy", ["-c", "voxtral.initial_instance_count=2", "-c", f"voxtral.hf_token_secret_arn={SECRET}"], ROOT)
    assert lines[0].startswith("deploy: account 123456789012 (arn:aws:sts::123456789012:user/moto), region us-east-1")
    assert "  RealtimeVoice-Voxtral: endpoint voxtral-realtime on 2 x ml.g6.4xlarge" in lines
    assert "  RealtimeVoice-Sonic: endpoint sonic-tts on 1 x ml.g6e.2xlarge" in lines
    assert "  RealtimeVoice-Operations: alarm topic, dashboard" in lines


@mock_aws
def test_destroy_needs_no_bootstrap_and_bad_settings_stop_it(fake_credentials):
    assert check("destroy", [], ROOT)[0].startswith("destroy: account 123456789012")
    with pytest.raises(PreflightError, match="voxtral.instance_type='x'"):
        check("destroy", ["-c", "voxtral.instance_type=x"], ROOT)
