"""The app's settings, refused or derived before anything is synthesized: app.py run as the CDK CLI runs it, and
load_settings, one clear message per problem. What a setting does to a template is asserted in its stack's file."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from config.settings import SettingsError, load_settings
from constructs_lib.facts import instance_types
from constructs_lib.sagemaker_endpoint.props import ProductionVariant
from constructs_lib.validation import Problems
from tests.app.variants import ECS_VPC as PRIVATE_ECS
from tests.app.variants import SONIC_ECS_IMAGE as IMAGE
from tests.conftest import CONNECT, CONNECT_INSTANCE, CONNECT_QUEUE, CONNECT_VPC, ROOT, cdk_json_context
from tests.unit.config.test_settings import problems_for


# --- app.py -----------------------------------------------------------------------------------------------------------
# app.py with settings it refuses: ``cdk synth`` (the app run as the CDK CLI runs it, a subprocess of the whole app)
# exits with the settings' messages before building anything, and no traceback.


def run_app(context_json: str, outdir) -> subprocess.CompletedProcess:
    """Run app.py as the CDK CLI does, with the context in CDK_CONTEXT_JSON."""
    env = {**os.environ, "CDK_CONTEXT_JSON": context_json, "CDK_OUTDIR": str(outdir)}
    return subprocess.run([sys.executable, "app.py"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)


def test_app_exits_with_one_clear_message_and_no_traceback(tmp_path):
    import json

    result = run_app(json.dumps({**cdk_json_context(), "voxtral.instance_type": "ml.g6.huge"}), tmp_path)
    assert result.returncode == 1
    assert "Traceback" not in result.stderr and "jsii" not in result.stderr
    assert "voxtral.instance_type='ml.g6.huge': not a SageMaker real-time instance type" in result.stderr


def test_app_exits_with_the_message_before_building_anything():
    """cdk synth (app.py) fails with the settings' message for an instance type without an NVIDIA GPU."""
    import json
    import os
    import subprocess
    import sys

    from tests.conftest import ROOT

    context = {"voxtral.target": "ecs", "ecs.instance_type": "m5.large", "ecs.min_tasks": 5}
    result = subprocess.run([sys.executable, "app.py"], cwd=ROOT, capture_output=True, text=True, timeout=120,
                            env={**os.environ, "CDK_CONTEXT_JSON": json.dumps(context)})
    assert result.returncode == 1
    assert "ecs.instance_type='m5.large': has no NVIDIA GPU" in result.stderr
    assert "ecs.max_tasks=4: must be at least ecs.min_tasks=5" in result.stderr
    assert "Traceback" not in result.stderr


def test_app_exits_with_the_network_message_before_building_anything():
    result = subprocess.run([sys.executable, "app.py"], cwd=ROOT, capture_output=True, text=True, timeout=120,
                            env={**__import__("os").environ, "CDK_CONTEXT_JSON": json.dumps({"network.max_azs": 3})})
    assert result.returncode == 1
    assert "network.max_azs=3: set only with network.mode=vpc" in result.stderr


# --- Private mode: bad settings, one clear message each ---------------------------------------------------------------
# network.mode=vpc and encryption.*: the private deployment's templates (a VPC without internet, its endpoints and
# security groups, both Models isolated in it, every data-holding resource under the key), its checks (cdk-nag's
# AwsSolutions, HIPAA Security and NIST 800-53 rev 5 packs, cfn-lint), an existing VPC, and a key given by ARN in public
# mode. The variants come from the registry (tests/app/variants.py).


EXISTING_TWO_ZONES = {"network.mode": "vpc", "network.vpc_id": "vpc-0123456789abcdef0",
                      "network.subnet_ids": "subnet-0123456789abcdef0,subnet-0123456789abcdef1",
                      "network.availability_zones": "us-east-1a,us-east-1b", "network.vpc_cidr": "10.0.0.0/16",
                      "network.create_endpoints": "false"}


