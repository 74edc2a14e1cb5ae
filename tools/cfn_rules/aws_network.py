"""The rule book's network rules: Elastic Load Balancing (E94xx: load balancer and target
group attributes, health checks, the access-log bucket) and EC2 (E95xx: security group text,
VPC endpoints) (:mod:`aws_rules` says what the book is)."""

from __future__ import annotations

import functools
import json
import re
import sys
from pathlib import Path
from typing import ClassVar

from cfnlint.rules import CloudFormationLintRule

# cfn-lint imports this file by its path (``--append-rules``), not as a package: make its helper
# importable.
if str(Path(__file__).resolve().parent) not in sys.path:
    sys.path.insert(0, str(Path(__file__).resolve().parent))

import _template as t
from _template import TemplateRule

ELB_API = "https://docs.aws.amazon.com/elasticloadbalancing/latest/APIReference"
EC2_API = "https://docs.aws.amazon.com/AWSEC2/latest/APIReference"


# -------------------------------------------------------------------------------------------- ELBv2
class LoadBalancerAttributes(TemplateRule, CloudFormationLintRule):
    id = "E9401"
    shortdesc = (
        "ELBv2 attributes: idle_timeout.timeout_seconds 1-4000; "
        "deregistration_delay.timeout_seconds 0-3600; an Application Load Balancer needs subnets "
        "in at least two Availability Zones"
    )
    description = (
        "LoadBalancerAttribute / TargetGroupAttribute keys and ranges; CreateLoadBalancer "
        "Subnets: '[Application Load Balancers] You must specify subnets from at least two "
        "Availability Zones.'"
    )
    source_url = f"{ELB_API}/API_LoadBalancerAttribute.html"
    tags: ClassVar[list[str]] = ["elbv2"]

    def findings(self, template):
        for lid, props in t.resources(
            template, "AWS::ElasticLoadBalancingV2::LoadBalancer"
        ).items():
            where = ("Resources", lid, "Properties")
            idle = t.literal_int(t.attributes(props).get("idle_timeout.timeout_seconds"))
            if idle is not None and not 1 <= idle <= 4000:
                yield (*where, "LoadBalancerAttributes"), f"idle timeout {idle} s is outside 1-4000"
            subnets = props.get("Subnets") or props.get("SubnetMappings")
            if (
                props.get("Type", "application") == "application"
                and isinstance(subnets, list)
                and len(subnets) < 2
            ):
                yield (
                    (*where, "Subnets"),
                    "an Application Load Balancer needs subnets in two Availability Zones",
                )
        for lid, props in t.resources(template, "AWS::ElasticLoadBalancingV2::TargetGroup").items():
            attributes = t.attributes(props, "TargetGroupAttributes")
            delay = t.literal_int(attributes.get("deregistration_delay.timeout_seconds"))
            if delay is not None and not 0 <= delay <= 3600:
                yield (
                    ("Resources", lid, "Properties", "TargetGroupAttributes"),
                    f"deregistration delay {delay} s is outside 0-3600",
                )


class TargetGroupHealthCheck(TemplateRule, CloudFormationLintRule):
    id = "E9402"
    shortdesc = (
        "CreateTargetGroup: health check interval 5-300 s, timeout 2-120 s and shorter than the "
        "interval, healthy and unhealthy thresholds 2-10, HTTP/HTTPS matcher codes 200-499"
    )
    description = (
        "CreateTargetGroup HealthCheckIntervalSeconds, HealthCheckTimeoutSeconds, "
        "HealthyThresholdCount, UnhealthyThresholdCount, Matcher. Timeout shorter than interval: "
        "the API refuses otherwise (ValidationError 'Health check interval must be greater than "
        "the timeout'; unconfirmed in the reference's prose)."
    )
    source_url = f"{ELB_API}/API_CreateTargetGroup.html"
    tags: ClassVar[list[str]] = ["elbv2"]

    RANGES: ClassVar[dict[str, tuple[int, int]]] = {
        "HealthCheckIntervalSeconds": (5, 300),
        "HealthCheckTimeoutSeconds": (2, 120),
        "HealthyThresholdCount": (2, 10),
        "UnhealthyThresholdCount": (2, 10),
    }

    def findings(self, template):
        for lid, props in t.resources(template, "AWS::ElasticLoadBalancingV2::TargetGroup").items():
            where = ("Resources", lid, "Properties")
            for key, (low, high) in self.RANGES.items():
                value = t.literal_int(props.get(key))
                if value is not None and not low <= value <= high:
                    yield (*where, key), f"{key} {value} is outside {low}-{high}"
            interval = t.literal_int(props.get("HealthCheckIntervalSeconds"))
            timeout = t.literal_int(props.get("HealthCheckTimeoutSeconds"))
            if interval is not None and timeout is not None and timeout >= interval:
                yield (
                    (*where, "HealthCheckTimeoutSeconds"),
                    (f"timeout {timeout} s is not below the interval {interval} s"),
                )
            code = (props.get("Matcher") or {}).get("HttpCode")
            if props.get("Protocol") in ("HTTP", "HTTPS") and isinstance(code, str):
                for part in re.split(r"[,-]", code):
                    if part.isdigit() and not 200 <= int(part) <= 499:
                        yield (*where, "Matcher"), f"HTTP code {part} is outside 200-499"


