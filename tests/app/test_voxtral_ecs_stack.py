"""The <prefix>-VoxtralEcs stack's template (voxtral.target=ecs): the GPU instances and their
capacity provider, the task, its roles and logs, the load balancer, scaling, alarms and outputs;
with the ECS defaults, every ECS option set, and in network.mode=vpc. Tests that read this stack
together with another are in test_cross_stack.py; cfn-lint and cdk-nag over each variant in
test_lint.py; settings refused before a synth in test_settings_app.py."""

from __future__ import annotations

import itertools
import json

import pytest

from tests.app.kit import container, fixture_private_ecs, one, resources  # noqa: F401 (fixtures)
from tests.app.variants import ECS_CERT as CERT, ECS_KMS_KEY

# --- The ECS target ------------------------------------------------------------------------------
# Template assertions of the ECS target: the VoxtralEcs stack with default settings, and with every
# option set.


def statements(template: dict, role_logical_id_prefix: str) -> list[dict]:
    out = []
    for _logical_id, policy in resources(template, "AWS::IAM::Policy").items():
        roles = [r["Ref"] for r in policy["Properties"]["Roles"]]
        if any(r.startswith(role_logical_id_prefix) for r in roles):
            out += policy["Properties"]["PolicyDocument"]["Statement"]
    return out


def test_instances_gpu_ami_from_ssm_at_deploy_time_imdsv2_encrypted_root(ecs_app):
    t = ecs_app.template("VoxtralEcs")
    data = one(t, "AWS::EC2::LaunchTemplate")["LaunchTemplateData"]
    (parameter,) = [v for k, v in t["Parameters"].items() if k.startswith("SsmParameterValue")]
    assert parameter == {
        "Type": "AWS::SSM::Parameter::Value<AWS::EC2::Image::Id>",
        "Default": "/aws/service/ecs/optimized-ami/amazon-linux-2023/gpu/recommended/image_id",
    }
    assert data["ImageId"]["Ref"].startswith("SsmParameterValue")
    assert data["InstanceType"] == "g6.xlarge"
    assert data["MetadataOptions"] == {"HttpTokens": "required", "HttpPutResponseHopLimit": 1}
    assert data["BlockDeviceMappings"] == [
        {
            "DeviceName": "/dev/xvda",
            "Ebs": {
                "DeleteOnTermination": True,
                "Encrypted": True,
                "VolumeSize": 200,
                "VolumeType": "gp3",
            },
        }
    ]
    assert "InstanceMarketOptions" not in data  # On-Demand by default
    user_data = json.dumps(data["UserData"])
    assert "nvidia_gpu" in user_data and "mkdir -p /var/lib/realtime-voice/weights" in user_data
    assert "ECS_CLUSTER=" in user_data
    assert "SPOT_INSTANCE_DRAINING" not in user_data


def test_capacity_provider_manages_scaling_and_termination_protection(ecs_app):
    t = ecs_app.template("VoxtralEcs")
    provider = one(t, "AWS::ECS::CapacityProvider")["AutoScalingGroupProvider"]
    assert provider["ManagedScaling"] == {"Status": "ENABLED", "TargetCapacity": 100}
    assert provider["ManagedTerminationProtection"] == "ENABLED"
    group = one(t, "AWS::AutoScaling::AutoScalingGroup")
    assert (group["MinSize"], group["MaxSize"], group["NewInstancesProtectedFromScaleIn"]) == (
        "0",
        "5",
        True,
    )
    assert len(group["VPCZoneIdentifier"]) == 2  # both zones by default
    assert not resources(t, "AWS::EC2::PlacementGroup")


def depends_on(template: dict, logical_id: str) -> set[str]:
    """What CloudFormation creates before ``logical_id`` (and deletes after it): DependsOn, Ref and
    Fn::GetAtt."""
    found = set(template["Resources"][logical_id].get("DependsOn", []))

    def walk(value):
        if isinstance(value, dict):
            if "Ref" in value:
                found.add(value["Ref"])
            if "Fn::GetAtt" in value:
                found.add(value["Fn::GetAtt"][0])
            for inner in value.values():
                walk(inner)
        elif isinstance(value, list):
            for inner in value:
                walk(inner)

    walk(template["Resources"][logical_id].get("Properties", {}))
    return found & set(template["Resources"])