@pytest.mark.parametrize("overrides, message", [
    ({**EXISTING_TWO_ZONES, "network.availability_zones": "us-east-1a,us-east-1a"},
     'network.subnet_ids=["subnet-0123456789abcdef0", "subnet-0123456789abcdef1"]: must be in at least 2 '
     "Availability Zones (SageMaker hosting in a VPC); all are in us-east-1a"),
    ({"network.mode": "vpc", "network.max_azs": "1"},
     "network.max_azs=1: must be at least 2 (SageMaker hosting in a VPC needs subnets in two Availability Zones)"),
    ({**EXISTING_TWO_ZONES, "network.vpc_id": "vpc-xyz"},
     "network.vpc_id='vpc-xyz': must be a VPC id such as 'vpc-0123456789abcdef0'"),
    ({**EXISTING_TWO_ZONES, "network.subnet_ids": "sg-0123456789abcdef0,subnet-0123456789abcdef1"},
     'network.subnet_ids=["sg-0123456789abcdef0", "subnet-0123456789abcdef1"]: must be subnet ids such as '
     "'subnet-0123456789abcdef0'; not: 'sg-0123456789abcdef0'"),
    ({**EXISTING_TWO_ZONES, "network.security_group_ids": "subnet-0123456789abcdef0"},
     'network.security_group_ids=["subnet-0123456789abcdef0"]: must be security group ids such as '
     "'sg-0123456789abcdef0'; not: 'subnet-0123456789abcdef0'"),
    ({"encryption.kms_key_arn": "arn:aws:kms:eu-west-1:123456789012:key/0f0e0d0c-0b0a-0908-0706-050403020100"},
     "encryption.kms_key_arn='arn:aws:kms:eu-west-1:123456789012:key/0f0e0d0c-0b0a-0908-0706-050403020100': the key "
     "is in eu-west-1 but the stack deploys to us-east-1"),
    ({"encryption.kms_key_arn": "arn:aws:kms:us-east-1:123456789012:alias/data"},
     "encryption.kms_key_arn='arn:aws:kms:us-east-1:123456789012:alias/data': must be a KMS key ARN "
     "(arn:aws:kms:<region>:<account>:key/<key id>; not an alias, IAM grants need the key)"),
    ({"encryption.kms_key_arn": "arn:aws:kms:us-east-1:12345:key/0f0e0d0c-0b0a-0908-0706-050403020100"},
     "encryption.kms_key_arn='arn:aws:kms:us-east-1:12345:key/0f0e0d0c-0b0a-0908-0706-050403020100': must be a KMS "
     "key ARN (arn:aws:kms:<region>:<account>:key/<key id>; not an alias, IAM grants need the key)"),
    ({"network.subnet_ids": "subnet-0123456789abcdef0"},
     'network.subnet_ids=["subnet-0123456789abcdef0"]: set only with network.mode=vpc (public mode uses '
     "SageMaker-managed networking)"),
    ({"network.mode": "vpc", "network.vpc_id": "vpc-0123456789abcdef0"},
     "network.vpc_cidr=null: must be the CIDR block of the VPC network.vpc_id (what its endpoints let in)"),
    ({**EXISTING_TWO_ZONES, "network.create_endpoints": "true"},
     "network.route_table_ids=[]: must name the route table of each of the 2 subnet(s) (the S3 gateway endpoint is "
     "added to them), or set network.create_endpoints=false if the VPC has its endpoints"),
])
def test_bad_private_settings_fail_with_one_clear_message(overrides, message):
    from config.settings import SettingsError, load_settings
    from tests.conftest import cdk_json_context

    with pytest.raises(SettingsError) as error:
        load_settings({**cdk_json_context(), **overrides})
    assert error.value.problems == [message]


# --- ECS in vpc mode --------------------------------------------------------------------------------------------------
# The ECS target in network.mode=vpc: the service in the Foundation stack's private network (no route to the internet),
# the interface endpoints ECS needs made there only when a service runs on ECS, an internal load balancer for the caller
# CIDRs, and the data key on the task logs and the token. Checked with cdk-nag's three packs and cfn-lint; bad
# combinations fail with one clear message.