@functools.cache
def elb_log_accounts() -> frozenset[str]:
    """Elastic Load Balancing's account of each Region that has one (the Regions available before
    August 2022; newer ones use the log delivery service principal), from the CDK's own region facts
    (aws_cdk.region_info, ``elbv2_account``), which follow the table on the page of
    :class:`AccessLogBucket`."""
    from aws_cdk.region_info import RegionInfo

    return frozenset(r.elbv2_account for r in RegionInfo.regions if r.elbv2_account)


ELB_LOG_PRINCIPAL = "logdelivery.elasticloadbalancing.amazonaws.com"


class AccessLogBucket(TemplateRule, CloudFormationLintRule):
    id = "E9403"
    shortdesc = (
        "ALB access logs: the bucket's only supported server-side encryption is SSE-S3 (not "
        "SSE-KMS), the prefix must not include AWSLogs, and the bucket policy grants "
        "s3:PutObject on <prefix>/AWSLogs/<account>/* to the Region's Elastic Load Balancing "
        "account or to logdelivery.elasticloadbalancing.amazonaws.com"
    )
    description = (
        "Elastic Load Balancing user guide, 'Enable access logs for your Application Load "
        "Balancer'."
    )
    source_url = "https://docs.aws.amazon.com/elasticloadbalancing/latest/application/enable-access-logging.html"
    tags: ClassVar[list[str]] = ["elbv2", "s3"]

    def findings(self, template):
        buckets = t.resources(template, "AWS::S3::Bucket")
        policies = t.resources(template, "AWS::S3::BucketPolicy")
        for lid, props in t.resources(
            template, "AWS::ElasticLoadBalancingV2::LoadBalancer"
        ).items():
            attrs = t.attributes(props)
            if t.literal_bool(attrs.get("access_logs.s3.enabled")) is not True:
                continue
            where = ("Resources", lid, "Properties", "LoadBalancerAttributes")
            prefix = attrs.get("access_logs.s3.prefix") or ""
            if isinstance(prefix, str) and "AWSLogs" in prefix:
                yield where, f"the access log prefix {prefix!r} must not include AWSLogs"
            bucket_id = t.ref_target(template, attrs.get("access_logs.s3.bucket"))
            if bucket_id is None or bucket_id not in buckets:
                continue  # a bucket of another stack or account: not visible here
            rules = (buckets[bucket_id].get("BucketEncryption") or {}).get(
                "ServerSideEncryptionConfiguration"
            ) or []
            for rule in rules:
                algorithm = (rule.get("ServerSideEncryptionByDefault") or {}).get("SSEAlgorithm")
                if algorithm not in (None, "AES256"):
                    yield (
                        ("Resources", bucket_id, "Properties", "BucketEncryption"),
                        (
                            f"access-log bucket encrypted with {algorithm}: ALB access logs "
                            "support SSE-S3 only"
                        ),
                    )
            statements = [
                s
                for p in policies.values()
                if t.ref_target(template, p.get("Bucket")) == bucket_id
                for s in t.as_list((p.get("PolicyDocument") or {}).get("Statement"))
            ]
            if not any(self._grants_delivery(s, prefix) for s in statements):
                yield (
                    where,
                    (
                        f"the policy of {bucket_id} grants s3:PutObject on "
                        f"{prefix or ''}/AWSLogs/<account>/* to neither the Region's ELB account "
                        "nor " + ELB_LOG_PRINCIPAL
                    ),
                )

    @staticmethod
    def _grants_delivery(statement: dict, prefix: str) -> bool:
        if statement.get("Effect") != "Allow" or "s3:PutObject" not in t.as_list(
            statement.get("Action")
        ):
            return False
        principal = statement.get("Principal") or {}
        text = repr(principal.get("AWS")) + repr(principal.get("Service"))
        by_account = any(account in text for account in elb_log_accounts())
        if not (by_account or ELB_LOG_PRINCIPAL in text):
            return False
        resources = [t.joined_text(r) or "" for r in t.as_list(statement.get("Resource"))]
        wanted = f"/{prefix}/AWSLogs/" if prefix else "/AWSLogs/"
        return any(wanted in r for r in resources)