@pytest.mark.parametrize("app", ["ecs_app", "ecs_variant"])
def test_destroy_releases_instance_protection_between_the_capacity_provider_and_the_group(
    app, request
):
    """aws/aws-cdk#18179, #14732, aws/containers-roadmap#2862: the group's instances stay protected
    from scale-in after the capacity provider goes, and CloudFormation's delete of the group waits
    on them. Deletion runs in the reverse of these dependencies: service, association, capacity
    provider, release, group, launch template, cluster."""
    t = request.getfixturevalue(app).template("VoxtralEcs")
    ids = {
        kind: next(iter(resources(t, kind)))
        for kind in (
            "AWS::ECS::Service",
            "AWS::ECS::ClusterCapacityProviderAssociations",
            "AWS::ECS::CapacityProvider",
            "Custom::ReleaseInstanceProtection",
            "AWS::AutoScaling::AutoScalingGroup",
            "AWS::EC2::LaunchTemplate",
            "AWS::ECS::Cluster",
        )
    }
    chain = list(ids.values())
    for later, earlier in itertools.pairwise(chain):  # each is deleted before the next
        assert earlier in depends_on(t, later), (later, earlier)
    release = t["Resources"][ids["Custom::ReleaseInstanceProtection"]]
    assert release["Properties"]["AutoScalingGroupName"] == {
        "Ref": ids["AWS::AutoScaling::AutoScalingGroup"]
    }
    (function_id,) = [
        ref
        for ref in depends_on(t, ids["Custom::ReleaseInstanceProtection"])
        if t["Resources"][ref]["Type"] == "AWS::Lambda::Function"
    ]
    function = t["Resources"][function_id]["Properties"]
    assert function["Handler"] == "instance_protection.handler" and "VpcConfig" not in function
    # Its role may change exactly this group's protection, and describe groups (no resource-level
    # permission).
    statements = {
        json.dumps(s["Action"]): s
        for p in resources(t, "AWS::IAM::Policy").values()
        for s in p["Properties"]["PolicyDocument"]["Statement"]
        if p["Properties"]["Roles"] == [{"Ref": function["Role"]["Fn::GetAtt"][0]}]
    }
    change = statements[
        json.dumps(["autoscaling:SetInstanceProtection", "autoscaling:UpdateAutoScalingGroup"])
    ]
    assert ids["AWS::AutoScaling::AutoScalingGroup"] in json.dumps(change["Resource"])
    assert statements['"autoscaling:DescribeAutoScalingGroups"']["Resource"] == "*"


def test_destroy_empties_the_access_log_bucket_after_the_load_balancer_is_gone(ecs_app):
    t = ecs_app.template("VoxtralEcs")
    (empty_id,) = resources(t, "Custom::S3AutoDeleteObjects")
    (balancer_id,) = resources(t, "AWS::ElasticLoadBalancingV2::LoadBalancer")
    assert balancer_id in depends_on(t, empty_id)


def test_task_one_gpu_health_on_ping_stop_timeout_covers_the_drain(ecs_app):
    t = ecs_app.template("VoxtralEcs")
    task = one(t, "AWS::ECS::TaskDefinition")
    c = container(t)
    assert task["NetworkMode"] == "awsvpc"
    assert c["ResourceRequirements"] == [{"Type": "GPU", "Value": "1"}]
    assert "http://127.0.0.1:8080/ping" in c["HealthCheck"]["Command"][1]
    assert c["StopTimeout"] == 35  # DRAIN_S 25 + 10 s for the bridge and vLLM to exit
    assert c["PortMappings"] == [{"ContainerPort": 8080, "Protocol": "tcp"}]
    env = {e["Name"]: e["Value"] for e in c["Environment"]}
    assert (
        env["DRAIN_S"] == "25"
        and env["VARIANT_NAME"] == "ecs"
        and env["ENDPOINT_NAME"] == "voxtral-realtime"
    )
    assert env["MODEL_CACHE_DIR"] == "/opt/weights-cache"
    assert json.dumps(env["MODEL_S3_URI"]).count("RealtimeVoice-Artifacts-ModelBucketName") == 1
    assert task["Volumes"] == [
        {"Host": {"SourcePath": "/var/lib/realtime-voice/weights"}, "Name": "weights"}
    ]
    assert c["MountPoints"] == [
        {"ContainerPath": "/opt/weights-cache", "ReadOnly": False, "SourceVolume": "weights"}
    ]
    (secret,) = c["Secrets"]
    assert secret["Name"] == "BRIDGE_TOKEN" and secret["ValueFrom"]["Ref"].startswith(
        "ServiceToken"
    )
    assert "BRIDGE_TOKEN" not in env


