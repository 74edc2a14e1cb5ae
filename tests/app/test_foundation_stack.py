"""The <prefix>-Foundation stack's template (network.mode=vpc): the private network without a route
to the internet, its VPC endpoints and security groups, the flow logs and the data key. Tests that
read this stack together with another are in test_cross_stack.py; cfn-lint and cdk-nag over each
variant in test_lint.py; settings refused before a synth in test_settings_app.py."""

from __future__ import annotations

import json

from tests.app.kit import (  # noqa: F401 (fixtures)
    AGENT_SERVICES,
    ECS_SERVICES,
    SAGEMAKER_SERVICES,
    fixture_private,
    fixture_private_ecs,
    ingress,
    key_ref,
    refers_to_key,
    resources,
    suffixes,
)

# --- Private mode --------------------------------------------------------------------------------
# network.mode=vpc and encryption.*: the private deployment's templates (a VPC without internet, its
# endpoints and security groups, both Models isolated in it, every data-holding resource under the
# key), its checks (cdk-nag's AwsSolutions, HIPAA Security and NIST 800-53 rev 5 packs, cfn-lint),
# an existing VPC, and a key given by ARN in public mode. The variants come from the registry
# (tests/app/variants.py).


def test_flow_logs_record_all_traffic_to_an_encrypted_log_group(private):
    foundation = private.template("Foundation")
    (flow_log,) = resources(foundation, "AWS::EC2::FlowLog").values()
    assert flow_log["Properties"]["TrafficType"] == "ALL"
    assert flow_log["Properties"]["ResourceType"] == "VPC"
    group = flow_log["Properties"]["LogGroupName"]["Ref"]
    assert refers_to_key(foundation["Resources"][group]["Properties"]["KmsKeyId"], key_ref(private))


def test_each_vpc_endpoint_is_present_with_its_security_group(private):
    foundation = private.template("Foundation")
    endpoints = resources(foundation, "AWS::EC2::VPCEndpoint")
    by_service = {
        json.dumps(e["Properties"]["ServiceName"]): e["Properties"] for e in endpoints.values()
    }
    services = sorted(by_service)
    assert len(services) == 4
    s3 = next(p for name, p in by_service.items() if ".s3" in name)
    assert s3["VpcEndpointType"] == "Gateway" and len(s3["RouteTableIds"]) == 2
    groups = resources(foundation, "AWS::EC2::SecurityGroup")
    for suffix in ("ecr.api", "ecr.dkr", "sagemaker.runtime"):
        (props,) = [p for name, p in by_service.items() if suffix in name]
        assert props["VpcEndpointType"] == "Interface" and props["PrivateDnsEnabled"] is True
        (group,) = props["SecurityGroupIds"]
        assert group["Fn::GetAtt"][0] in groups
        assert len(props["SubnetIds"]) == 2


def test_security_groups_allow_only_what_is_used(private):
    foundation = private.template("Foundation")
    groups = resources(foundation, "AWS::EC2::SecurityGroup")
    (model_id,) = [k for k in groups if k.startswith("NetworkModelSecurityGroup")]
    model = groups[model_id]["Properties"]
    assert "SecurityGroupIngress" not in model
    assert not any(
        r["Properties"]["GroupId"]["Fn::GetAtt"][0] == model_id
        for r in resources(foundation, "AWS::EC2::SecurityGroupIngress").values()
    )
    assert [
        (r["IpProtocol"], r["FromPort"], r["ToPort"], r["CidrIp"])
        for r in model["SecurityGroupEgress"]
    ] == [("tcp", 443, 443, "0.0.0.0/0")]
    assert ingress(foundation, "NetworkRegistryEndpoints") == [(443, 443, model_id)]
    # 8443: bidirectional streaming callers (reported by third parties; unconfirmed by AWS
    # documentation).
    assert ingress(foundation, "NetworkRuntimeEndpoint") == [
        (443, 443, "10.80.0.0/16"),
        (8443, 8443, "10.80.0.0/16"),
    ]
    for group in groups.values():
        egress = group["Properties"].get("SecurityGroupEgress", [])
        assert all(rule.get("IpProtocol") != "-1" for rule in egress)


