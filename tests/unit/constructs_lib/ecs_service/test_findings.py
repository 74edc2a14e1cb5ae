"""constructs_lib/ecs_service/findings.py: each acknowledgement lands on the resource it concerns,
with its reason, and only where the finding applies (bare resources in a bare stack, no service)."""

from __future__ import annotations

from aws_cdk import (
    Duration,
    RemovalPolicy,
    aws_ec2 as ec2,
    aws_elasticloadbalancingv2 as elbv2,
    aws_iam as iam,
    aws_s3 as s3,
)
from aws_cdk.assertions import Template
from constructs import IConstruct

from constructs_lib.ecs_service.findings import (
    acknowledge_access_logs,
    acknowledge_load_balancer,
    acknowledge_release_role,
    acknowledge_roles,
)
from constructs_lib.ecs_service.props import LoadBalancing
from constructs_lib.nag import CUSTOM_RESOURCE_HANDLER_SKIPS
from tests.unit.constructs_lib.construct_kit import bare_stack

CERTIFICATE = "arn:aws:acm:us-east-1:123456789012:certificate/12345678-1234-1234-1234-123456789012"


def acknowledged(construct: IConstruct) -> dict[str, str]:
    """``{rule: reason}`` of the acknowledgements on ``construct`` itself."""
    return {
        rule: reason
        for entry in construct.node.metadata
        if entry.type == "aws:cdk:acknowledged-rules"
        for rule, reason in entry.data.items()
    }


def role(scope, name: str) -> iam.Role:
    made = iam.Role(scope, name, assumed_by=iam.ServicePrincipal("ec2.amazonaws.com"))  # pyright: ignore[reportArgumentType] (jsii binding: parameter names differ from the interface's)
    made.add_to_policy(iam.PolicyStatement(actions=["ec2:DescribeTags"], resources=["*"]))
    return made


def test_an_http_listener_is_acknowledged_as_internal_without_a_certificate_and_https_is_not():
    def build(lb: LoadBalancing) -> tuple[dict[str, str], dict]:
        stack = bare_stack()
        load_balancer = elbv2.ApplicationLoadBalancer(
            stack, "LoadBalancer", vpc=ec2.Vpc(stack, "Vpc", max_azs=2)
        )
        listener = load_balancer.add_listener(
            "Listener",
            port=443 if lb.https else 80,
            certificates=[elbv2.ListenerCertificate.from_arn(CERTIFICATE)] if lb.https else None,
            open=False,
            default_action=elbv2.ListenerAction.fixed_response(404),
        )
        acknowledge_load_balancer(load_balancer, listener, lb)
        (resource,) = (
            Template.from_stack(stack)
            .find_resources("AWS::ElasticLoadBalancingV2::Listener")
            .values()
        )
        return acknowledged(load_balancer), resource.get("Metadata", {})

    http, http_listener = build(LoadBalancing())
    https, https_listener = build(LoadBalancing(certificate_arn=CERTIFICATE))
    assert http["Annotation::AwsSolutions-EC23"].startswith(
        "An internal load balancer takes callers from the VPC's CIDR only"
    )
    assert set(http) - set(https) == {
        f"Annotation::{pack}-{rule}"
        for pack in ("HIPAA.Security", "NIST.800.53.R5")
        for rule in ("ALBHttpToHttpsRedirection", "ELBv2ACMCertificateRequired")
    }
    assert [skip["id"] for skip in http_listener["checkov"]["skip"]] == ["CKV_AWS_2", "CKV_AWS_103"]
    assert "checkov" not in https_listener


def test_the_execution_role_is_acknowledged_for_its_registry_login_only_when_it_pulls():
    stack = bare_stack()
    instance, task, execution = role(stack, "Instance"), role(stack, "Task"), role(stack, "Exec")
    acknowledge_roles(instance, task, execution, image_pull=False)
    assert "Annotation::AwsSolutions-IAM5[Resource::*]" not in acknowledged(execution)
    assert set(acknowledged(instance)) >= {
        "Annotation::AwsSolutions-IAM5[Resource::*]",
        "Annotation::AwsSolutions-IAM5[Action::ecs:Submit*]",
    }
    pulling = role(stack, "PullingExec")
    acknowledge_roles(role(stack, "Instance2"), role(stack, "Task2"), pulling, image_pull=True)
    assert acknowledged(pulling)["Annotation::AwsSolutions-IAM5[Resource::*]"].startswith(
        "ecr:GetAuthorizationToken supports no resource-level permission"
    )
    policies = Template.from_stack(stack).find_resources("AWS::IAM::Policy")
    instance_policy = next(p for i, p in policies.items() if i.startswith("InstanceDefaultPolicy"))
    assert [s["id"] for s in instance_policy["Metadata"]["checkov"]["skip"]] == ["CKV_AWS_111"]


def test_the_release_role_is_acknowledged_for_the_group_arn_it_is_given():
    release = role(bare_stack(), "Release")
    group = "arn:<AWS::Partition>:autoscaling:us-east-1:123456789012:autoScalingGroup:*"
    acknowledge_release_role(release, group)
    assert set(acknowledged(release)) == {
        "Annotation::AwsSolutions-IAM5[Resource::*]",
        f"Annotation::AwsSolutions-IAM5[Resource::{group}]",
    }


def test_the_access_logs_bucket_and_the_stacks_emptying_function_are_acknowledged():
    stack = bare_stack()
    bucket = s3.Bucket(
        stack,
        "AccessLogs",
        auto_delete_objects=True,
        removal_policy=RemovalPolicy.DESTROY,
        lifecycle_rules=[s3.LifecycleRule(expiration=Duration.days(30))],
    )
    acknowledge_access_logs(stack, bucket)
    assert acknowledged(bucket)["Annotation::AwsSolutions-S1"].startswith(
        "This bucket receives the load balancer's access logs"
    )
    template = Template.from_stack(stack)
    (bucket_resource,) = template.find_resources("AWS::S3::Bucket").values()
    assert [s["id"] for s in bucket_resource["Metadata"]["checkov"]["skip"]] == [
        "CKV_AWS_18",
        "CKV_AWS_21",
    ]
    (handler,) = template.find_resources("AWS::Lambda::Function").values()
    assert [s["id"] for s in handler["Metadata"]["checkov"]["skip"]] == list(
        CUSTOM_RESOURCE_HANDLER_SKIPS
    )