def test_own_log_group_with_retention_and_removal(ecs_app):
    t = ecs_app.template("VoxtralEcs")
    c = container(t)
    group_ref = c["LogConfiguration"]["Options"]["awslogs-group"]["Ref"]
    group = t["Resources"][group_ref]
    assert group["Properties"]["RetentionInDays"] == 30
    assert group["DeletionPolicy"] == "Delete"


def test_task_role_reads_the_model_prefix_and_writes_its_namespace_only(ecs_app):
    t = ecs_app.template("VoxtralEcs")
    task_role = one(t, "AWS::ECS::TaskDefinition")["TaskRoleArn"]["Fn::GetAtt"][0]
    by_action = {json.dumps(s["Action"]): s for s in statements(t, task_role)}
    get = by_action['"s3:GetObject"']
    assert json.dumps(get["Resource"]).endswith(
        '"/models/mistralai/Voxtral-Mini-4B-Realtime-2602/b45b4dc60caf4ad824163aaa0a72adc0ad7beeaf/*"]]}'
    )
    assert by_action['"s3:ListBucket"']["Condition"] == {
        "StringLike": {
            "s3:prefix": [
                "models/mistralai/Voxtral-Mini-4B-Realtime-2602/b45b4dc60caf4ad824163aaa0a72adc0ad7beeaf/*"
            ]
        }
    }
    assert by_action['"cloudwatch:PutMetricData"']["Condition"] == {
        "StringEquals": {"cloudwatch:namespace": "RealtimeVoice/Bridge"}
    }
    protection = by_action['["ecs:GetTaskProtection", "ecs:UpdateTaskProtection"]']
    assert ":task/" in json.dumps(protection["Resource"])
    assert set(by_action) == {
        '"s3:GetObject"',
        '"s3:ListBucket"',
        '"cloudwatch:PutMetricData"',
        '["ecs:GetTaskProtection", "ecs:UpdateTaskProtection"]',
    }


def test_internal_load_balancer_timeouts_follow_the_bridge(ecs_app):
    t = ecs_app.template("VoxtralEcs")
    alb = one(t, "AWS::ElasticLoadBalancingV2::LoadBalancer")
    attributes = {a["Key"]: a["Value"] for a in alb["LoadBalancerAttributes"]}
    assert alb["Scheme"] == "internal"
    assert attributes["idle_timeout.timeout_seconds"] == "70"  # bridge IDLE_TIMEOUT_S 60 + 10
    assert attributes["routing.http.drop_invalid_header_fields.enabled"] == "true"
    assert attributes["access_logs.s3.enabled"] == "true"
    group = one(t, "AWS::ElasticLoadBalancingV2::TargetGroup")
    assert {a["Key"]: a["Value"] for a in group["TargetGroupAttributes"]}[
        "deregistration_delay.timeout_seconds"
    ] == "25"
    assert (group["HealthCheckPath"], group["Matcher"], group["Port"], group["TargetType"]) == (
        "/ping",
        {"HttpCode": "200"},
        8080,
        "ip",
    )
    listener = one(t, "AWS::ElasticLoadBalancingV2::Listener")
    assert (listener["Port"], listener["Protocol"]) == (80, "HTTP")
    assert listener["DefaultActions"][0]["FixedResponseConfig"]["StatusCode"] == "404"
    rule = one(t, "AWS::ElasticLoadBalancingV2::ListenerRule")
    assert rule["Conditions"] == [
        {
            "Field": "path-pattern",
            "PathPatternConfig": {"Values": ["/invocations-bidirectional-stream", "/ping"]},
        }
    ]
    ingress = [
        g
        for g in resources(t, "AWS::EC2::SecurityGroup").values()
        if "SecurityGroupIngress" in g["Properties"]
    ]
    (alb_group,) = ingress
    (rule,) = alb_group["Properties"]["SecurityGroupIngress"]
    assert rule["FromPort"] == 80 and rule["CidrIp"] == {
        "Fn::GetAtt": [rule["CidrIp"]["Fn::GetAtt"][0], "CidrBlock"]
    }
    (to_tasks,) = [r["Properties"] for r in resources(t, "AWS::EC2::SecurityGroupIngress").values()]
    assert (to_tasks["FromPort"], to_tasks["ToPort"]) == (8080, 8080)
    assert to_tasks["SourceSecurityGroupId"]["Fn::GetAtt"][0].startswith(
        "ServiceLoadBalancerSecurityGroup"
    )