# ---------------------------------------------------------------------------------------------- EC2
SG_TEXT = re.compile(r"[a-zA-Z0-9 ._\-:/()#,@\[\]+=&;{}!$*]{0,255}")


class SecurityGroupText(TemplateRule, CloudFormationLintRule):
    id = "E9501"
    shortdesc = (
        "Security groups: descriptions (of the group and of each rule) are up to 255 characters "
        "of a-z, A-Z, 0-9, spaces and ._-:/()#,@[]+=&;{}!$*; a group name can't start with sg-; "
        "FromPort <= ToPort"
    )
    description = (
        "CreateSecurityGroup Description and GroupName; IpRange.Description; IpPermission."
    )
    source_url = f"{EC2_API}/API_CreateSecurityGroup.html"
    tags: ClassVar[list[str]] = ["ec2"]

    def findings(self, template):
        def rule_findings(where, rule):
            description = rule.get("Description")
            if isinstance(description, str) and not SG_TEXT.fullmatch(description):
                yield (
                    (*where, "Description"),
                    f"rule description {description!r} has characters EC2 refuses",
                )
            low, high = t.literal_int(rule.get("FromPort")), t.literal_int(rule.get("ToPort"))
            if (
                str(rule.get("IpProtocol")) not in ("-1", "icmp", "icmpv6", "1", "58")
                and low is not None
                and high is not None
                and low > high
            ):
                yield (*where, "FromPort"), f"FromPort {low} exceeds ToPort {high}"

        for lid, props in t.resources(template, "AWS::EC2::SecurityGroup").items():
            where = ("Resources", lid, "Properties")
            description = props.get("GroupDescription")
            if isinstance(description, str) and not SG_TEXT.fullmatch(description):
                yield (
                    (*where, "GroupDescription"),
                    f"{description!r} has characters EC2 refuses (or is too long)",
                )
            name = props.get("GroupName")
            if isinstance(name, str) and (
                name.lower().startswith("sg-") or not SG_TEXT.fullmatch(name)
            ):
                yield (*where, "GroupName"), f"group name {name!r} is not allowed"
            for key in ("SecurityGroupIngress", "SecurityGroupEgress"):
                for i, rule in enumerate(t.as_list(props.get(key))):
                    yield from rule_findings((*where, key, i), rule)
        for kind in ("AWS::EC2::SecurityGroupIngress", "AWS::EC2::SecurityGroupEgress"):
            for lid, props in t.resources(template, kind).items():
                yield from rule_findings(("Resources", lid, "Properties"), props)


