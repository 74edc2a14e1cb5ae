"""Assertions that read more than one stack of an app with Amazon Connect: the VPC endpoints the
Connect consumers call, whichever stack makes them, the shared operations dashboard's Connect row,
and the data key's EventBridge statements (the rest of the cross-stack assertions:
test_cross_stack.py)."""

from __future__ import annotations

import json
import re

import pytest

from tests.app.kit import (  # noqa: F401 (fixtures)
    fixture_own_vpc,
    resources,
)
from tests.conftest import ROOT

# --- Connect ------------------------------------------------------------------------------------
# The <prefix>-Connect stack's template: least privilege, the Connect resources as the references
# require, removal policies, and cfn-lint in both network modes (cdk-nag runs as part of the synth
# and fails it on any finding).


#: boto3 client name -> the VPC endpoint service (``com.amazonaws.REGION.<suffix>``) its calls go
#: to.
CLIENT_ENDPOINT = {
    "sqs": "sqs",
    "events": "events",
    "dynamodb": "dynamodb",
    "kinesisvideo": "kinesisvideo",
    "kinesis-video-media": "kinesisvideo",
    "secretsmanager": "secretsmanager",
}


#: What a Fargate task (platform 1.4.0+) calls before the code runs and beside it (Amazon ECR user
#: guide, "Amazon ECR interface VPC endpoints", considerations for Fargate: ecr.api, ecr.dkr, the S3
#: gateway; logs for awslogs), and the SageMaker runtime the consumers stream to
#: (voice_client.sagemaker_stream).
PLATFORM_ENDPOINTS = {"ecr.api", "ecr.dkr", "s3", "logs", "sagemaker.runtime"}


def endpoint_services(synthesized) -> list[tuple[str, str, dict]]:
    """``(service suffix, stack, properties)`` of every VPC endpoint of the app (ServiceName is a
    literal or a join of ``com.amazonaws.``, the region, and the suffix)."""
    found = []
    for stack_name, template in synthesized.templates.items():
        for endpoint in resources(template, "AWS::EC2::VPCEndpoint").values():
            name = endpoint["Properties"]["ServiceName"]
            text = (
                name
                if isinstance(name, str)
                else "".join(
                    part if isinstance(part, str) else "REGION" for part in name["Fn::Join"][1]
                )
            )
            found.append(
                (text.split(".", 3)[3], stack_name.rsplit("-", 1)[1], endpoint["Properties"])
            )
    return found


def consumer_clients() -> set[str]:
    """The boto3 clients the consumer's code makes (services/connect_consumer/*.py): a new one
    without an endpoint fails."""
    source = "".join(
        path.read_text() for path in (ROOT / "services" / "connect_consumer").glob("*.py")
    )
    return set(re.findall(r"\.client\(\s*\"([a-z-]+)\"", source))


def test_in_the_apps_own_vpc_every_service_the_consumers_call_has_one_endpoint(own_vpc):
    clients = consumer_clients()
    assert {"sqs", "events", "dynamodb", "kinesisvideo", "kinesis-video-media"} <= clients
    # Secrets Manager: the ECS target's token only (service.py); this variant streams to SageMaker.
    needed = {
        CLIENT_ENDPOINT[client] for client in clients - {"secretsmanager"}
    } | PLATFORM_ENDPOINTS
    services = [service for service, _stack, _props in endpoint_services(own_vpc)]
    assert needed <= set(services), needed - set(services)
    assert sorted(services) == sorted(set(services)), "one endpoint per service in the VPC"
    by_service = {service: (stack, props) for service, stack, props in endpoint_services(own_vpc)}
    assert (
        by_service["kinesisvideo"][0] == "Connect"
    )  # the Connect construct owns it (connect.kvs_vpc_endpoint)
    for service in ("dynamodb", "s3"):
        assert by_service[service][1]["VpcEndpointType"] == "Gateway"
    for service in needed - {"dynamodb", "s3"}:
        props = by_service[service][1]
        assert (props["VpcEndpointType"], props["PrivateDnsEnabled"]) == ("Interface", True), (
            service
        )


def test_the_dynamodb_gateway_is_on_the_route_tables_of_the_consumers_subnets(own_vpc):
    foundation = own_vpc.template("Foundation")
    (gateway,) = [p for service, _s, p in endpoint_services(own_vpc) if service == "dynamodb"]
    tables = {
        r["Properties"]["RouteTableId"]["Ref"]
        for r in resources(foundation, "AWS::EC2::SubnetRouteTableAssociation").values()
    }
    assert {table["Ref"] for table in gateway["RouteTableIds"]} == tables and len(tables) == 2