def test_service_rolls_with_circuit_breaker_and_scales_on_live_streams(ecs_app):
    t = ecs_app.template("VoxtralEcs")
    service = one(t, "AWS::ECS::Service")
    deployment = service["DeploymentConfiguration"]
    assert deployment["DeploymentCircuitBreaker"] == {"Enable": True, "Rollback": True}
    assert (deployment["MinimumHealthyPercent"], deployment["MaximumPercent"]) == (100, 200)
    assert "DesiredCount" not in service and service["HealthCheckGracePeriodSeconds"] == 1200
    assert service["PlacementStrategies"] == [
        {"Field": "attribute:ecs.availability-zone", "Type": "spread"},
        {"Field": "instanceId", "Type": "spread"},
    ]
    target = one(t, "AWS::ApplicationAutoScaling::ScalableTarget")
    assert (target["MinCapacity"], target["MaxCapacity"]) == (2, 4)
    tracking = one(t, "AWS::ApplicationAutoScaling::ScalingPolicy")[
        "TargetTrackingScalingPolicyConfiguration"
    ]
    assert tracking["TargetValue"] == 2.8  # 0.7 x max_num_seqs auto = 4 (one L4 at 45000 tokens)
    metric = tracking["CustomizedMetricSpecification"]
    assert (metric["Namespace"], metric["MetricName"], metric["Statistic"]) == (
        "RealtimeVoice/Bridge",
        "ActiveStreams",
        "Average",
    )
    assert metric["Dimensions"] == [
        {"Name": "EndpointName", "Value": "voxtral-realtime"},
        {"Name": "VariantName", "Value": "ecs"},
    ]
    assert (tracking["ScaleInCooldown"], tracking["ScaleOutCooldown"]) == (600, 60)


