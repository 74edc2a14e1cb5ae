"""The registry of synthesized variants: every app any test synthesizes from cdk.json's context,
each named once with its overrides. tests/conftest.py synthesizes each variant once per test session
(shared by pytest-xdist's workers) and holds it to the rule book (tools/cfn_rules) then; tests
take a variant through the ``app_variant`` fixture or the named fixtures of tests/conftest.py.

A test that needs an app the registry lacks adds a variant here (a name, its overrides, one line
saying what it is for), never a synthesis of its own.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

# -- values the overrides name (tests assert on them) ---------------------------------------------

CONNECT_INSTANCE = (
    "arn:aws:connect:us-east-1:123456789012:instance/11111111-2222-3333-4444-555555555555"
)
CONNECT_QUEUE = f"{CONNECT_INSTANCE}/queue/99999999-8888-7777-6666-555555555555"
#: An image in another account's registry with a tag that names no CUDA version.
PREBUILT_IMAGE = "123456789012.dkr.ecr.us-east-1.amazonaws.com/team/voxtral-bridge:2026-11-01"
EXTERNAL_WEIGHTS = "s3://team-models/voxtral/2602/"
#: A customer managed key given by ARN (public mode, and the SageMaker volume key of ``changed``).
PUBLIC_KMS_KEY = "arn:aws:kms:us-east-1:123456789012:key/0f0e0d0c-0b0a-0908-0706-050403020100"
#: A customer managed key given by ARN to the ECS target.
ECS_KMS_KEY = "arn:aws:kms:us-east-1:123456789012:key/12345678-1234-1234-1234-123456789012"
ECS_CERT = "arn:aws:acm:us-east-1:123456789012:certificate/12345678-1234-1234-1234-123456789012"
SONIC_ECS_IMAGE = "123456789012.dkr.ecr.us-east-1.amazonaws.com/cartesia/sonic:3.6"

#: An existing VPC, described by settings (two subnets in two zones, their route tables).
EXISTING_VPC = {
    "network.mode": "vpc",
    "network.vpc_id": "vpc-0123456789abcdef0",
    "network.subnet_ids": "subnet-0123456789abcdef0,subnet-0123456789abcdef1",
    "network.availability_zones": "us-east-1a,us-east-1b",
    "network.route_table_ids": "rtb-0123456789abcdef0,rtb-0123456789abcdef1",
    "network.vpc_cidr": "10.20.0.0/16",
}

# -- overrides shared by more than one variant ----------------------------------------------------

CONNECT = {
    "connect.enabled": True,
    "connect.instance_arn": CONNECT_INSTANCE,
    "connect.create_storage_config": True,
    "connect.create_example_flow": True,
    "connect.queue_arn": CONNECT_QUEUE,
    "encryption.create_key": True,
}
CONNECT_VPC = {**CONNECT, **EXISTING_VPC}

#: Operations settings that differ from cdk.json: Sonic on a 4-GPU instance scaling on concurrency,
#: Voxtral at a fixed size (no scalable target) with a lower latency threshold, an alarm e-mail, and
#: literal image and weights URIs (so `voicectl verify` can be tested against moto without
#: CloudFormation exports).
OPS = {
    "alarm_email": "oncall@example.com",
    # The earlier default (one L4 and 16 vCPUs): the alarm and verify figures are pinned to it.
    "voxtral.instance_type": "ml.g6.4xlarge",
    "sonic.instance_type": "ml.g6e.12xlarge",
    "sonic.scaling_metric": "concurrent_requests",
    "sonic.scaling_target": "4",
    "sonic.max_instances": "3",
    "voxtral.min_instances": "2",
    "voxtral.max_instances": "2",
    "voxtral.initial_instance_count": "2",
    "voxtral.alarm_model_latency_p90_ms": "250",
    "voxtral.image_uri": PREBUILT_IMAGE,
    "voxtral.model_s3_uri": EXTERNAL_WEIGHTS,
}
#: Capacity fallback over :data:`OPS`: Voxtral on L4, else L40S, else A10G (one GPU each, 16 then 8
#: vCPUs); Sonic on a 4-GPU ml.g6e.12xlarge, else a 1-GPU ml.g6e.2xlarge, with its own provisioning
#: timeout.
POOLS = {
    "voxtral.instance_pools": "ml.g6.4xlarge,ml.g6e.2xlarge,ml.g5.4xlarge",
    "sonic.instance_pools": "ml.g6e.12xlarge,ml.g6e.2xlarge",
    "sonic.instance_provision_timeout_s": "900",
}
#: Internet-facing with HTTPS, Spot, one zone in a cluster placement group.
ECS_OPTIONS = {
    "voxtral.target": "ecs",
    "ecs.load_balancer": "internet_facing",
    "ecs.certificate_arn": ECS_CERT,
    "ecs.capacity": "spot",
    "ecs.placement": "single_az",
    "ecs.instance_type": "g6e.2xlarge",
    "ecs.min_tasks": 3,
    "ecs.max_tasks": 6,
}
SONIC_ECS = {
    "sonic.target": "ecs",
    "sonic.image_uri": SONIC_ECS_IMAGE,
    "sonic.container_port": 8000,
    "sonic.health_path": "/health",
    "sonic.min_instances": 2,
    "sonic.max_instances": 3,
}
ECS_VPC = {"network.mode": "vpc", "voxtral.target": "ecs"}
ECS_VPC_EXISTING = {
    **ECS_VPC,
    **EXISTING_VPC,
    "network.caller_cidrs": "10.20.0.0/16,192.168.0.0/24",
    "network.create_endpoints": "false",
}
#: The voice agent in public mode: a Bedrock model id (no inference profile), internet-facing on
#: HTTPS.
AGENT_MODEL = "amazon.nova-lite-v1:0"
AGENT_PUBLIC = {
    "agent.enabled": True,
    "agent.llm_model_id": AGENT_MODEL,
    "agent.internet_facing": True,
    "agent.certificate_arn": ECS_CERT,
}
VPC_EXISTING = {
    **EXISTING_VPC,
    "network.caller_cidrs": "10.20.0.0/16,192.168.0.0/24",
    "network.require_source_vpce": "true",
}


@dataclass(frozen=True)
class Variant:
    """One synthesized app: cdk.json's context with ``overrides`` on top."""

    name: str
    overrides: dict[str, Any] = field(default_factory=dict)
    doc: str = ""


