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
from botocore.stub import Stubber

from config.models import SONIC_MODEL_PACKAGES
from tests.conftest import ROOT
from tests.unit.voicectl.operations.preflight_testkit import (  # noqa: F401 (fixtures)
    NO_STAGING,
    REGION,
    StubbedAws,
    bootstrapped,
    fixture_aws,
    fixture_fake_credentials,
)
from voicectl.operations.preflight import (
    SONIC_LISTING_ID,
    SONIC_LISTING_URL,
    Finding,
    PreflightError,
    Status,
    check,
    environment_args,
    instance_needs,
    parse_context_args,
    run_checks,
)

NO_CREDENTIALS = {
    "AWS_CONFIG_FILE": "/nonexistent/config",
    "AWS_SHARED_CREDENTIALS_FILE": "/nonexistent/credentials",
    "AWS_EC2_METADATA_DISABLED": "true",
    "AWS_ACCESS_KEY_ID": "",
    "AWS_SECRET_ACCESS_KEY": "",
    "AWS_PROFILE": "",
}
ACCOUNT = "123456789012"
SECRET = "arn:aws:secretsmanager:us-east-1:123456789012:secret:hub-token-AbCdEf"
PACKAGE = SONIC_MODEL_PACKAGES[REGION]
PRODUCT = "prod-sonic36example"
QUOTA_G6 = "ml.g6.xlarge for endpoint usage"
QUOTA_G6E = "ml.g6e.2xlarge for endpoint usage"


def quota(name: str, value: float, code: str) -> dict:
    return {
        "ServiceCode": "sagemaker",
        "ServiceName": "Amazon SageMaker",
        "QuotaName": name,
        "Value": value,
        "QuotaCode": code,
        "QuotaArn": f"arn:aws:servicequotas:{REGION}:{ACCOUNT}:sagemaker/{code}",
        "Adjustable": True,
        "GlobalQuota": False,
    }


def stub_sonic(
    aws: StubbedAws, *, supported=("ml.g6e.xlarge", "ml.g6e.2xlarge"), agreements=1
) -> None:
    """DescribeModelPackage, GetListing and SearchAgreements as AWS answers a subscribed account."""
    aws.stub("sagemaker").add_response(
        "describe_model_package",
        {
            "ModelPackageName": "sonic36-sagemaker-v0",
            "ModelPackageArn": PACKAGE,
            "ModelPackageStatus": "Completed",
            "ModelPackageStatusDetails": {"ValidationStatuses": []},
            "CreationTime": "2026-09-01T00:00:00Z",
            "CertifyForMarketplace": True,
            "InferenceSpecification": {
                "Containers": [{"Image": "sonic"}],
                "SupportedContentTypes": ["application/json"],
                "SupportedResponseMIMETypes": ["text/event-stream"],
                "SupportedRealtimeInferenceInstanceTypes": list(supported),
            },
        },
        {"ModelPackageName": PACKAGE},
    )
    aws.stub("marketplace-discovery").add_response(
        "get_listing", listing(), {"listingId": SONIC_LISTING_ID}
    )
    aws.stub("marketplace-agreement").add_response(
        "search_agreements",
        {
            "agreementViewSummaries": [
                {"agreementId": f"agmt-{n}", "status": "ACTIVE"} for n in range(agreements)
            ]
        },
        {
            "catalog": "AWSMarketplace",
            "filters": [
                {"name": "PartyType", "values": ["Acceptor"]},
                {"name": "AgreementType", "values": ["PurchaseAgreement"]},
                {"name": "ResourceIdentifier", "values": [PRODUCT]},
                {"name": "Status", "values": ["ACTIVE"]},
            ],
        },
    )


