"""config/network.py: network.* and encryption.*: the private deployment's settings and their
refusals."""

from __future__ import annotations

import pytest

from config.settings import SettingsError, load_settings
from tests.app.variants import ECS_VPC as PRIVATE_ECS
from tests.conftest import cdk_json_context


def test_private_network_mode_is_accepted_and_asks_for_the_ecs_endpoints():
    settings = load_settings({**cdk_json_context(), "voxtral.target": "ecs", "network.mode": "vpc"})
    assert settings.uses_ecs and settings.network.network_props(ecs=settings.uses_ecs).ecs_endpoints
    # The SageMaker target in vpc mode asks for none; nor does an existing VPC that brings its own
    # endpoints.
    sagemaker = load_settings({**cdk_json_context(), "network.mode": "vpc"})
    assert (
        not sagemaker.uses_ecs
        and not sagemaker.network.network_props(ecs=sagemaker.uses_ecs).ecs_endpoints
    )
    assert (
        not settings.network.__class__(mode="vpc", create_endpoints=False)
        .network_props(ecs=True)
        .ecs_endpoints
    )


# --- Private mode: bad settings, one clear message each
# --------------------------------------------------------------- network.mode=vpc and encryption.*:
# the private deployment's templates (a VPC without internet, its endpoints and security groups,
# both Models isolated in it, every data-holding resource under the key), its checks (cdk-nag's
# AwsSolutions, HIPAA Security and NIST 800-53 rev 5 packs, cfn-lint), an existing VPC, and a key
# given by ARN in public mode. The variants come from the registry (tests/app/variants.py).


EXISTING_TWO_ZONES = {
    "network.mode": "vpc",
    "network.vpc_id": "vpc-0123456789abcdef0",
    "network.subnet_ids": "subnet-0123456789abcdef0,subnet-0123456789abcdef1",
    "network.availability_zones": "us-east-1a,us-east-1b",
    "network.vpc_cidr": "10.0.0.0/16",
    "network.create_endpoints": "false",
}


@pytest.mark.parametrize(
    "overrides, message",
    [
        (
            {**EXISTING_TWO_ZONES, "network.availability_zones": "us-east-1a,us-east-1a"},
            'network.subnet_ids=["subnet-0123456789abcdef0", "subnet-0123456789abcdef1"]: must be '
            "in at least 2 "
            "Availability Zones (SageMaker hosting in a VPC); all are in us-east-1a",
        ),
        (
            {"network.mode": "vpc", "network.max_azs": "1"},
            "network.max_azs=1: must be at least 2 (SageMaker hosting in a VPC needs subnets in "
            "two Availability Zones)",
        ),
        (
            {**EXISTING_TWO_ZONES, "network.vpc_id": "vpc-xyz"},
            "network.vpc_id='vpc-xyz': must be a VPC id such as 'vpc-0123456789abcdef0'",
        ),
        (
            {
                **EXISTING_TWO_ZONES,
                "network.subnet_ids": "sg-0123456789abcdef0,subnet-0123456789abcdef1",
            },
            'network.subnet_ids=["sg-0123456789abcdef0", "subnet-0123456789abcdef1"]: must be '
            "subnet ids such as "
            "'subnet-0123456789abcdef0'; not: 'sg-0123456789abcdef0'",
        ),
        (
            {**EXISTING_TWO_ZONES, "network.security_group_ids": "subnet-0123456789abcdef0"},
            'network.security_group_ids=["subnet-0123456789abcdef0"]: must be security group ids '
            "such as "
            "'sg-0123456789abcdef0'; not: 'subnet-0123456789abcdef0'",
        ),
        (
            {
                "encryption.kms_key_arn": "arn:aws:kms:eu-west-1:123456789012:key/0f0e0d0c-0b0a-0908-0706-050403020100"  # noqa: E501 (an ARN has no place to break)
            },
            "encryption.kms_key_arn='arn:aws:kms:eu-west-1:123456789012:key/"
            "0f0e0d0c-0b0a-0908-0706-050403020100': the key is in eu-west-1 but the stack deploys "
            "to us-east-1",
        ),
        (
            {"encryption.kms_key_arn": "arn:aws:kms:us-east-1:123456789012:alias/data"},
            "encryption.kms_key_arn='arn:aws:kms:us-east-1:123456789012:alias/data': must be a KMS "
            "key ARN (arn:aws:kms:<region>:<account>:key/<key id>; not an alias, IAM grants need "
            "the key)",
        ),
        (
            {
                "encryption.kms_key_arn": "arn:aws:kms:us-east-1:12345:key/0f0e0d0c-0b0a-0908-0706-050403020100"  # noqa: E501 (an ARN has no place to break)
            },
            "encryption.kms_key_arn='arn:aws:kms:us-east-1:12345:key/"
            "0f0e0d0c-0b0a-0908-0706-050403020100': must be a KMS key ARN "
            "(arn:aws:kms:<region>:<account>:key/<key id>; not an alias, IAM grants need the key)",
        ),
        (
            {"network.subnet_ids": "subnet-0123456789abcdef0"},
            'network.subnet_ids=["subnet-0123456789abcdef0"]: set only with network.mode=vpc '
            "(public mode uses "
            "SageMaker-managed networking)",
        ),
        (
            {"network.mode": "vpc", "network.vpc_id": "vpc-0123456789abcdef0"},
            "network.vpc_cidr=null: must be the CIDR block of the VPC network.vpc_id (what its "
            "endpoints let in)",
        ),
        (
            {**EXISTING_TWO_ZONES, "network.create_endpoints": "true"},
            "network.route_table_ids=[]: must name the route table of each of the 2 subnet(s) (the "
            "S3 gateway endpoint is added to them), or set network.create_endpoints=false if the "
            "VPC has its endpoints",
        ),
    ],
)
def test_bad_private_settings_fail_with_one_clear_message(overrides, message):
    from config.settings import SettingsError, load_settings
    from tests.conftest import cdk_json_context

    with pytest.raises(SettingsError) as error:
        load_settings({**cdk_json_context(), **overrides})
    assert error.value.problems == [message]