VARIANTS: dict[str, Variant] = {
    v.name: v
    for v in (
        Variant("default", {}, "cdk.json as it is: public mode, both endpoints on SageMaker"),
        Variant(
            "vpc", {"network.mode": "vpc"}, "network.mode=vpc: a new VPC and a key the app makes"
        ),
        Variant(
            "vpc_existing",
            VPC_EXISTING,
            "an existing VPC, the caller policy bound to the sagemaker.runtime endpoint",
        ),
        Variant(
            "public_key",
            {"encryption.kms_key_arn": PUBLIC_KMS_KEY, **AGENT_PUBLIC},
            "public mode under a customer managed key, with the voice agent (Bedrock model id, "
            "internet-facing)",
        ),
        Variant(
            "connect",
            CONNECT,
            "connect.enabled with the storage config, the example flow and a key (public mode)",
        ),
        Variant(
            "connect_vpc", CONNECT_VPC, "as connect, in an existing VPC (its subnets have egress)"
        ),
        Variant(
            "connect_ecs",
            {**CONNECT, "voxtral.target": "ecs"},
            "as connect, with Voxtral on ECS: the consumers call the service's URL with its "
            "token secret",
        ),
        Variant(
            "connect_own_vpc",
            {**CONNECT, "network.mode": "vpc"},
            "as connect, in the isolated VPC the app makes (the consumers' endpoints made by the "
            "network)",
        ),
        Variant(
            "ops",
            OPS,
            "other operations settings: alarms, fixed-size Voxtral, prebuilt image, external "
            "weights",
        ),
        Variant(
            "ops_pools",
            {**OPS, **POOLS},
            "ops with instance pools (capacity fallback) on both endpoints",
        ),
        Variant(
            "changed",
            {
                "voxtral.instance_type": "ml.g6e.xlarge",
                "voxtral.image_uri": PREBUILT_IMAGE,
                "voxtral.model_s3_uri": "s3://team-models/voxtral/2602",
                "voxtral.volume_kms_key_arn": PUBLIC_KMS_KEY,
                "retain_data": "true",
                "sonic.enabled": "false",
            },
            "Voxtral only, another instance type, a prebuilt image, external weights (no "
            "trailing /), retained data",
        ),
        Variant("sonic_only", {"voxtral.enabled": "false"}, "Voxtral switched off"),
        # Merged: the test of the switched-off staging build and the FP8 test each synthesized a
        # Voxtral-only app of their own; one reads the Artifacts stack (no build project, the
        # ModelS3Uri output), the other the Voxtral Model's environment, which neither the instance
        # type nor the staging switch of the other reaches. The transcription delay joined it too:
        # it reaches the Model's environment, and the longest delay needs a TimeToFirstDelta
        # threshold above its first delta (2482.5 ms).
        Variant(
            "hopper_fp8_no_staging",
            {
                "voxtral.instance_type": "ml.p5.4xlarge",
                "voxtral.kv_cache_dtype": "fp8",
                "voxtral.stage_model": "false",
                "sonic.enabled": False,
                "voxtral.transcription_delay_ms": 2400,
                "voxtral.alarm_time_to_first_delta_p90_ms": 3000,
            },
            "Voxtral alone on one H100 with an FP8 KV cache, the staging build switched off "
            "(weights staged by hand), a 2400 ms transcription delay",
        ),
        Variant("ecs", {"voxtral.target": "ecs"}, "Voxtral on ECS with the ECS defaults"),
        Variant(
            "ecs_options",
            {**ECS_OPTIONS, "voxtral.transcription_delay_ms": 160},
            "Voxtral on ECS with every ECS option set, and a 160 ms transcription delay",
        ),
        # Merged: the KMS key test and the stream-cap warning test each synthesized an ECS app of
        # their own; neither assertion touches what the other override changes (the key reaches IAM
        # and the staging build, the stream cap the container environment and one warning), so one
        # app serves both.
        Variant(
            "ecs_key_stream_cap",
            {
                "voxtral.target": "ecs",
                "encryption.kms_key_arn": ECS_KMS_KEY,
                "voxtral.max_num_seqs": 6,
            },
            "Voxtral on ECS under a customer managed key, with a stream cap above the L4's "
            "compute cap",
        ),
        Variant(
            "ecs_vpc",
            {**ECS_VPC, "agent.enabled": True},
            "Voxtral on ECS in network.mode=vpc (a new VPC), with the voice agent (default "
            "inference profile)",
        ),
        Variant(
            "ecs_vpc_existing",
            ECS_VPC_EXISTING,
            "Voxtral on ECS in an existing VPC, no interface endpoints made",
        ),
        Variant("sonic_ecs", SONIC_ECS, "Sonic on ECS (public mode)"),
        Variant(
            "both_ecs_vpc",
            {**SONIC_ECS, "voxtral.target": "ecs", "network.mode": "vpc"},
            "both services on ECS in network.mode=vpc",
        ),
    )
}
