"""The rule book's network rules (tools/cfn_rules/aws_network.py: Elastic Load Balancing and EC2):
each rule fails on a template written to break it and holds on the same template mended
(test_aws_rules.py holds the book as a whole)."""

from __future__ import annotations

import pytest

from tests.unit.tools.cfn_rules.book_kit import findings, template
from tools.cfn_rules import _gate  # noqa: F401  (puts the rule modules on sys.path)

# isort: split

import aws_network


def load_balancer(
    idle="70", logs=True, prefix="alb", sse="AES256", grantee=None, delay="25", subnets=2
) -> dict:
    attributes = [{"Key": "idle_timeout.timeout_seconds", "Value": idle}]
    if logs:
        attributes += [
            {"Key": "access_logs.s3.enabled", "Value": "true"},
            {"Key": "access_logs.s3.bucket", "Value": {"Ref": "Logs"}},
            {"Key": "access_logs.s3.prefix", "Value": prefix},
        ]
    principal = grantee or {
        "AWS": {"Fn::Join": ["", ["arn:", {"Ref": "AWS::Partition"}, ":iam::127311923021:root"]]}
    }
    return template(
        Balancer=(
            "AWS::ElasticLoadBalancingV2::LoadBalancer",
            {
                "Type": "application",
                "Subnets": [f"subnet-{i}" for i in range(subnets)],
                "LoadBalancerAttributes": attributes,
            },
        ),
        Logs=(
            "AWS::S3::Bucket",
            {
                "BucketEncryption": {
                    "ServerSideEncryptionConfiguration": [
                        {"ServerSideEncryptionByDefault": {"SSEAlgorithm": sse}}
                    ]
                }
            },
        ),
        LogsPolicy=(
            "AWS::S3::BucketPolicy",
            {
                "Bucket": {"Ref": "Logs"},
                "PolicyDocument": {
                    "Statement": [
                        {
                            "Effect": "Allow",
                            "Action": "s3:PutObject",
                            "Principal": principal,
                            "Resource": {
                                "Fn::Join": [
                                    "",
                                    [
                                        {"Fn::GetAtt": ["Logs", "Arn"]},
                                        f"/{prefix}/AWSLogs/",
                                        {"Ref": "AWS::AccountId"},
                                        "/*",
                                    ],
                                ]
                            },
                        }
                    ]
                },
            },
        ),
        Targets=(
            "AWS::ElasticLoadBalancingV2::TargetGroup",
            {
                "Protocol": "HTTP",
                "HealthCheckIntervalSeconds": 10,
                "HealthCheckTimeoutSeconds": 5,
                "TargetGroupAttributes": [
                    {"Key": "deregistration_delay.timeout_seconds", "Value": delay}
                ],
            },
        ),
    )


def target_group(**props) -> dict:
    return template(
        Targets=(
            "AWS::ElasticLoadBalancingV2::TargetGroup",
            {
                "Protocol": "HTTP",
                "HealthCheckIntervalSeconds": 10,
                "HealthCheckTimeoutSeconds": 5,
                "Matcher": {"HttpCode": "200"},
                **props,
            },
        )
    )


def security_group(
    description="Tasks of voxtral-realtime", rule_description="Callers", low=80, high=80, **props
):
    return template(
        Group=(
            "AWS::EC2::SecurityGroup",
            {
                "GroupDescription": description,
                "SecurityGroupIngress": [
                    {
                        "IpProtocol": "tcp",
                        "FromPort": low,
                        "ToPort": high,
                        "CidrIp": "10.0.0.0/16",
                        "Description": rule_description,
                    }
                ],
                **props,
            },
        )
    )


def endpoints(hostnames=True, support=True, kind="Interface", **props) -> dict:
    endpoint = {
        "VpcId": {"Ref": "Vpc"},
        "VpcEndpointType": kind,
        "ServiceName": "com.amazonaws.us-east-1.ecr.api",
    }
    if kind == "Interface":
        endpoint.update({"PrivateDnsEnabled": True, "SubnetIds": ["s"]})
    else:
        endpoint["RouteTableIds"] = ["r"]
    endpoint.update(props)
    return template(
        Vpc=(
            "AWS::EC2::VPC",
            {
                "CidrBlock": "10.0.0.0/16",
                "EnableDnsHostnames": hostnames,
                "EnableDnsSupport": support,
            },
        ),
        Endpoint=("AWS::EC2::VPCEndpoint", endpoint),
    )