def test_the_consumers_endpoints_accept_https_from_the_vpc_only(own_vpc):
    foundation = own_vpc.template("Foundation")
    groups = resources(foundation, "AWS::EC2::SecurityGroup")
    (connect_group,) = [
        name for name in groups if name.startswith("NetworkConnectEndpointsSecurityGroup")
    ]
    props = groups[connect_group]["Properties"]
    assert [
        (r["CidrIp"], r["IpProtocol"], r["FromPort"], r["ToPort"])
        for r in props["SecurityGroupIngress"]
    ] == [("10.80.0.0/16", "tcp", 443, 443)]
    # allow_all_outbound=False: CDK's placeholder rule that matches no traffic.
    assert [r["CidrIp"] for r in props["SecurityGroupEgress"]] == ["255.255.255.255/32"]
    users = {
        service
        for service, _s, p in endpoint_services(own_vpc)
        if {"Fn::GetAtt": [connect_group, "GroupId"]} in p.get("SecurityGroupIds", [])
    }
    assert users == {"sqs", "events", "logs"}
    (registry,) = [
        g["Properties"] for name, g in groups.items() if name.startswith("NetworkRegistryEndpoints")
    ]
    assert ("10.80.0.0/16", 443) in {
        (r.get("CidrIp"), r["FromPort"]) for r in registry.get("SecurityGroupIngress", [])
    }


@pytest.mark.parametrize("variant", ["default", "vpc", "vpc_existing", "ecs_vpc"])
def test_without_connect_the_network_makes_none_of_the_consumers_endpoints(variant, app_variant):
    services = {service for service, _s, _p in endpoint_services(app_variant(variant))}
    assert not {"sqs", "events", "dynamodb", "kinesisvideo"} & services


def test_the_shared_operations_dashboard_has_a_connect_row_with_its_alarms(synthesized_connect):
    operations = synthesized_connect.template("Operations")
    (dashboard,) = resources(operations, "AWS::CloudWatch::Dashboard").values()
    body = json.dumps(dashboard["Properties"]["DashboardBody"])
    assert "## Amazon Connect live transcription" in body
    for metric in (
        "ActiveCalls",
        "MillisBehindNow",
        "CallsFailed",
        "CallsWaiting",
        "CallsUntranscribed",
    ):
        # With the deployment's dimension, as the consumers write it (METRIC_DIMENSIONS).
        assert f'\\"VoiceConnect\\",\\"{metric}\\",\\"Deployment\\",\\"RealtimeVoice\\"' in body
    connect = synthesized_connect.template("Connect")
    names = sorted(
        a["Properties"]["AlarmName"] for a in resources(connect, "AWS::CloudWatch::Alarm").values()
    )
    for name in (
        names
    ):  # the status widget shows every Connect alarm, by the name the Connect stack gives it
        assert f":alarm:{name}" in body
    assert "Fn::ImportValue" not in body  # nothing of the Connect stack: Operations deploys first


def _key_policy_sids(app) -> dict[str, dict]:
    (key,) = [
        r for r in app.template("Foundation")["Resources"].values() if r["Type"] == "AWS::KMS::Key"
    ]
    return {s.get("Sid"): s for s in key["Properties"]["KeyPolicy"]["Statement"]}


def test_the_data_key_lets_eventbridge_encrypt_the_transcripts_bus(
    synthesized_connect, synthesized_vpc
):
    """The bus is encrypted with the data key (KmsKeyIdentifier), and EventBridge needs
    kms:DescribeKey, kms:GenerateDataKey and kms:Decrypt in the key policy for that (EventBridge
    user guide, "Authorizing EventBridge to use a customer managed key"), limited to the account's
    buses; a key without Connect does not name EventBridge."""
    (bus,) = [
        r
        for r in synthesized_connect.template("Connect")["Resources"].values()
        if r["Type"] == "AWS::Events::EventBus"
    ]
    assert "KmsKeyIdentifier" in bus["Properties"]
    statement = _key_policy_sids(synthesized_connect)["EventBridgeEncryptBuses"]
    assert statement["Principal"] == {"Service": "events.amazonaws.com"}
    # The guide's example statement: the data actions, conditioned on the account and the bus.
    assert sorted(statement["Action"]) == ["kms:Decrypt", "kms:GenerateDataKey"]
    assert set(statement["Condition"]) == {"StringEquals", "ArnLike"}
    assert "aws:SourceAccount" in statement["Condition"]["StringEquals"]
    assert "aws:SourceArn" in statement["Condition"]["ArnLike"]
    # DescribeKey (CreateEventBus checks the key is symmetric) without the example's conditions.
    describe = _key_policy_sids(synthesized_connect)["EventBridgeDescribeKey"]
    assert (describe["Principal"], describe["Action"], describe.get("Condition")) == (
        {"Service": "events.amazonaws.com"},
        "kms:DescribeKey",
        None,
    )
    assert "EventBridgeEncryptBuses" not in _key_policy_sids(synthesized_vpc)
