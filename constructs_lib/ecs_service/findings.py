"""cdk-nag's and checkov's findings on the resources of
:class:`~constructs_lib.ecs_service.service.GpuEcsService`, each acknowledged on the resource it
concerns, with its reason. The functions take those resources, never the construct: service.py
imports this module, which imports neither construct (not even for type checking).
"""

from __future__ import annotations

from aws_cdk import (
    Acknowledgment,
    Annotations,
    Validations,
    aws_autoscaling as autoscaling,
    aws_ecs as ecs,
    aws_elasticloadbalancingv2 as elbv2,
    aws_iam as iam,
    aws_s3 as s3,
)
from constructs import Construct

from constructs_lib.ecs_service.props import LoadBalancing
from constructs_lib.nag import (
    CUSTOM_RESOURCE_HANDLER_SKIPS,
    acknowledge_compliance,
    skip_checkov,
    stack_singletons,
)


def acknowledge_roles(
    instance_role: iam.Role, task_role: iam.IRole, execution_role: iam.IRole, image_pull: bool
) -> None:
    """The instance, task and execution roles (``image_pull``: the execution role pulls from an
    ECR repository, :func:`~constructs_lib.ecs_service.service.grant_image_pull`)."""
    for role in (instance_role, task_role, execution_role):
        acknowledge_compliance(
            role,
            {
                "IAMNoInlinePolicy": "The instance, task and execution roles' statements are "
                "scoped to this service (its model prefix, metrics "
                "namespaces, repository, secret and cluster); an inline "
                "policy belongs to its one role and goes with it.",
            },
        )
    Validations.of(instance_role).acknowledge(
        Acknowledgment(
            id="AwsSolutions-IAM5[Resource::*]",
            reason="cloudwatch:PutMetricData (namespace condition) and ec2:DescribeTags "
            "support no resource-level permission; DescribeTags reads tags only (the "
            "CloudWatch agent's Auto Scaling group dimension).",
        ),
        Acknowledgment(
            id="AwsSolutions-IAM5[Action::ecs:Submit*]",
            reason="The statement the CDK gives ECS container instances (the container agent's "
            "own calls, as in AmazonEC2ContainerServiceforEC2Role); the agent reports "
            "task and container state changes.",
        ),
    )
    skip_checkov(
        instance_role,
        "AWS::IAM::Policy",
        {
            "CKV_AWS_111": "The container agent's statements CDK gives ECS instances (as "
            "AmazonEC2ContainerServiceforEC2Role: logs:PutLogEvents and ecs:Submit* "
            "for the agent), and PutMetricData, which supports no resource and is "
            "limited by a cloudwatch:namespace condition.",
        },
    )
    if image_pull:
        Validations.of(execution_role).acknowledge(
            Acknowledgment(
                id="AwsSolutions-IAM5[Resource::*]",
                reason="ecr:GetAuthorizationToken supports no resource-level permission; it "
                "only issues a registry login token, image access stays limited to one "
                "repository.",
            )
        )


def acknowledge_release_role(release_role: iam.Role, group_arn: str) -> None:
    """The role of the function that releases the instances' scale-in protection on destroy;
    ``group_arn``: the Auto Scaling group's ARN as cdk-nag renders it
    (:func:`constructs_lib.nag.nag_render`)."""
    Validations.of(release_role).acknowledge(
        Acknowledgment(
            id="AwsSolutions-IAM5[Resource::*]",
            reason="autoscaling:DescribeAutoScalingGroups supports no "
            "resource-level permission; it only reads the group's instances "
            "and their protection.",
        ),
        Acknowledgment(
            id=f"AwsSolutions-IAM5[Resource::{group_arn}]",
            reason="An Auto Scaling group ARN holds a generated id; the wildcard is "
            "that id, and the group is named exactly.",
        ),
    )


def acknowledge_capacity_and_task(
    auto_scaling_group: autoscaling.AutoScalingGroup,
    task_definition: ecs.TaskDefinition,
    container: ecs.ContainerDefinition,
    image_pull: bool,
) -> None:
    """The Auto Scaling group, the task definition's environment, and the container's image
    (``image_pull``: from an ECR registry URI, which the execution role may pull)."""
    Validations.of(auto_scaling_group).acknowledge(
        Acknowledgment(
            id="AwsSolutions-AS3",
            reason="Scaling events are driven by the ECS capacity provider and visible in ECS "
            "service events; the alarm topic carries the service's alarms.",
        )
    )
    Validations.of(task_definition).acknowledge(
        Acknowledgment(
            id="AwsSolutions-ECS2",
            reason="The environment holds configuration only (vLLM flags, metric names, the S3 "
            "prefix); the one secret, the bearer token, comes from Secrets Manager "
            "(secrets, not environment).",
        )
    )
    if image_pull:
        # CDK warns that an image from an ECR registry URI needs a pull policy: the execution
        # role has it (grant_image_pull, the image's repository only).
        Annotations.of(container).acknowledge_warning(
            "@aws-cdk/aws-ecs:ecrImageRequiresPolicy",
            "The execution role may pull from the image's repository (image_repository_arn).",
        )