class VpcEndpointDns(TemplateRule, CloudFormationLintRule):
    id = "E9502"
    shortdesc = (
        "CreateVpcEndpoint: private DNS on an interface endpoint needs the VPC attributes "
        "enableDnsHostnames and enableDnsSupport true; subnets and security groups are for "
        "interface endpoints (one subnet per Availability Zone), route tables for gateway "
        "endpoints"
    )
    description = (
        "CreateVpcEndpoint PrivateDnsEnabled: 'To use a private hosted zone, you must set the "
        "following VPC attributes to true: enableDnsHostnames and enableDnsSupport.' "
        "RouteTableIds: '(Gateway endpoint)'; SubnetIds, SecurityGroupIds: '(Interface "
        "endpoint)'. One subnet per Availability Zone: AWS PrivateLink guide, 'Create an "
        "interface endpoint'."
    )
    source_url = f"{EC2_API}/API_CreateVpcEndpoint.html"
    tags: ClassVar[list[str]] = ["ec2"]

    def findings(self, template):
        vpcs = t.resources(template, "AWS::EC2::VPC")
        subnets = t.resources(template, "AWS::EC2::Subnet")
        for lid, props in t.resources(template, "AWS::EC2::VPCEndpoint").items():
            where = ("Resources", lid, "Properties")
            kind = props.get("VpcEndpointType", "Gateway")
            if kind == "Interface" and t.literal_bool(props.get("PrivateDnsEnabled")) is True:
                vpc = vpcs.get(t.ref_target(template, props.get("VpcId")) or "")
                if vpc is not None:
                    for attribute in ("EnableDnsHostnames", "EnableDnsSupport"):
                        default = (
                            attribute == "EnableDnsSupport"
                        )  # EC2 defaults: support on, hostnames off
                        if t.literal_bool(vpc.get(attribute, default)) is not True:
                            yield (
                                (*where, "PrivateDnsEnabled"),
                                f"private DNS needs the VPC's {attribute} true",
                            )
            if kind == "Gateway":
                for key in ("SubnetIds", "SecurityGroupIds", "PrivateDnsEnabled"):
                    if key in props:
                        yield (
                            (*where, key),
                            f"{key} is for interface endpoints, not gateway endpoints",
                        )
            elif kind == "Interface" and "RouteTableIds" in props:
                yield (*where, "RouteTableIds"), "RouteTableIds is for gateway endpoints"
            if kind == "Interface":
                zones = [
                    repr(subnets[s].get("AvailabilityZone"))
                    for s in (t.ref_target(template, x) for x in t.as_list(props.get("SubnetIds")))
                    if s in subnets
                ]
                if len(set(zones)) != len(zones):
                    yield (
                        (*where, "SubnetIds"),
                        "an interface endpoint takes one subnet per Availability Zone",
                    )


class OneEndpointPerServiceInAVpc(TemplateRule, CloudFormationLintRule):
    id = "E9503"
    shortdesc = (
        "CreateVpcEndpoint: one interface endpoint with private DNS per service in a VPC (its "
        "private hosted zone holds the service's default DNS name); one gateway endpoint per "
        "service on a route table"
    )
    description = (
        "CreateVpcEndpoint PrivateDnsEnabled associates 'a private hosted zone' holding 'the "
        "default public DNS name for the service for the Region' with the VPC: a second endpoint "
        "with private DNS for that service in the VPC is refused (EC2 answers that there is "
        "already a conflicting DNS domain). Gateway endpoints (Amazon VPC user guide, 'Gateway "
        "endpoints'): a route table cannot hold routes to one service through two endpoints. "
        "Checked within one template."
    )
    source_url = f"{EC2_API}/API_CreateVpcEndpoint.html"
    tags: ClassVar[list[str]] = ["ec2"]

    def findings(self, template):
        seen: dict[tuple[str, str], str] = {}
        tables: dict[tuple[str, str], str] = {}
        for lid, props in t.resources(template, "AWS::EC2::VPCEndpoint").items():
            where = ("Resources", lid, "Properties")
            kind = props.get("VpcEndpointType", "Gateway")
            service = json.dumps(props.get("ServiceName"), sort_keys=True)
            if kind == "Interface" and t.literal_bool(props.get("PrivateDnsEnabled")) is True:
                key = (json.dumps(props.get("VpcId"), sort_keys=True), service)
                if key in seen:
                    yield (
                        (*where, "ServiceName"),
                        f"{seen[key]} has private DNS for this service in the VPC already",
                    )
                seen.setdefault(key, lid)
            elif kind == "Gateway":
                for table in t.as_list(props.get("RouteTableIds")):
                    key = (json.dumps(table, sort_keys=True), service)
                    if key in tables:
                        yield (
                            (*where, "RouteTableIds"),
                            f"{tables[key]} routes this service on {table} already",
                        )
                    tables.setdefault(key, lid)


#: Every rule of this module, in id order.
RULES = t.rules_of(globals())