def test_internet_facing_in_vpc_mode_fails_with_a_clear_message():
    cert = "arn:aws:acm:us-east-1:123456789012:certificate/12345678-1234-1234-1234-123456789012"
    with pytest.raises(SettingsError) as caught:
        load_settings({**cdk_json_context(), **PRIVATE_ECS, "ecs.load_balancer": "internet_facing",
                       "ecs.certificate_arn": cert})
    assert caught.value.problems == [
        "ecs.load_balancer='internet_facing' with network.mode='vpc': the private network has no internet gateway; "
        "use ecs.load_balancer='internal' (callers reach it from the VPC, peered networks or on premises), or "
        "network.mode='public'"]


# --- Sonic on ECS -----------------------------------------------------------------------------------------------------
# Sonic on ECS (sonic.target=ecs): the licensed container as an ECS service from the same construct as Voxtral's,
# without the bridge's parts; its settings and their errors; public mode and vpc mode with both services on ECS.


def sonic_problems(**overrides) -> list[str]:
    context = {**cdk_json_context(), "sonic.target": "ecs", **{k.replace("__", "."): v for k, v in overrides.items()}}
    with pytest.raises(SettingsError) as caught:
        load_settings(context)
    return caught.value.problems


def test_the_image_is_required_and_must_be_in_ecr_of_the_region():
    assert sonic_problems() == [
        "sonic.image_uri=null: must be set with sonic.target='ecs': the Sonic container your Cartesia licence "
        "provides, in ECR (it is not public; README 'Sonic on ECS')"]
    (problem,) = sonic_problems(sonic__image_uri="cartesia/sonic:3.6")
    assert problem.startswith("sonic.image_uri='cartesia/sonic:3.6': must be a private ECR image")
    (problem,) = sonic_problems(sonic__image_uri=IMAGE.replace("us-east-1", "eu-west-1"))
    assert "the image is in eu-west-1 but the stack deploys to us-east-1" in problem


@pytest.mark.parametrize("port", [0, 65536, -1])
def test_a_port_outside_1_to_65535_fails(port):
    assert sonic_problems(sonic__image_uri=IMAGE, sonic__container_port=port) == [
        f"sonic.container_port={port}: must be a TCP port 1-65535 (the port the container listens on; with awsvpc "
        "networking every port of the task's own interface is free)"]


@pytest.mark.parametrize("path", ["ping", "/ping?deep=1", "/my path", "", "/" + "a" * 1024])
def test_a_health_path_not_starting_with_a_slash_or_with_a_query_fails(path):
    problems = sonic_problems(sonic__image_uri=IMAGE, sonic__health_path=path)
    if path == "":
        assert problems == ["sonic.health_path='': must be set: this setting has no 'unset' value (null is allowed "
                            "for optional settings only)"]
    else:
        assert problems == [f"sonic.health_path={path!r}: must be a URL path starting with '/' (e.g. '/ping'), at "
                            "most 1024 characters, without spaces or a query string ('?')"]


def test_good_ports_and_paths_pass():
    for port, path in [(1, "/"), (65535, "/v1/health"), (443, "/healthz")]:
        settings = load_settings({**cdk_json_context(), "sonic.target": "ecs", "sonic.image_uri": IMAGE,
                                  "sonic.container_port": port, "sonic.health_path": path})
        assert (settings.sonic.container_port, settings.sonic.health_path) == (port, path)


def test_instance_type_scaling_metric_and_task_range_are_checked():
    problems = sonic_problems(sonic__image_uri=IMAGE, sonic__ecs_instance_type="m5.large",
                              sonic__scaling_metric="concurrent_requests", sonic__min_instances=3)
    assert [p.split(":")[0] for p in problems] == [
        "sonic.max_instances=2", "sonic.ecs_instance_type='m5.large'", "sonic.scaling_metric='concurrent_requests'"]
    assert problems[0] == "sonic.max_instances=2: must be at least sonic.min_instances=3"
    assert problems[1].startswith("sonic.ecs_instance_type='m5.large': has no NVIDIA GPU")
    assert problems[2].startswith("sonic.scaling_metric='concurrent_requests': must be 'invocations_per_instance' "
                                  "with sonic.target='ecs'")


