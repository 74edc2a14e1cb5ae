"""`make deploy|diff|destroy|bootstrap` preflight: clear stops without credentials, bootstrap,
subscription, quota or a driver for the image's CUDA; what it cannot check is said, not failed.

moto stands in for STS, SSM and KMS (DescribeKey, GetKeyPolicy). The other APIs are stubbed at the
boto3 client level with botocore's Stubber, because moto 5.2.5 cannot answer them: its Service
Quotas backend implements only ListAWSDefaultServiceQuotas and GetServiceQuota, for service code
"vpc" alone (no ListServiceQuotas, no SageMaker quotas); it has no AWS Marketplace Discovery or
Agreement backend; and its SageMaker DescribeModelPackage finds only packages of the caller's own
account, not a Marketplace seller's. Every stub is asserted to have been used, with the parameters
sent.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.conftest import ROOT
from tests.unit.voicectl.operations.preflight_testkit import (  # noqa: F401 (fixtures)
    ACCOUNT,
    ENOUGH,
    NO_STAGING,
    QUOTA_G6,
    bootstrapped,
    findings,
    fixture_aws,
    fixture_fake_credentials,
    quota,
    stub_quotas,
    stub_sonic,
)
from voicectl.operations.preflight import (
    PreflightError,
    check,
    environment_args,
    parse_context_args,
)
from voicectl.operations.preflight_findings import Status

NO_CREDENTIALS = {
    "AWS_CONFIG_FILE": "/nonexistent/config",
    "AWS_SHARED_CREDENTIALS_FILE": "/nonexistent/credentials",
    "AWS_EC2_METADATA_DISABLED": "true",
    "AWS_ACCESS_KEY_ID": "",
    "AWS_SECRET_ACCESS_KEY": "",
    "AWS_PROFILE": "",
}
SECRET = "arn:aws:secretsmanager:us-east-1:123456789012:secret:hub-token-AbCdEf"


def test_a_ready_account_passes_every_check(aws):
    bootstrapped(aws)
    stub_sonic(aws)
    stub_quotas(aws, ENOUGH)
    lines = check("deploy", NO_STAGING, ROOT, aws.session, aws)
    assert (
        lines[0]
        == f"deploy: account {ACCOUNT} (arn:aws:sts::{ACCOUNT}:user/moto), region us-east-1"
    )
    assert lines[-6:] == [
        "  OK        CDK bootstrap of us-east-1: version 30 (this app needs 6 or later)",
        "  OK        Sonic model package: sonic36-sagemaker-v0 (Completed), supports "
        "ml.g6e.2xlarge",
        "  OK        Sonic Marketplace subscription: 'Sonic 3.6 by Cartesia': active agreement "
        "agmt-0",
        "  OK        service quota 'ml.g6.xlarge for endpoint usage': 10 in us-east-1 (Voxtral "
        "up to 4, 5 during a rolling update; the quota is shared with every other endpoint of "
        "the account in us-east-1)",
        "  OK        service quota 'ml.g6e.2xlarge for endpoint usage': 4 in us-east-1 (Sonic up "
        "to 2, 4 during a blue/green update; the quota is shared with every other endpoint of "
        "the account in us-east-1)",
        "  OK        CUDA of the Voxtral image on al2023-ami-sagemaker-inference-gpu-4-1: the "
        "base image of services/bridge/Dockerfile "
        "public.ecr.aws/deep-learning-containers/vllm:0.31.0-gpu-py312-cu130-ubuntu24.04-"
        "sagemaker-v1.0: CUDA 13.0 runs on al2023-ami-sagemaker-inference-gpu-4-1 (NVIDIA driver "
        "580, CUDA 13.0)",
    ]


def test_an_image_cuda_the_ami_driver_cannot_run_stops_as_a_settings_error(aws):
    """The settings refuse it (the synth would too), so the preflight stops before any AWS check."""
    bootstrapped(aws)
    with pytest.raises(PreflightError) as raised:
        findings(
            aws,
            "-c",
            "sonic.enabled=false",
            "-c",
            "voxtral.inference_ami_version=al2-ami-sagemaker-inference-gpu-3-1",
        )
    assert str(raised.value).splitlines()[1:] == [
        "  - voxtral.inference_ami_version='al2-ami-sagemaker-inference-gpu-3-1': the base image "
        "of services/bridge/Dockerfile "
        "public.ecr.aws/deep-learning-containers/vllm:0.31.0-gpu-py312-cu130-ubuntu24.04-"
        "sagemaker-v1.0: CUDA 13.0 needs a newer driver than al2-ami-sagemaker-inference-gpu-3-1 "
        "(NVIDIA driver 550, CUDA 12.4), and this AMI does not mount forward-compatibility "
        "libraries: the container would fail to start (CannotStartContainerError); use an "
        "InferenceAmiVersion whose driver runs CUDA 13.0 (al2023-ami-sagemaker-inference-gpu-4-1)"
    ]


@pytest.mark.parametrize(
    ("image", "status", "start"),
    [
        (
            "123456789012.dkr.ecr.us-east-1.amazonaws.com/team/voxtral-bridge:2026-11-01",
            Status.UNCHECKED,
            "the CUDA version of voxtral.image_uri "
            "123456789012.dkr.ecr.us-east-1.amazonaws.com/team/voxtral-bridge:2026-11-01 is "
            "unknown (its tag names none",
        ),
        (
            "123456789012.dkr.ecr.us-east-1.amazonaws.com/bridge:0.17.1-gpu-py312-cu129-ubuntu22.04-sagemaker-v1.0-b1",
            Status.WARN,
            "voxtral.image_uri "
            "123456789012.dkr.ecr.us-east-1.amazonaws.com/bridge:0.17.1-gpu-py312-cu129-ubuntu22."
            "04-sagemaker-v1.0-b1: CUDA 12.9 is newer than al2-ami-sagemaker-inference-gpu-3-1",
        ),
    ],
)
def test_a_prebuilt_image_is_checked_when_its_tag_says_its_cuda(aws, image, status, start):
    bootstrapped(aws)
    stub_quotas(aws, [quota(QUOTA_G6, 10, "L-G6X4")])
    found = findings(
        aws,
        "-c",
        "sonic.enabled=false",
        "-c",
        f"voxtral.image_uri={image}",
        "-c",
        "voxtral.inference_ami_version=al2-ami-sagemaker-inference-gpu-3-1",
    )
    finding = found["CUDA of the Voxtral image on al2-ami-sagemaker-inference-gpu-3-1"]
    assert finding.status is status and finding.message.startswith(start), finding.message


def test_make_deploy_without_credentials_stops_with_a_clear_message():
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env.update({k: v for k, v in NO_CREDENTIALS.items() if v})
    result = subprocess.run(
        [sys.executable, "-m", "voicectl", "preflight", "deploy"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 1
    assert result.stdout.startswith("make deploy: stopped: no AWS credentials found")
    assert "aws configure sso" in result.stdout
    assert "Traceback" not in result.stderr


def test_make_bootstrap_has_a_preflight_that_stops_without_credentials():
    makefile = (ROOT / "Makefile").read_text()
    assert (
        "\t$(PY) -m voicectl preflight bootstrap $(CDK_ARGS)\n\t$(CDK) bootstrap $(CDK_ARGS)\n"
    ) in makefile
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env.update({k: v for k, v in NO_CREDENTIALS.items() if v})
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "voicectl",
            "preflight",
            "bootstrap",
            "aws://123456789012/eu-west-1",
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert (result.returncode, result.stderr) == (1, "")
    assert result.stdout.startswith("make bootstrap: stopped: no AWS credentials found")


def test_bootstrap_checks_the_target_account_and_reports_what_is_there(aws):
    lines = check("bootstrap", ["aws://123456789012/eu-west-1"], ROOT, aws.session, aws)
    assert lines == [
        f"bootstrap: account {ACCOUNT} (arn:aws:sts::{ACCOUNT}:user/moto), region us-east-1",
        "  OK        CDK bootstrap of eu-west-1: not bootstrapped yet; cdk bootstrap creates the "
        "CDKToolkit stack",
    ]
    bootstrapped(aws)
    assert check("bootstrap", [], ROOT, aws.session, aws)[-1] == (
        "  OK        CDK bootstrap of us-east-1: bootstrapped at version 30; cdk bootstrap "
        "updates it to the CLI's version"
    )
    with pytest.raises(
        PreflightError,
        match=r"^the credentials are for account 123456789012, not 999999999999: use the profile "
        r"of 999999999999 or bootstrap aws://123456789012/us-east-1$",
    ):
        check("bootstrap", ["aws://999999999999/us-east-1"], ROOT, aws.session, aws)
    with pytest.raises(
        PreflightError, match="'aws://12345/us-east-1' is not an environment of the form"
    ):
        check("bootstrap", ["aws://12345/us-east-1"], ROOT, aws.session, aws)


def test_environment_and_context_arguments_are_read_like_the_cdk_cli():
    assert parse_context_args(
        ["-c", "region=eu-west-1", "--profile", "x", "--context=sonic.enabled=false"]
    ) == {
        "region": "eu-west-1",
        "sonic.enabled": "false",
    }
    assert environment_args(
        ["--force", "aws://123456789012/eu-west-1", "aws://210987654321/us-gov-west-1"]
    ) == [("123456789012", "eu-west-1"), ("210987654321", "us-gov-west-1")]


def test_not_bootstrapped_names_the_bootstrap_command(aws):
    with pytest.raises(
        PreflightError,
        match=r"not bootstrapped .* Run: make bootstrap CDK_ARGS=aws://123456789012/us-east-1",
    ):
        check("diff", [], ROOT, aws.session, aws)


def test_deploy_that_stages_the_gated_model_without_a_token_stops(aws):
    bootstrapped(aws)
    stub_sonic(aws)
    stub_quotas(aws, ENOUGH)
    with pytest.raises(
        PreflightError, match=r"^voxtral.stage_model is on but voxtral.hf_token_secret_arn is unset"
    ):
        check("deploy", [], ROOT, aws.session, aws)


def test_several_stops_are_listed_together(aws):
    stub_sonic(aws, agreements=0)
    stub_quotas(aws, ENOUGH)
    with pytest.raises(PreflightError) as raised:
        check("deploy", [], ROOT, aws.session, aws)
    message = str(raised.value)
    assert message.startswith("3 problems:\n  - model hub token: voxtral.stage_model is on")
    assert (
        "\n  - CDK bootstrap of us-east-1: account 123456789012 in us-east-1 is not bootstrapped"
        in message
    )
    assert "\n  - Sonic Marketplace subscription: account 123456789012 is not subscribed" in message


def test_a_missing_profile_stops_with_a_message_not_a_traceback(monkeypatch):
    monkeypatch.setenv("AWS_PROFILE", "does-not-exist")
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent/config")
    with pytest.raises(
        PreflightError, match=r"^The config profile \(does-not-exist\) could not be found; list "
    ):
        check("deploy", [], ROOT)
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")} | {
        "AWS_PROFILE": "does-not-exist",
        "AWS_CONFIG_FILE": "/nonexistent/config",
    }
    result = subprocess.run(
        [sys.executable, "-m", "voicectl", "preflight", "deploy"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert (result.returncode, result.stderr) == (1, "")
    assert result.stdout == (
        "make deploy: stopped: The config profile (does-not-exist) could not be found; list "
        "profiles with `aws configure list-profiles`\n"
    )


def test_bootstrapped_account_prints_what_will_happen(aws):
    bootstrapped(aws)
    lines = check(
        "diff",
        ["-c", "voxtral.initial_instance_count=2", "-c", f"voxtral.hf_token_secret_arn={SECRET}"],
        ROOT,
        aws.session,
        aws,
    )
    assert lines[0].startswith(
        "diff: account 123456789012 (arn:aws:sts::123456789012:user/moto), region us-east-1"
    )
    assert "  RealtimeVoice-Voxtral: endpoint voxtral-realtime on 2 x ml.g6.xlarge" in lines
    assert "  RealtimeVoice-Sonic: endpoint sonic-tts on 1 x ml.g6e.2xlarge" in lines
    assert "  RealtimeVoice-Operations: alarm topic, dashboard" in lines


def test_destroy_needs_no_bootstrap_and_bad_settings_stop_it(aws):
    assert check("destroy", [], ROOT, aws.session, aws)[0].startswith(
        "destroy: account 123456789012"
    )
    with pytest.raises(PreflightError, match=r"voxtral.instance_type='x'"):
        check("destroy", ["-c", "voxtral.instance_type=x"], ROOT, aws.session, aws)
