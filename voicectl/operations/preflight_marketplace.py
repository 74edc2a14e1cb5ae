"""The Sonic checks of ``voicectl preflight deploy`` (:mod:`voicectl.operations.preflight`): the
model package in the stack's region, and the account's AWS Marketplace subscription to its listing.
Read-only."""

from __future__ import annotations

from typing import Any

import botocore.exceptions

from config.settings import Settings
from voice_client.aws import error_code
from voicectl.operations.preflight_findings import Finding, Status, describe_error, unchecked

#: The AWS Marketplace listing of Cartesia Sonic 3.6 for SageMaker and its display name (when the
#: Discovery API cannot be asked). Source: cartesia-ai/cartesia-aws,
#: sonic-3-6-jumpstart/Sonic-3-6-Jumpstart.ipynb, "Subscribe to the model package". The listing id
#: is the ``prodview-`` part of the listing's address (unconfirmed: the Discovery API reference
#: shows no example id).
SONIC_LISTING_ID = "prodview-h5rfrnvkbnlki"
SONIC_LISTING_URL = f"https://aws.amazon.com/marketplace/pp/{SONIC_LISTING_ID}"
SONIC_LISTING_NAME = "Sonic 3.6 (Cartesia)"
#: DescribeModelPackage error codes for a package that does not exist (here): SageMaker answers
#: ValidationException.
MISSING_PACKAGE_CODES = frozenset(
    {"ValidationException", "ResourceNotFound", "ResourceNotFoundException"}
)
#: AWS Marketplace's buyer APIs (Discovery, Agreement) have one endpoint, in us-east-1 (botocore's
#: endpoint data).
MARKETPLACE_REGION = "us-east-1"


def check_sonic_package(sagemaker: Any, settings: Settings) -> Finding:
    """The Sonic model package exists in the stack's region and supports ``sonic.instance_type``
    (and every type of ``sonic.instance_pools``)."""
    arn, types = settings.sonic_model_package_arn, settings.sonic.variant().instance_types
    key = "sonic.instance_pools" if settings.sonic.instance_pools else "sonic.instance_type"
    check = "Sonic model package"
    try:
        package = sagemaker.describe_model_package(ModelPackageName=arn)
    except botocore.exceptions.ClientError as error:
        if "subscri" in str(error).lower():
            return Finding(
                Status.STOP,
                check,
                f"{describe_error(error)}. Subscribe to {SONIC_LISTING_URL} first",
            )
        if (
            error_code(error) not in MISSING_PACKAGE_CODES
        ):  # a missing permission, throttling, a server error
            return unchecked(check, "sagemaker:DescribeModelPackage", error)
        return Finding(
            Status.STOP,
            check,
            f"{arn} cannot be read in {settings.region} ({describe_error(error)}); set "
            "sonic.model_package_arn to the package of this region from the listing's usage "
            "instructions",
        )
    except botocore.exceptions.BotoCoreError as error:
        return unchecked(check, "sagemaker:DescribeModelPackage", error)
    supported = (
        package.get("InferenceSpecification", {}).get("SupportedRealtimeInferenceInstanceTypes")
        or []
    )
    unsupported = [t for t in types if supported and t not in supported]
    if unsupported:
        return Finding(
            Status.STOP,
            check,
            f"{package.get('ModelPackageName', arn)} does not support "
            f"{key}={', '.join(unsupported)}; it supports {', '.join(supported)}",
        )
    return Finding(
        Status.OK,
        check,
        f"{package.get('ModelPackageName', arn)} ({package.get('ModelPackageStatus', '?')})"
        + (f", supports {', '.join(types)}" if supported else ""),
    )


def check_sonic_subscription(discovery: Any, agreement: Any, account: str) -> Finding:
    """An active AWS Marketplace purchase agreement of ``account`` for the Sonic listing's
    product."""
    check = "Sonic Marketplace subscription"
    how = (
        f"open {SONIC_LISTING_URL}, choose 'Continue to Subscribe' and accept the offer (needs "
        "aws-marketplace:Subscribe; the AWS managed policy AWSMarketplaceManageSubscriptions "
        "has it), or deploy without Sonic: -c sonic.enabled=false"
    )
    try:
        listing = discovery.get_listing(listingId=SONIC_LISTING_ID)
    except (botocore.exceptions.ClientError, botocore.exceptions.BotoCoreError) as error:
        return unchecked(
            check,
            "aws-marketplace:GetListing",
            error,
            f"without a subscription creating the Sonic Model fails; to subscribe, {how}",
        )
    name = listing.get("listingName") or SONIC_LISTING_NAME
    products = sorted(
        {
            entity["product"]["productId"]
            for entity in listing.get("associatedEntities", [])
            if entity.get("product", {}).get("productId")
        }
    )
    if not products:
        return Finding(
            Status.UNCHECKED, check, f"the listing '{name}' names no product to look for; {how}"
        )
    try:
        found = []
        for product in products:
            found += agreement.search_agreements(
                catalog="AWSMarketplace",
                filters=[
                    {"name": "PartyType", "values": ["Acceptor"]},
                    {"name": "AgreementType", "values": ["PurchaseAgreement"]},
                    {"name": "ResourceIdentifier", "values": [product]},
                    {"name": "Status", "values": ["ACTIVE"]},
                ],
            ).get("agreementViewSummaries", [])
    except (botocore.exceptions.ClientError, botocore.exceptions.BotoCoreError) as error:
        return unchecked(
            check,
            "aws-marketplace:SearchAgreements",
            error,
            f"without a subscription to '{name}' creating the Sonic Model fails; to subscribe, "
            f"{how}",
        )
    if not found:
        return Finding(
            Status.STOP,
            check,
            f"account {account} is not subscribed to the AWS Marketplace listing "
            f"'{name}' (product {', '.join(products)}), so creating the Sonic Model would "
            'fail with "Caller '
            f'is not subscribed to the marketplace offering". To subscribe, {how}',
        )
    return Finding(
        Status.OK, check, f"'{name}': active agreement {found[0].get('agreementId', '?')}"
    )