def test_sagemaker_only_checks_do_not_apply_on_ecs():
    # No Marketplace package in eu-west-1: a problem for SageMaker, none for the licensed container on ECS.
    image = IMAGE.replace("us-east-1", "eu-west-1")
    settings = load_settings({**cdk_json_context(), "region": "eu-west-1", "voxtral.enabled": False,
                              "sonic.target": "ecs", "sonic.image_uri": image})
    assert settings.sonic_on_ecs and settings.uses_ecs
    capacity = settings.sonic.ecs_capacity(settings.ecs)
    assert (capacity.instance_type, capacity.min_tasks, capacity.max_tasks) == ("g6e.xlarge", 1, 2)
    assert settings.sonic.ecs_load_balancing(settings.ecs).internet_facing is False


# --- Connect ----------------------------------------------------------------------------------------------------------
# The <prefix>-Connect stack's template: least privilege, the Connect resources as the references require, removal
# policies, and cfn-lint in both network modes (cdk-nag runs as part of the synth and fails it on any finding).


@pytest.mark.parametrize("overrides, expected", [
    ({"connect.instance_arn": None}, "connect.instance_arn=null: must name the Amazon Connect instance"),
    ({"connect.instance_arn": CONNECT_INSTANCE.replace("us-east-1", "eu-west-1")}, "must be in the app's region"),
    ({"connect.instance_arn": "arn:aws:connect:us-east-1:123:instance/x"}, "must be an Amazon Connect instance ARN"),
    ({"connect.stream_kms_key_arn": "alias/connect"},
     "connect.stream_kms_key_arn='alias/connect': must be a KMS key ARN"),
    ({"connect.stream_kms_key_arn": "arn:aws:kms:eu-west-1:123456789012:key/11111111-2222-3333-4444-555555555555"},
     "the key is in eu-west-1 but the stack deploys to us-east-1"),
    ({"connect.alarm_millis_behind": -1}, "connect.alarm_millis_behind=-1: must be at least 1"),
    ({"connect.retention_hours": 0}, "0 keeps no data"),
    ({"connect.queue_arn": None}, "connect.queue_arn=null: must name the queue the example flow transfers calls to"),
    ({"connect.queue_arn": CONNECT_INSTANCE}, "must be an Amazon Connect queue ARN"),
    ({"connect.queue_arn": CONNECT_QUEUE.replace("11111111-", "22222222-")}, "must be a queue of the instance"),
    ({"connect.cpu": 1000}, "connect.cpu=1000: must be Fargate task CPU units, one of 256, 512, 1024, 2048"),
    ({"connect.memory_mib": 1024}, "connect.memory_mib=1024: must be a memory Fargate pairs with connect.cpu=1024: "
                                   "2048, 3072, 4096, 5120, 6144, 7168, 8192 MiB"),
    ({"connect.cpu": 8192, "connect.memory_mib": 18432}, "pairs with connect.cpu=8192: 16384-61440 in steps of 4096 MiB"),
    ({"connect.stream_prefix": "bad prefix"}, "must be 1-128 of [a-zA-Z0-9_.-]"),
    ({"encryption.create_key": False}, "needs a KMS key (EncryptionConfig is required)"),
    ({"network.mode": "vpc", "connect.kvs_vpc_endpoint": False},
     "connect.kvs_vpc_endpoint=false: must be true with network.mode=vpc and no network.vpc_id"),
    ({"network.mode": "vpc", "network.create_endpoints": False}, "keep network.create_endpoints=true"),
    ({"network.mode": "vpc", "region": "eu-north-1",
      "connect.instance_arn": CONNECT_INSTANCE.replace("us-east-1", "eu-north-1"),
      "connect.queue_arn": CONNECT_QUEUE.replace("us-east-1", "eu-north-1")},
     "name an existing VPC whose subnets have egress (network.vpc_id)"),
    ({"voxtral.enabled": False}, "needs voxtral.enabled=true"),
    ({**CONNECT_VPC, "region": "eu-north-1", "connect.instance_arn": CONNECT_INSTANCE.replace("us-east-1", "eu-north-1"),
      "connect.queue_arn": CONNECT_QUEUE.replace("us-east-1", "eu-north-1")},
     "Kinesis Video Streams has no interface VPC endpoint in eu-north-1 (it has one in af-south-1"),
])
def test_connect_settings_are_refused_with_the_rule_they_break(overrides, expected):
    with pytest.raises(SettingsError) as raised:
        load_settings({**cdk_json_context(), **CONNECT, **overrides})
    assert expected in str(raised.value)