def zoned_endpoint(*zones: str) -> dict:
    tpl = endpoints(SubnetIds=[{"Ref": f"Subnet{i}"} for i in range(len(zones))])
    for i, zone in enumerate(zones):
        tpl["Resources"][f"Subnet{i}"] = {
            "Type": "AWS::EC2::Subnet",
            "Properties": {
                "AvailabilityZone": {"Fn::Select": [ord(zone) - ord("a"), {"Fn::GetAZs": ""}]}
            },
        }
    return tpl


def twice(kind="Interface", **second) -> dict:
    """Two endpoints of one service in one VPC; ``second``: what the second one has instead."""
    tpl = endpoints(kind=kind)
    tpl["Resources"]["Again"] = {
        "Type": "AWS::EC2::VPCEndpoint",
        "Properties": {**tpl["Resources"]["Endpoint"]["Properties"], **second},
    }
    return tpl


#: (rule, a template that breaks it, a piece of the finding, the same template mended).
CASES = [
    (
        aws_network.LoadBalancerAttributes,
        load_balancer(idle="4001"),
        "outside 1-4000",
        load_balancer(idle="4000"),
    ),
    (
        aws_network.LoadBalancerAttributes,
        load_balancer(delay="3601"),
        "outside 0-3600",
        load_balancer(delay="3600"),
    ),
    (
        aws_network.LoadBalancerAttributes,
        load_balancer(subnets=1),
        "two Availability Zones",
        load_balancer(),
    ),
    (
        aws_network.TargetGroupHealthCheck,
        target_group(HealthCheckTimeoutSeconds=10),
        "not below the interval",
        target_group(),
    ),
    (
        aws_network.TargetGroupHealthCheck,
        target_group(HealthyThresholdCount=1),
        "outside 2-10",
        target_group(),
    ),
    (
        aws_network.TargetGroupHealthCheck,
        target_group(Matcher={"HttpCode": "200-599"}),
        "outside 200-499",
        target_group(Matcher={"HttpCode": "200-499"}),
    ),
    (aws_network.AccessLogBucket, load_balancer(sse="aws:kms"), "SSE-S3 only", load_balancer()),
    (
        aws_network.AccessLogBucket,
        load_balancer(prefix="AWSLogs"),
        "must not include AWSLogs",
        load_balancer(),
    ),
    (
        aws_network.AccessLogBucket,
        load_balancer(grantee={"Service": "delivery.logs.amazonaws.com"}),
        "neither the Region's ELB account",
        load_balancer(grantee={"Service": aws_network.ELB_LOG_PRINCIPAL}),
    ),
    (
        aws_network.SecurityGroupText,
        security_group("Tasks of voxtral-realtime: the bridge port, not 8443 → 8080"),
        "characters EC2 refuses",
        security_group("Tasks of voxtral-realtime: the bridge port, not 8443 to 8080"),
    ),
    (
        aws_network.SecurityGroupText,
        security_group(rule_description="callers’ CIDR"),  # noqa: RUF001 (the quote is the point)
        "characters EC2 refuses",
        security_group(rule_description="callers CIDR"),
    ),
    (
        aws_network.SecurityGroupText,
        security_group(low=8443, high=8080),
        "exceeds ToPort",
        security_group(low=8080, high=8443),
    ),
    (
        aws_network.SecurityGroupText,
        security_group(GroupName="sg-bridge"),
        "not allowed",
        security_group(GroupName="bridge"),
    ),
    (aws_network.VpcEndpointDns, endpoints(hostnames=False), "EnableDnsHostnames", endpoints()),
    (
        aws_network.VpcEndpointDns,
        endpoints(kind="Gateway", SubnetIds=["s"]),
        "for interface endpoints",
        endpoints(kind="Gateway"),
    ),
    (
        aws_network.VpcEndpointDns,
        zoned_endpoint("a", "a"),
        "one subnet per Availability Zone",
        zoned_endpoint("a", "b"),
    ),
    (
        aws_network.OneEndpointPerServiceInAVpc,
        twice(),
        "has private DNS for this service in the VPC already",
        twice(PrivateDnsEnabled=False),
    ),
    (
        aws_network.OneEndpointPerServiceInAVpc,
        twice(kind="Gateway"),
        "routes this service on",
        twice(kind="Gateway", RouteTableIds=["other"]),
    ),
]


@pytest.mark.parametrize(
    ("rule", "broken", "expected", "mended"), CASES, ids=[f"{c[0].id}-{c[2][:24]}" for c in CASES]
)
def test_rule_fails_the_template_written_to_break_it_and_passes_it_mended(
    rule, broken, expected, mended
):
    found = findings(rule, broken)
    assert any(expected in message for message in found), found
    assert findings(rule, mended) == []