def listing() -> dict:
    """A GetListing answer with every member the API model requires; only the name and the product
    matter here."""
    cartesia = {"sellerProfileId": "seller-example", "displayName": "Cartesia"}
    return {
        "listingId": SONIC_LISTING_ID,
        "listingName": "Sonic 3.6 by Cartesia",
        "catalog": "AWSMarketplace",
        "associatedEntities": [
            {
                "product": {
                    "productId": PRODUCT,
                    "productName": "Sonic 3.6",
                    "manufacturer": cartesia,
                }
            }
        ],
        "fulfillmentOptionSummaries": [
            {"fulfillmentOptionType": "SAGEMAKER_MODEL", "displayName": "SageMaker model"}
        ],
        "publisher": cartesia,
        "shortDescription": "Text to speech",
        "longDescription": "Text to speech",
        "logoThumbnailUrl": "https://example.com/logo.png",
        **{
            name: []
            for name in (
                "badges",
                "categories",
                "highlights",
                "pricingModels",
                "pricingUnits",
                "promotionalMedia",
                "resources",
                "sellerEngagements",
                "useCases",
                "purchaseIndicators",
            )
        },
    }


def stub_quotas(aws: StubbedAws, applied: list[dict], defaults: list[dict] | None = None) -> None:
    stubber = aws.stub("service-quotas")
    stubber.add_response("list_service_quotas", {"Quotas": applied}, {"ServiceCode": "sagemaker"})
    if defaults is not None:
        stubber.add_response(
            "list_aws_default_service_quotas", {"Quotas": defaults}, {"ServiceCode": "sagemaker"}
        )


def findings(aws: StubbedAws, *cdk_args: str) -> dict[str, Finding]:
    _, found = run_checks("deploy", [*NO_STAGING, *cdk_args], ROOT, aws.session, aws)
    return {finding.check: finding for finding in found}


ENOUGH = [quota(QUOTA_G6, 10, "L-G6X4"), quota(QUOTA_G6E, 4, "L-G6EX2")]


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
        "base image of container/Dockerfile "
        "public.ecr.aws/deep-learning-containers/vllm:0.31.0-gpu-py312-cu130-ubuntu24.04-"
        "sagemaker-v1.0: CUDA 13.0 runs on al2023-ami-sagemaker-inference-gpu-4-1 (NVIDIA driver "
        "580, CUDA 13.0)",
    ]


def test_an_account_without_the_sonic_subscription_stops_with_how_to_subscribe(aws):
    bootstrapped(aws)
    stub_sonic(aws, agreements=0)
    stub_quotas(aws, ENOUGH)
    with pytest.raises(PreflightError) as raised:
        check("deploy", NO_STAGING, ROOT, aws.session, aws)
    assert str(raised.value) == (
        f"account {ACCOUNT} is not subscribed to the AWS Marketplace listing 'Sonic 3.6 by "
        "Cartesia' (product "
        f"{PRODUCT}), so creating the Sonic Model would fail with "
        '"Caller is not subscribed to the marketplace '
        f"offering\". To subscribe, open {SONIC_LISTING_URL}, choose 'Continue to Subscribe' "
        "and accept the offer "
        "(needs aws-marketplace:Subscribe; the AWS managed policy "
        "AWSMarketplaceManageSubscriptions has it), or "
        "deploy without Sonic: -c sonic.enabled=false"
    )
    # The report printed before the stop has every check, the stop among them.
    assert any(
        line.startswith("  STOP      Sonic Marketplace subscription: account")
        for line in raised.value.lines
    )
    assert any(line.startswith("  OK        service quota") for line in raised.value.lines)


def test_a_package_that_does_not_support_the_instance_type_stops(aws):
    bootstrapped(aws)
    stub_sonic(aws, supported=("ml.g6e.xlarge", "ml.g7e.2xlarge"))
    stub_quotas(aws, ENOUGH)
    finding = findings(aws)["Sonic model package"]
    assert (finding.status, finding.message) == (
        Status.STOP,
        "sonic36-sagemaker-v0 does not support "
        "sonic.instance_type=ml.g6e.2xlarge; it supports ml.g6e.xlarge, ml.g7e.2xlarge",
    )