# --- Instance pools: every pool type is checked like the instance type ------------------------------------------------
# Capacity fallback: ``voxtral.instance_pools`` and ``sonic.instance_pools`` as the ProductionVariant's InstancePools,
# with every rule sized by the instance holding for each pool's type (settings, alarms, dashboard, quotas).


def test_an_l4_and_an_l40s_pool_get_a_model_and_a_cap_each():
    from stacks.composition import container_environment, pool_environment

    context = {**cdk_json_context(), "voxtral.instance_type": "ml.g6.xlarge",
               "voxtral.instance_pools": "ml.g6.xlarge,ml.g6e.xlarge"}
    voxtral = load_settings(context).voxtral
    assert voxtral.stream_caps == {"ml.g6.xlarge": 4, "ml.g6e.xlarge": 23}
    assert container_environment(voxtral, "ml.g6.xlarge")["SM_VLLM_MAX_NUM_SEQS"] == "4"
    assert pool_environment(voxtral) == {"ml.g6e.xlarge": {"SM_VLLM_MAX_NUM_SEQS": "23"}}
    # An explicit max_num_seqs is one cap for all: no pool needs a Model of its own.
    context["voxtral.max_num_seqs"] = "4"
    assert pool_environment(load_settings(context).voxtral) == {}


def test_alarm_capacity_is_the_fewest_of_each():
    assert instance_types.alarm_capacity(["ml.g6e.12xlarge", "ml.g6e.2xlarge"]) == (1, 8)
    assert instance_types.alarm_capacity(["ml.g6e.48xlarge", "ml.g6e.12xlarge"]) == (4, 48)
    assert instance_types.alarm_capacity(["ml.g6.4xlarge"]) == (1, 16)
    with pytest.raises(ValueError, match=r"\['ml.g9.xlarge'\]: not in constructs_lib/facts/instance_types.py"):
        instance_types.alarm_capacity(["ml.g6.4xlarge", "ml.g9.xlarge"])


def test_an_unknown_type_in_the_pools_is_named():
    assert problems_for(voxtral__instance_pools="ml.g6.xlarge,ml.g9.xlarge") == [
        "voxtral.instance_pools='ml.g9.xlarge': not a SageMaker real-time instance type (expected one of SageMaker's "
        "ProductionVariant types of the form 'ml.<family>.<size>', e.g. 'ml.g6.4xlarge')"]


def test_a_duplicate_type_is_named():
    assert problems_for(sonic__instance_pools="ml.g6e.2xlarge,ml.g6e.4xlarge,ml.g6e.2xlarge") == [
        'sonic.instance_pools=["ml.g6e.2xlarge", "ml.g6e.4xlarge", "ml.g6e.2xlarge"]: lists ml.g6e.2xlarge more than '
        "once; each instance type is one pool"]