# --- ECS in vpc mode ------------------------------------------------------------------------------
# The ECS target in network.mode=vpc: the service in the Foundation stack's private network (no
# route to the internet), the interface endpoints ECS needs made there only when a service runs on
# ECS, an internal load balancer for the caller CIDRs, and the data key on the task logs and the
# token. Checked with cdk-nag's three packs and cfn-lint; bad combinations fail with one clear
# message.


def test_internet_facing_in_vpc_mode_fails_with_a_clear_message():
    cert = "arn:aws:acm:us-east-1:123456789012:certificate/12345678-1234-1234-1234-123456789012"
    with pytest.raises(SettingsError) as caught:
        load_settings(
            {
                **cdk_json_context(),
                **PRIVATE_ECS,
                "ecs.load_balancer": "internet_facing",
                "ecs.certificate_arn": cert,
            }
        )
    assert caught.value.problems == [
        "ecs.load_balancer='internet_facing' with network.mode='vpc': the private network has no "
        "internet gateway; use ecs.load_balancer='internal' (callers reach it from the VPC, peered "
        "networks or on premises), or network.mode='public'"
    ]


def test_a_private_deployment_without_a_key_is_refused_before_synth():
    """network.mode=vpc applies the HIPAA and NIST packs, which fail every log group and bucket
    without a customer managed key: a settings problem naming both keys and the way out."""
    from tests.unit.config.conftest import problems_for

    problem = (
        "encryption.create_key=false with network.mode='vpc': a private deployment is held to "
        "cdk-nag's HIPAA Security and NIST 800-53 rev 5 checks, which need a customer managed "
        "key on its logs and buckets, so synth would fail; leave encryption.create_key unset "
        "(the stacks make a key) or set encryption.kms_key_arn to yours"
    )
    assert problem in problems_for(network__mode="vpc", encryption__create_key="false")
    key = "arn:aws:kms:us-east-1:123456789012:key/0f0e0d0c-0b0a-0908-0706-050403020100"
    given = load_settings(
        {
            **cdk_json_context(),
            "network.mode": "vpc",
            "encryption.create_key": "false",
            "encryption.kms_key_arn": key,
        }
    )
    assert given.uses_key and not given.makes_key
