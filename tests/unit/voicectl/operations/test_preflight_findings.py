"""What a preflight check finds (voicectl/operations/preflight_findings.py): the report line of a
finding, and a check that could not be made said as UNCHECKED with the missing permission, without
stopping the deploy (stand-ins: test_preflight.py)."""

from __future__ import annotations

import botocore.exceptions

from tests.conftest import ROOT
from tests.unit.voicectl.operations.preflight_testkit import (  # noqa: F401 (fixtures)
    NO_STAGING,
    QUOTA_G6,
    QUOTA_G6E,
    access_denied,
    fixture_aws,
    fixture_fake_credentials,
)
from voicectl.operations.preflight import check
from voicectl.operations.preflight_findings import Finding, Status, describe_error, unchecked
from voicectl.operations.preflight_marketplace import SONIC_LISTING_URL


def test_an_unchecked_finding_names_the_failed_call_and_its_line_the_status():
    throttled = botocore.exceptions.ClientError(
        {"Error": {"Code": "ThrottlingException", "Message": "Rate exceeded"}}, "GetParameter"
    )
    assert describe_error(throttled) == "ThrottlingException: Rate exceeded"
    offline = botocore.exceptions.EndpointConnectionError(endpoint_url="https://x")
    assert describe_error(offline) == 'Could not connect to the endpoint URL: "https://x"'
    finding = unchecked("CDK bootstrap of us-east-1", "ssm:GetParameter", throttled, "retry later")
    assert finding == Finding(
        Status.UNCHECKED,
        "CDK bootstrap of us-east-1",
        "could not check (ssm:GetParameter failed: ThrottlingException: Rate exceeded); "
        "retry later",
    )
    assert finding.line() == (
        "  UNCHECKED CDK bootstrap of us-east-1: could not check (ssm:GetParameter failed: "
        "ThrottlingException: Rate exceeded); retry later"
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