def test_a_quota_below_the_maximum_count_stops_and_names_the_quota_and_the_request(aws):
    bootstrapped(aws)
    stub_sonic(aws)
    stub_quotas(aws, [quota(QUOTA_G6, 0, "L-G6X4"), quota(QUOTA_G6E, 2, "L-G6EX2")])
    found = findings(aws)
    g6 = found[f"service quota '{QUOTA_G6}'"]
    assert g6.status is Status.STOP
    assert g6.message == (
        "0 in us-east-1, below the 4 this deploy may run (Voxtral up to 4, 5 during a rolling "
        "update; the quota is shared with every other endpoint of the account in us-east-1); "
        "SageMaker would fail the endpoint after the stack waited for it. Lower the max "
        "instances, choose another instance type, or request an increase at "
        "https://us-east-1.console.aws.amazon.com/servicequotas/home/services/sagemaker/quotas/L-"
        "G6X4 or with `aws service-quotas request-service-quota-increase --service-code "
        "sagemaker --quota-code L-G6X4 --desired-value 5 --region us-east-1`"
    )
    # Enough for Sonic's maximum of 2, not for a blue/green update at that count.
    g6e = found[f"service quota '{QUOTA_G6E}'"]
    assert g6e.status is Status.WARN
    assert g6e.message.startswith(
        "2 in us-east-1: enough for 2, not for the 4 an update may run at the maximum count"
    )


def test_two_endpoints_on_one_instance_type_need_the_sum(aws):
    bootstrapped(aws)
    stub_sonic(aws, supported=("ml.g6e.2xlarge",))
    stub_quotas(aws, [quota(QUOTA_G6E, 5, "L-G6EX2")])
    finding = findings(aws, "-c", "voxtral.instance_type=ml.g6e.2xlarge")[
        f"service quota '{QUOTA_G6E}'"
    ]
    assert finding.status is Status.STOP
    assert finding.message.startswith(
        "5 in us-east-1, below the 6 this deploy may run (Voxtral up to 4, 5 during a "
        "rolling update; Sonic up to 2, 4 during a blue/green update;"
    )


def test_a_quota_never_changed_is_read_from_the_defaults(aws):
    bootstrapped(aws)
    stub_sonic(aws)
    stub_quotas(
        aws,
        [quota(QUOTA_G6, 8, "L-G6X4")],
        defaults=[
            quota("ml.g5.xlarge for endpoint usage", 2, "L-G5"),
            quota(QUOTA_G6E, 0, "L-G6EX2"),
        ],
    )
    found = findings(aws)
    assert found[f"service quota '{QUOTA_G6}'"].status is Status.OK
    assert found[f"service quota '{QUOTA_G6E}'"].message.startswith("0 in us-east-1, below the 2")


@pytest.mark.parametrize(
    ("code", "status", "start"),
    [
        (
            "ValidationException",
            Status.STOP,
            f"{PACKAGE} cannot be read in us-east-1 (ValidationException: Model Package "
            "not found); set sonic.model_package_arn to the package of this region",
        ),
        (
            "ThrottlingException",
            Status.UNCHECKED,
            "could not check (sagemaker:DescribeModelPackage failed: "
            "ThrottlingException: Model Package not found)",
        ),
    ],
)
def test_a_package_missing_in_the_region_stops_but_throttling_does_not(aws, code, status, start):
    bootstrapped(aws)
    aws.stub("sagemaker").add_client_error(
        "describe_model_package", code, "Model Package not found", 400
    )
    aws.stub("marketplace-discovery").add_response(
        "get_listing", listing(), {"listingId": SONIC_LISTING_ID}
    )
    aws.stub("marketplace-agreement").add_response(
        "search_agreements", {"agreementViewSummaries": [{"agreementId": "agmt-0"}]}
    )
    stub_quotas(aws, ENOUGH)
    finding = findings(aws)["Sonic model package"]
    assert finding.status is status and finding.message.startswith(start), finding.message


def access_denied(stubber: Stubber, operation: str) -> None:
    stubber.add_client_error(
        operation,
        "AccessDeniedException",
        "User: arn:aws:iam::123456789012:user/ci is not authorized to perform this action",
        403,
    )