def test_a_type_that_cannot_hold_max_num_seqs_is_named():
    # At 45000 tokens (constructs_lib/facts/capacity.py), one L40S (ml.g6e.2xlarge) holds 23 live streams; one L4
    # (ml.g6.4xlarge) 8.
    problems = problems_for(voxtral__instance_type="ml.g6e.2xlarge",
                            voxtral__instance_pools="ml.g6e.2xlarge,ml.g6.4xlarge", voxtral__max_num_seqs="9")
    assert len(problems) == 1
    assert problems[0].startswith(
        "voxtral.instance_pools='ml.g6.4xlarge' with voxtral.max_model_len=45000 and voxtral.max_num_seqs=9: one "
        "NVIDIA L4 (22.5 GiB, 0.9 of it for vLLM: 20.2 GiB) holds the weights (8.3 GiB), activations and CUDA graphs "
        "(1.5 GiB) and KV cache (10.5 GiB) for at most 8 live stream(s) of that length")


def test_auto_sizes_each_pool_type_and_the_smallest_cap_sizes_stream_counts():
    context = {**cdk_json_context(), "voxtral.instance_type": "ml.g6e.2xlarge",
               "voxtral.instance_pools": "ml.g6e.2xlarge,ml.g6.4xlarge"}
    voxtral = load_settings(context).voxtral
    assert voxtral.stream_caps == {"ml.g6e.2xlarge": 23, "ml.g6.4xlarge": 4}  # the L4's compute budget
    assert voxtral.streams_per_instance == 4 and voxtral.caps_differ
    context["voxtral.instance_pools"] = "ml.g6e.2xlarge,ml.g6e.4xlarge"
    voxtral = load_settings(context).voxtral
    assert voxtral.streams_per_instance == 23 and not voxtral.caps_differ


def test_a_type_without_gpu_is_named():
    assert problems_for(voxtral__instance_pools="ml.g6.xlarge,ml.m5.xlarge") == [
        f"voxtral.instance_pools='ml.m5.xlarge': has no GPU; vLLM needs one (GPU types: {instance_types.gpu_families()})"]


def test_a_type_the_sonic_package_does_not_support_is_named():
    assert problems_for(sonic__instance_pools="ml.g6e.2xlarge,ml.g6.4xlarge") == [
        "sonic.instance_pools='ml.g6.4xlarge': the Sonic 3.6 model package supports ml.g6e.xlarge or larger, "
        "ml.g7e.2xlarge or larger, ml.g7.2xlarge or larger, ml.p5.48xlarge and ml.p5en.48xlarge"]


def test_the_pools_start_with_the_instance_type_and_count_at_most_five():
    assert problems_for(voxtral__instance_pools="ml.g6e.2xlarge,ml.g6.4xlarge") == [
        'voxtral.instance_pools=["ml.g6e.2xlarge", "ml.g6.4xlarge"]: must start with voxtral.instance_type='
        "'ml.g6.xlarge', the priority-1 pool (set both: the instance type is the one tried first)"]
    six = "ml.g6.xlarge,ml.g6.8xlarge,ml.g6.16xlarge,ml.g6e.xlarge,ml.g6e.2xlarge,ml.g6e.4xlarge"
    assert problems_for(voxtral__instance_pools=six) == [
        f"voxtral.instance_pools={json.dumps(six.split(','))}: must list at most 5 instance types (InstancePools)"]


def test_the_provisioning_timeout_is_300_to_3600_seconds():
    assert problems_for(voxtral__instance_provision_timeout_s="120") == [
        "voxtral.instance_provision_timeout_s=120: must be between 300 and 3600 seconds "
        "(VariantInstanceProvisionTimeoutInSeconds)"]


def test_the_variant_props_check_the_same_rules_by_prop_name():
    p = Problems()
    ProductionVariant("ml.g6.4xlarge", instance_pools=("ml.g6.4xlarge", "ml.g6.4xlarge"), provision_timeout_s=4000).problems(p)
    assert list(p) == [
        "provision_timeout_s=4000: must be between 300 and 3600 seconds (VariantInstanceProvisionTimeoutInSeconds)",
        'instance_pools=["ml.g6.4xlarge", "ml.g6.4xlarge"]: lists ml.g6.4xlarge more than once; each instance type is '
        "one pool"]
    assert ProductionVariant("ml.g6.4xlarge").instance_types == ("ml.g6.4xlarge",)
    assert ProductionVariant("ml.g6.4xlarge").instance_provision_timeout_s is None
