"""constructs_lib/network/props.py: the private network's and the data key's props checked without
aws_cdk (the rules the PrivateNetwork construct reports together: test_private_network.py)."""

from __future__ import annotations

import pytest

from constructs_lib.network.props import (
    DEFAULT_VPC_CIDR,
    DataKeyProps,
    ExistingVpc,
    PrivateNetworkProps,
    check_cidr,
)
from constructs_lib.validation import Problems

SUBNETS = ["subnet-0123456789abcdef0", "subnet-0123456789abcdef1"]
ZONES = ["us-east-1a", "us-east-1b"]
TABLES = ["rtb-0123456789abcdef0", "rtb-0123456789abcdef1"]


def problems(props, region: str | None = "us-east-1") -> list[str]:
    p = Problems()
    props.problems(p, region)
    return list(p)


def test_the_defaults_and_a_complete_existing_vpc_are_accepted():
    assert (
        problems(PrivateNetworkProps()) == []
        and PrivateNetworkProps().cidr == DEFAULT_VPC_CIDR == "10.80.0.0/16"
    )
    vpc = ExistingVpc("vpc-0123456789abcdef0", SUBNETS, ZONES, "10.1.0.0/16", TABLES)
    assert (
        problems(PrivateNetworkProps(existing_vpc=vpc)) == []
        and PrivateNetworkProps(existing_vpc=vpc).cidr == "10.1.0.0/16"
    )
    # Without endpoints made here, no route tables are needed.
    no_tables = ExistingVpc("vpc-0123456789abcdef0", SUBNETS, ZONES, "10.1.0.0/16")
    assert problems(PrivateNetworkProps(existing_vpc=no_tables, create_endpoints=False)) == []


@pytest.mark.parametrize(
    "value, vpc, expected",
    [
        ("10.0.0.0/16", True, []),
        (
            "10.0.0.0/8",
            True,
            ["c='10.0.0.0/8': must have a prefix length between /16 and /28 (a VPC's CIDR block)"],
        ),
        ("10.0.0.0/8", False, []),
        (
            "10.0.0.1/16",
            False,
            ["c='10.0.0.1/16': must be an IPv4 CIDR block such as '10.80.0.0/16' (host bits zero)"],
        ),
    ],
)
def test_a_cidr_block(value, vpc, expected):
    p = Problems()
    check_cidr(p, "c", value, vpc=vpc)
    assert list(p) == expected


def test_a_new_vpc_needs_two_zones_and_groups_must_be_ids():
    assert problems(
        PrivateNetworkProps(max_azs=1, security_group_ids=["sg-1", "sg-0123456789abcdef0"])
    ) == [
        "max_azs=1: must be at least 2 (SageMaker hosting in a VPC needs subnets in two "
        "Availability Zones)",
        'security_group_ids=["sg-1", "sg-0123456789abcdef0"]: must be security group ids such as '
        "'sg-0123456789abcdef0'; not: 'sg-1'",
    ]


def test_each_subnet_needs_its_zone_and_route_table():
    vpc = ExistingVpc(
        "vpc-0123456789abcdef0", SUBNETS, ["us-east-1a"], "10.1.0.0/16", ["rtb-1", "rtb-2"]
    )
    assert problems(PrivateNetworkProps(existing_vpc=vpc)) == [
        'availability_zones=["us-east-1a"]: must name the zone of each of the 2 subnet(s), '
        "in the order of "
        "subnet_ids",
        'route_table_ids=["rtb-1", "rtb-2"]: must be route table ids such as '
        "'rtb-0123456789abcdef0'; not: "
        "'rtb-1', 'rtb-2'",
    ]


def test_endpoints_for_ecs_or_connect_are_made_only_with_the_others():
    assert problems(
        PrivateNetworkProps(create_endpoints=False, ecs_endpoints=True, connect_endpoints=True)
    ) == [
        "ecs_endpoints=true: needs create_endpoints=true (the endpoints are made here)",
        "connect_endpoints=true: needs create_endpoints=true (the endpoints are made here)",
    ]


def test_keys_are_key_arns_of_the_region():
    key = "arn:aws:kms:eu-west-1:123456789012:key/0f0e0d0c-0b0a-0908-0706-050403020100"
    assert problems(DataKeyProps(kms_key_arn=key)) == [
        f"kms_key_arn={key!r}: the key is in eu-west-1 but the stack deploys to us-east-1"
    ]
    assert problems(DataKeyProps(kms_key_arn=key), region="eu-west-1") == []
    assert problems(PrivateNetworkProps(kms_key_arn=key)) == [
        f"kms_key_arn={key!r}: the key is in eu-west-1 but the stack deploys to us-east-1"
    ]