def acknowledge_access_logs(scope: Construct, access_logs: s3.Bucket) -> None:
    """The load balancer's access-log bucket, and the function of ``scope``'s stack that empties
    it."""
    Validations.of(access_logs).acknowledge(
        Acknowledgment(
            id="AwsSolutions-S1",
            reason="This bucket receives the load balancer's access logs; logging it to itself "
            "would loop.",
        )
    )
    acknowledge_compliance(
        access_logs,
        {
            "S3BucketLoggingEnabled": "This bucket receives the load balancer's access logs; "
            "logging it would need another bucket whose logs go "
            "nowhere.",
            "S3DefaultEncryptionKMS": "Application Load Balancer access logs can be written to "
            "SSE-S3 buckets only (Elastic Load Balancing user guide, "
            "'Access logs for your Application Load Balancer').",
            "S3BucketVersioningEnabled": "Access logs are written once by Elastic Load "
            "Balancing and removed only by the lifecycle rule; there is no object to recover "
            "from an overwrite.",
            "S3BucketReplicationEnabled": "Access logs stay in the deployment's Region; "
            "copying "
            "them elsewhere is the user's choice, not a default.",
        },
    )
    skip_checkov(
        access_logs,
        "AWS::S3::Bucket",
        {
            "CKV_AWS_18": "This bucket receives the load balancer's access logs; logging it "
            "would need another bucket.",
            "CKV_AWS_21": "Access logs are written once by Elastic Load Balancing and removed "
            "only by the lifecycle rule.",
        },
    )
    for provider in stack_singletons(scope, "Custom::S3AutoDeleteObjects"):
        skip_checkov(provider, "AWS::Lambda::Function", CUSTOM_RESOURCE_HANDLER_SKIPS)


def acknowledge_load_balancer(
    load_balancer: elbv2.ApplicationLoadBalancer,
    listener: elbv2.ApplicationListener,
    lb: LoadBalancing,
) -> None:
    """The load balancer and its listener."""
    Validations.of(load_balancer).acknowledge(
        Acknowledgment(
            id="AwsSolutions-EC23",
            reason=(
                "An internet-facing load balancer takes callers from anywhere on 443 (HTTPS "
                "only); callers authenticate with the bearer token (required when "
                "internet-facing)."
                if lb.internet_facing
                else "An internal load balancer takes callers from the VPC's CIDR only (a "
                "deploy-time value cdk-nag cannot read)."
            ),
        )
    )
    acknowledge_compliance(
        load_balancer,
        {
            "ELBDeletionProtectionEnabled": "cdk destroy must remove the load balancer (it "
            "holds no data; its access logs are in their own bucket).",
            "ALBWAFEnabled": "Callers send WebSocket frames of audio after one upgrade "
            "request, "
            "which a web ACL does not inspect; the listener forwards two paths "
            "only and the bridge checks the bearer token before any work.",
        },
    )
    if lb.https:
        return
    acknowledge_compliance(
        load_balancer,
        {
            "ALBHttpToHttpsRedirection": "Internal load balancer without a certificate: HTTP "
            "on 80 "
            "inside the VPC, reachable from the caller CIDRs only. "
            "Set a certificate for HTTPS.",
            "ELBv2ACMCertificateRequired": "Internal load balancer without a certificate (HTTP "
            "inside the VPC); internet-facing needs one (the "
            "settings refuse otherwise).",
        },
    )
    skip_checkov(
        listener,
        "AWS::ElasticLoadBalancingV2::Listener",
        {
            "CKV_AWS_2": "Internal load balancer without a certificate: HTTP inside the VPC "
            "from the caller CIDRs only; set a certificate for HTTPS (internet-facing requires "
            "one).",
            "CKV_AWS_103": "No TLS listener without a certificate (internal, HTTP inside the "
            "VPC); with one the listener uses ELBSecurityPolicy-TLS13-1-2-2021-06.",
        },
    )