def test_missing_permissions_are_reported_as_unchecked_and_do_not_stop(aws):
    aws.session.client("ssm").put_parameter(
        Name="/cdk-bootstrap/hnb659fds/version", Value="30", Type="String"
    )
    access_denied(aws.stub("sagemaker"), "describe_model_package")
    access_denied(aws.stub("marketplace-discovery"), "get_listing")
    aws.stub(
        "marketplace-agreement"
    )  # not called: without the listing there is no product to look for
    access_denied(aws.stub("service-quotas"), "list_service_quotas")
    lines = check("deploy", NO_STAGING, ROOT, aws.session, aws)
    unchecked = [line for line in lines if line.startswith("  UNCHECKED")]
    assert unchecked == [
        "  UNCHECKED Sonic model package: could not check (missing permission "
        "sagemaker:DescribeModelPackage: AccessDeniedException: User: "
        "arn:aws:iam::123456789012:user/ci is not authorized to perform this action)",
        "  UNCHECKED Sonic Marketplace subscription: could not check (missing permission "
        "aws-marketplace:GetListing: AccessDeniedException: User: "
        "arn:aws:iam::123456789012:user/ci is not authorized to perform this action); without a "
        f"subscription creating the Sonic Model fails; to subscribe, open {SONIC_LISTING_URL}, "
        "choose 'Continue to Subscribe' and accept the offer (needs aws-marketplace:Subscribe; "
        "the AWS managed policy AWSMarketplaceManageSubscriptions has it), or deploy without "
        "Sonic: -c sonic.enabled=false",
        *(
            f"  UNCHECKED service quota '{name}': could not check (missing permission "
            "servicequotas:ListServiceQuotas: AccessDeniedException: User: "
            "arn:aws:iam::123456789012:user/ci is not authorized to perform this action); "
            f"{name.split()[0]} needs {need}; look it up in "
            "https://us-east-1.console.aws.amazon.com/servicequotas/home/services/sagemaker/"
            "quotas"
            for name, need in ((QUOTA_G6, 4), (QUOTA_G6E, 2))
        ),
    ]


def test_a_missing_agreement_permission_is_unchecked(aws):
    bootstrapped(aws)
    stub_sonic(aws)
    aws.stubbed["marketplace-agreement"][1].deactivate()
    stubber = aws.stub("marketplace-agreement")
    access_denied(stubber, "search_agreements")
    stub_quotas(aws, ENOUGH)
    finding = findings(aws)["Sonic Marketplace subscription"]
    assert finding.status is Status.UNCHECKED
    assert finding.message.startswith(
        "could not check (missing permission aws-marketplace:SearchAgreements: "
    )
    assert (
        "without a subscription to 'Sonic 3.6 by Cartesia' creating the Sonic Model fails"
        in finding.message
    )


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
        "of container/Dockerfile "
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


def test_instance_needs_count_the_update_overlap():
    from config.settings import load_settings
    from tests.conftest import cdk_json_context

    needs = instance_needs(
        load_settings(
            {
                **cdk_json_context(),
                "voxtral.max_instances": "6",
                "voxtral.rollout_batch_percent": "10",
                "sonic.max_instances": "3",
            }
        )
    )
    assert {t: (n.steady, n.peak) for t, n in needs.items()} == {
        "ml.g6.xlarge": (6, 7),
        "ml.g6e.2xlarge": (3, 6),
    }


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


# --- keys the user brings (KMS DescribeKey and GetKeyPolicy, against moto) ----------------------

ROOT_STATEMENT = {
    "Sid": "Account",
    "Effect": "Allow",
    "Principal": {"AWS": f"arn:aws:iam::{ACCOUNT}:root"},
    "Action": "kms:*",
    "Resource": "*",
}
LOGS_STATEMENT = {
    "Sid": "Logs",
    "Effect": "Allow",
    "Principal": {"Service": f"logs.{REGION}.amazonaws.com"},
    "Action": [
        "kms:Encrypt*",
        "kms:Decrypt*",
        "kms:ReEncrypt*",
        "kms:GenerateDataKey*",
        "kms:Describe*",
    ],
    "Resource": "*",
}
EVENTS_STATEMENT = {
    "Sid": "Events",
    "Effect": "Allow",
    "Principal": {"Service": "events.amazonaws.com"},
    "Action": ["kms:DescribeKey", "kms:GenerateDataKey", "kms:Decrypt"],
    "Resource": "*",
}
CONNECT_ARGS = [
    "-c",
    "connect.enabled=true",
    "-c",
    "connect.instance_arn=arn:aws:connect:us-east-1:123456789012:instance/"
    "11111111-2222-3333-4444-555555555555",
]