def test_alarms_of_the_service_and_the_bridge(ecs_app):
    t = ecs_app.template("VoxtralEcs")
    alarms = {
        a["Properties"]["AlarmName"]: a["Properties"]
        for a in resources(t, "AWS::CloudWatch::Alarm").values()
    }
    assert sorted(alarms) == sorted(
        f"voxtral-realtime-ecs-{name}"
        for name in [
            "UnhealthyTargets",
            "LoadBalancer5XX",
            "Target5XX",
            "RunningTasks",
            "GPUUtilization",
            "GPUMemoryUsed",
            "UpstreamErrors",
            "StreamsRejected",
            "TimeToFirstDeltaP90",
            "ActiveStreamsNearCap",
            "TaskProtectionErrors",
        ]
    )
    protection = alarms["voxtral-realtime-ecs-TaskProtectionErrors"]
    assert (
        protection["Namespace"],
        protection["MetricName"],
        protection["Statistic"],
        protection["Period"],
        protection["Threshold"],
        protection["ComparisonOperator"],
    ) == ("RealtimeVoice/Bridge", "TaskProtectionErrors", "Sum", 300, 0, "GreaterThanThreshold")
    gpu = alarms["voxtral-realtime-ecs-GPUMemoryUsed"]
    # A share of the total nvidia-smi reports (an L4 reports about 23 GiB, below the catalogue's
    # 24).
    assert gpu["Threshold"] == 97
    (expression,) = [m for m in gpu["Metrics"] if "Expression" in m]
    assert expression["Expression"] == "100 * used / total" and expression["ReturnData"] is True
    assert sorted(
        (
            m["Id"],
            m["MetricStat"]["Metric"]["Namespace"],
            m["MetricStat"]["Metric"]["MetricName"],
            m["MetricStat"]["Stat"],
        )
        for m in gpu["Metrics"]
        if "MetricStat" in m
    ) == [
        ("total", "RealtimeVoice/Bridge/Gpu", "nvidia_smi_memory_total", "Maximum"),
        ("used", "RealtimeVoice/Bridge/Gpu", "nvidia_smi_memory_used", "Maximum"),
    ]
    assert "100 * used / total (total = nvidia_smi_memory_total Maximum" in gpu["AlarmDescription"]
    assert alarms["voxtral-realtime-ecs-RunningTasks"]["Threshold"] == 2
    assert alarms["voxtral-realtime-ecs-RunningTasks"]["TreatMissingData"] == "breaching"
    near_cap = alarms["voxtral-realtime-ecs-ActiveStreamsNearCap"]
    assert near_cap["Dimensions"] == [
        {"Name": "EndpointName", "Value": "voxtral-realtime"},
        {"Name": "VariantName", "Value": "ecs"},
    ]
    for alarm in alarms.values():
        assert "Missing data:" in alarm["AlarmDescription"]
        assert alarm["AlarmActions"] == alarm["OKActions"] and len(alarm["AlarmActions"]) == 1
    dashboard = json.dumps(one(t, "AWS::CloudWatch::Dashboard"))
    for text in (
        "Live streams per task",
        "GPU use",
        "nvidia_smi_utilization_gpu",
        "UnHealthyHostCount",
        "RunningTaskCount",
        "Unauthorized (Sum, Count)",
        "TaskProtectionErrors (Sum, Count)",
    ):
        assert text in dashboard


def test_outputs_name_the_url_and_the_token_secret(ecs_app):
    outputs = ecs_app.template("VoxtralEcs")["Outputs"]
    assert json.dumps(outputs["StreamUrl"]["Value"]).startswith('{"Fn::Join": ["", ["ws://')
    assert outputs["TokenSecretArn"]["Value"]["Ref"].startswith("ServiceToken")


def test_internet_facing_https_spot_single_zone(ecs_variant):
    t = ecs_variant.template("VoxtralEcs")
    alb = one(t, "AWS::ElasticLoadBalancingV2::LoadBalancer")
    assert alb["Scheme"] == "internet-facing"
    assert all("Public" in s["Ref"] for s in alb["Subnets"])
    listener = one(t, "AWS::ElasticLoadBalancingV2::Listener")
    assert (listener["Port"], listener["Protocol"], listener["Certificates"]) == (
        443,
        "HTTPS",
        [{"CertificateArn": CERT}],
    )
    assert listener["SslPolicy"].startswith("ELBSecurityPolicy-TLS13")
    data = one(t, "AWS::EC2::LaunchTemplate")["LaunchTemplateData"]
    assert data["InstanceMarketOptions"]["MarketType"] == "spot"
    assert data["InstanceType"] == "g6e.2xlarge"
    assert one(t, "AWS::EC2::PlacementGroup")["Strategy"] == "cluster"
    assert "Placement" in data and "GroupName" in data["Placement"]
    group = one(t, "AWS::AutoScaling::AutoScalingGroup")
    assert len(group["VPCZoneIdentifier"]) == 1 and group["MaxSize"] == "7"
    service = one(t, "AWS::ECS::Service")
    assert service["PlacementStrategies"] == [{"Field": "instanceId", "Type": "spread"}]
    assert "DesiredCount" not in service
    assert one(t, "AWS::ApplicationAutoScaling::ScalableTarget")["MinCapacity"] == 3
    # Spot: the agent drains a host's tasks (SIGTERM, the bridge's drain) when EC2 sends the
    # interruption notice.
    assert "ECS_ENABLE_SPOT_INSTANCE_DRAINING=true" in json.dumps(data["UserData"])
    assert len(service["NetworkConfiguration"]["AwsvpcConfiguration"]["Subnets"]) == 1
    assert (
        one(t, "AWS::ECS::Service")["DeploymentConfiguration"]["DeploymentCircuitBreaker"][
            "Rollback"
        ]
        is True
    )
    assert (
        ecs_variant.template("VoxtralEcs")["Outputs"]["StreamUrl"]["Value"]["Fn::Join"][1][0]
        == "wss://"
    )