def test_the_data_key_rotates_names_cloudwatch_logs_and_is_deleted_with_the_app(private):
    foundation = private.template("Foundation")
    (key,) = resources(foundation, "AWS::KMS::Key").values()
    assert key["Properties"]["EnableKeyRotation"] is True
    assert key["DeletionPolicy"] == "Delete"  # retain_data=false
    statements = {s.get("Sid"): s for s in key["Properties"]["KeyPolicy"]["Statement"]}
    logs = statements["CloudWatchLogsEncryptLogGroups"]
    assert logs["Principal"] == {"Service": "logs.us-east-1.amazonaws.com"}
    prefixes = json.dumps(logs["Condition"]["ArnLike"]["kms:EncryptionContext:aws:logs:arn"])
    assert (
        "log-group:/aws/sagemaker/Endpoints/*" in prefixes
        and "log-group:RealtimeVoice-*" in prefixes
    )


# --- ECS in vpc mode ----------------------------------------------------------------------------
# The ECS target in network.mode=vpc: the service in the Foundation stack's private network (no
# route to the internet), the interface endpoints ECS needs made there only when a service runs on
# ECS, an internal load balancer for the caller CIDRs, and the data key on the task logs and the
# token. Checked with cdk-nag's three packs and cfn-lint; bad combinations fail with one clear
# message.


def test_the_ecs_endpoints_are_made_only_when_a_service_runs_on_ecs(private_ecs):
    from tests.app.kit import resources

    foundation = private_ecs.template("Foundation")
    # The voice agent (agent.enabled in this variant) adds Bedrock's runtime; logs and ecs are the
    # ECS table's.
    assert suffixes(foundation) == ECS_SERVICES | SAGEMAKER_SERVICES | AGENT_SERVICES | {"s3"}
    assert len(resources(foundation, "AWS::EC2::VPCEndpoint")) == 12
    groups = resources(foundation, "AWS::EC2::SecurityGroup")
    (ecs_group,) = [k for k in groups if k.startswith("NetworkEcsEndpointsSecurityGroup")]
    for endpoint in resources(foundation, "AWS::EC2::VPCEndpoint").values():
        props = endpoint["Properties"]
        name = json.dumps(props["ServiceName"])
        if any(f'.{service}"' in name for service in ECS_SERVICES):
            assert props["VpcEndpointType"] == "Interface" and props["PrivateDnsEnabled"] is True
            assert props["SecurityGroupIds"] == [{"Fn::GetAtt": [ecs_group, "GroupId"]}]
            assert len(props["SubnetIds"]) == 2


def test_sagemaker_only_vpc_mode_has_no_ecs_endpoint(private_ecs, synthesized_vpc):
    """The SageMaker target in vpc mode keeps its four endpoints (tests/app/test_foundation_stack.py
    has the rest)."""
    sagemaker = synthesized_vpc
    assert suffixes(sagemaker.template("Foundation")) == SAGEMAKER_SERVICES | {"s3"}
    assert not [
        k for k in sagemaker.template("Foundation")["Resources"] if k.startswith("NetworkEcs")
    ]


def test_the_endpoints_let_in_the_vpc_on_443_only(private_ecs):
    from tests.app.kit import ingress, resources

    foundation = private_ecs.template("Foundation")
    (model_group,) = [
        k
        for k in resources(foundation, "AWS::EC2::SecurityGroup")
        if k.startswith("NetworkModelSecurityGroup")
    ]
    assert ingress(foundation, "NetworkEcsEndpoints") == [(443, 443, "10.80.0.0/16")]
    # The ECS instances pull the image through the ECR endpoints SageMaker uses.
    assert ingress(foundation, "NetworkRegistryEndpoints") == [
        (443, 443, "10.80.0.0/16"),
        (443, 443, model_group),
    ]