def user_key(aws: StubbedAws, *statements: dict, spec: str = "SYMMETRIC_DEFAULT") -> str:
    import json

    key = aws.session.client("kms").create_key(
        Policy=json.dumps({"Version": "2012-10-17", "Statement": list(statements)}),
        KeySpec=spec,
        KeyUsage="ENCRYPT_DECRYPT",
    )
    return key["KeyMetadata"]["Arn"]


def key_findings(aws: StubbedAws, key: str, *cdk_args: str) -> Finding:
    """The key's finding of one deploy preflight (a test may run several: the bootstrap version is
    overwritten)."""
    aws.session.client("ssm").put_parameter(
        Name="/cdk-bootstrap/hnb659fds/version", Value="30", Type="String", Overwrite=True
    )
    stub_sonic(aws)
    stub_quotas(aws, ENOUGH)
    return findings(aws, "-c", f"encryption.kms_key_arn={key}", *cdk_args)[
        "key encryption.kms_key_arn"
    ]


def test_a_users_key_with_the_statements_the_stacks_need_passes(aws):
    key = user_key(aws, ROOT_STATEMENT, LOGS_STATEMENT, EVENTS_STATEMENT)
    found = key_findings(aws, key, *CONNECT_ARGS)
    assert (found.status, found.message) == (
        Status.OK,
        f"{key}: an enabled symmetric key whose policy allows what the stacks need",
    )


def test_a_users_key_without_eventbridges_statement_stops_a_deploy_with_connect(aws):
    key = user_key(aws, ROOT_STATEMENT, LOGS_STATEMENT)
    assert key_findings(aws, key).status == Status.OK  # no bus without Connect
    found = key_findings(aws, key, *CONNECT_ARGS)
    assert found.status == Status.STOP
    assert found.message.startswith(
        f"{key}: its policy does not allow events.amazonaws.com kms:DescribeKey, "
        "kms:GenerateDataKey, kms:Decrypt: the transcripts bus"
    )


def test_a_users_key_without_the_logs_or_account_statements_names_both(aws):
    key = user_key(aws, {**ROOT_STATEMENT, "Action": ["kms:Describe*", "kms:Put*"]})
    found = key_findings(aws, key)
    assert found.status == Status.STOP
    assert (
        f"allow the account ({ACCOUNT}:root) kms:Decrypt, kms:GenerateDataKey, kms:CreateGrant: "
        in found.message
    )
    assert (
        f"allow logs.{REGION}.amazonaws.com kms:Encrypt*, kms:Decrypt*, kms:ReEncrypt*, "
        "kms:GenerateDataKey*"
    ) in found.message


def test_an_asymmetric_or_disabled_or_unknown_key_stops(aws):
    rsa = user_key(aws, ROOT_STATEMENT, LOGS_STATEMENT, spec="RSA_2048")
    found = key_findings(aws, rsa)
    assert (
        found.status == Status.STOP
        and "it is a RSA_2048 key for ENCRYPT_DECRYPT; Amazon Connect" in found.message
    )
    disabled = user_key(aws, ROOT_STATEMENT, LOGS_STATEMENT)
    aws.session.client("kms").disable_key(
        KeyId=disabled.rsplit("/", 1)[1]
    )  # moto 5 takes the id only
    assert "its state is Disabled, not Enabled" in key_findings(aws, disabled).message
    unknown = f"arn:aws:kms:{REGION}:{ACCOUNT}:key/0f0e0d0c-0b0a-0908-0706-050403020100"
    found = key_findings(aws, unknown)
    assert (found.status, found.message) == (
        Status.STOP,
        f"{unknown} does not exist (or is in another Region): "
        "give a key of this account and Region",
    )


def test_a_stream_key_is_checked_when_connect_is_on(aws):
    data = user_key(aws, ROOT_STATEMENT, LOGS_STATEMENT, EVENTS_STATEMENT)
    stream = user_key(
        aws, LOGS_STATEMENT
    )  # no account statement: the consumers' IAM grant would not work
    key_findings(aws, data)
    found = findings(
        aws,
        "-c",
        f"encryption.kms_key_arn={data}",
        "-c",
        f"connect.stream_kms_key_arn={stream}",
        *CONNECT_ARGS,
    )["key connect.stream_kms_key_arn"]
    assert found.status == Status.STOP and f"allow the account ({ACCOUNT}:root)" in found.message