KEY = ECS_KMS_KEY


def test_weights_under_the_data_key_staged_with_it_and_decrypted_by_the_task_role(app_variant):
    keyed = app_variant("ecs_key_stream_cap")
    t = keyed.template("VoxtralEcs")
    task_role = one(t, "AWS::ECS::TaskDefinition")["TaskRoleArn"]["Fn::GetAtt"][0]
    decrypt = [s for s in statements(t, task_role) if s.get("Sid") == "DecryptModelData"]
    assert decrypt == [
        {
            "Sid": "DecryptModelData",
            "Action": ["kms:Decrypt", "kms:DescribeKey"],
            "Effect": "Allow",
            "Resource": KEY,
        }
    ]
    # The staging build writes the weights with the same key (ModelStaging's encryption_key).
    build_statements = json.dumps(
        [
            s
            for logical_id, policy in resources(t, "AWS::IAM::Policy").items()
            if logical_id.startswith("ModelStaging")
            for s in policy["Properties"]["PolicyDocument"]["Statement"]
        ]
    )
    assert KEY in build_statements and "kms:GenerateDataKey" in build_statements


def test_the_stream_cap_and_scaling_target_follow_the_ecs_gpu(ecs_variant):
    """ecs.instance_type=g6e.2xlarge (one L40S, 48 GiB): max_num_seqs=auto resolves to 23 streams at
    45000 tokens, not the 4 of voxtral.instance_type's L4; vLLM, the bridge's alarm and the scaling
    target all get it."""
    t = ecs_variant.template("VoxtralEcs")
    env = {e["Name"]: e["Value"] for e in container(t)["Environment"]}
    assert env["SM_VLLM_MAX_NUM_SEQS"] == "23"
    tracking = one(t, "AWS::ApplicationAutoScaling::ScalingPolicy")[
        "TargetTrackingScalingPolicyConfiguration"
    ]
    assert tracking["TargetValue"] == pytest.approx(0.7 * 23)
    (near_cap,) = [
        a["Properties"]
        for k, a in resources(t, "AWS::CloudWatch::Alarm").items()
        if "ActiveStreamsNearCap" in k
    ]
    assert near_cap["Threshold"] == pytest.approx(0.9 * 23)


def test_the_transcription_delay_reaches_the_task_only_when_set(ecs_app, ecs_variant):
    """voxtral.transcription_delay_ms=160 (variant ecs_options) is the bridge's
    TRANSCRIPTION_DELAY_MS in the task; unset (variant ecs), the task's environment has no such
    variable and vLLM keeps the checkpoint's."""
    delayed, plain = (
        {e["Name"]: e["Value"] for e in container(t)["Environment"]}
        for t in (ecs_variant.template("VoxtralEcs"), ecs_app.template("VoxtralEcs"))
    )
    assert delayed["TRANSCRIPTION_DELAY_MS"] == "160"
    assert "TRANSCRIPTION_DELAY_MS" not in plain


def test_a_stream_cap_above_the_compute_cap_is_printed_as_a_warning(app_variant):
    app = app_variant("ecs_key_stream_cap")
    warnings = [
        e["data"]
        for f in app.outdir.glob("*VoxtralEcs.metadata.json")
        for entries in json.loads(f.read_text()).values()
        for e in entries
        if e["type"] == "aws:cdk:warning"
    ]
    assert len(warnings) == 1 and warnings[0].startswith(
        "voxtral.max_num_seqs=6 is above the compute cap of one NVIDIA L4 "
        "(ecs.instance_type='g6.xlarge')"
    )
    assert "realtime-voice:stream-cap-above-compute" in warnings[0]


# --- ECS in vpc mode ----------------------------------------------------------------------------
# The ECS target in network.mode=vpc: the service in the Foundation stack's private network (no
# route to the internet), the interface endpoints ECS needs made there only when a service runs on
# ECS, an internal load balancer for the caller CIDRs, and the data key on the task logs and the
# token. Checked with cdk-nag's three packs and cfn-lint; bad combinations fail with one clear
# message.


def imports_from_foundation(value) -> bool:
    return "RealtimeVoice-Foundation:" in json.dumps(value)


def test_the_service_runs_in_the_private_subnets_with_no_route_out(private_ecs):
    t = private_ecs.template("VoxtralEcs")
    for kind in (
        "AWS::EC2::VPC",
        "AWS::EC2::Subnet",
        "AWS::EC2::InternetGateway",
        "AWS::EC2::NatGateway",
        "AWS::EC2::Route",
        "AWS::EC2::EIP",
    ):
        assert resources(t, kind) == {}, kind
    group = one(t, "AWS::AutoScaling::AutoScalingGroup")
    service = one(t, "AWS::ECS::Service")
    balancer = one(t, "AWS::ElasticLoadBalancingV2::LoadBalancer")
    subnets = service["NetworkConfiguration"]["AwsvpcConfiguration"]["Subnets"]
    assert len(subnets) == 2 and all(
        imports_from_foundation(s) and "PrivateSubnet" in json.dumps(s) for s in subnets
    )
    assert group["VPCZoneIdentifier"] == subnets and balancer["Subnets"] == subnets
    assert service["NetworkConfiguration"]["AwsvpcConfiguration"]["AssignPublicIp"] == "DISABLED"
    assert balancer["Scheme"] == "internal"
    (lb_group,) = [
        g["Properties"]
        for k, g in resources(t, "AWS::EC2::SecurityGroup").items()
        if k.startswith("ServiceLoadBalancerSecurityGroup")
    ]
    assert [(r["FromPort"], r["CidrIp"]) for r in lb_group["SecurityGroupIngress"]] == [
        (80, "10.80.0.0/16")
    ]
    assert imports_from_foundation(lb_group["VpcId"])


def test_task_logs_and_token_are_under_the_data_key(private_ecs):
    t = private_ecs.template("VoxtralEcs")
    (log_group,) = [
        g["Properties"]
        for k, g in resources(t, "AWS::Logs::LogGroup").items()
        if k.startswith("ServiceLogs")
    ]
    assert "DataKey" in json.dumps(log_group["KmsKeyId"]) and imports_from_foundation(
        log_group["KmsKeyId"]
    )
    secret = one(t, "AWS::SecretsManager::Secret")
    assert "DataKey" in json.dumps(secret["KmsKeyId"])
    # ECS reads the secret with the execution role: it needs kms:Decrypt on the data key, via
    # Secrets Manager only.
    (secret_id,) = resources(t, "AWS::SecretsManager::Secret")
    execution_policies = [
        p["Properties"]["PolicyDocument"]["Statement"]
        for k, p in resources(t, "AWS::IAM::Policy").items()
        if k.startswith("ServiceTaskExecutionRole")
    ]
    decrypts = [
        s for statements in execution_policies for s in statements if s["Action"] == "kms:Decrypt"
    ]
    assert len(decrypts) == 1
    assert "DataKey" in json.dumps(decrypts[0]["Resource"]) and imports_from_foundation(
        decrypts[0]["Resource"]
    )
    assert decrypts[0]["Condition"] == {
        "StringEquals": {
            "kms:ViaService": "secretsmanager.us-east-1.amazonaws.com",
            "kms:EncryptionContext:SecretARN": {"Ref": secret_id},
        }
    }
