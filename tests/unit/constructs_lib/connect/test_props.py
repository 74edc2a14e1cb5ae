"""constructs_lib/connect/props.py: ConnectTranscriptionProps and the Connect, Kinesis Video Streams
and Fargate rules it is checked against, without aws_cdk."""

from __future__ import annotations

import subprocess
import sys

import pytest

from constructs_lib.connect.props import FARGATE_MEMORY_MIB, ConnectTranscriptionProps
from constructs_lib.validation import Problems
from tests.conftest import ROOT

INSTANCE = "arn:aws:connect:us-east-1:123456789012:instance/11111111-2222-3333-4444-555555555555"
QUEUE = f"{INSTANCE}/queue/aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee"


def problems(**overrides) -> list[str]:
    values = {
        "instance_arn": INSTANCE,
        "stream_prefix": "voice-live",
        "image_directory": ".",
        "endpoint_name": "voxtral-realtime",
        **overrides,
    }
    p = Problems()
    ConnectTranscriptionProps(**values).problems(p)
    return list(p)


def test_the_least_props_are_accepted():
    assert problems() == []
    assert (
        problems(endpoint_name=None, endpoint_url="wss://bridge.internal", token_secret_arn="arn:x")
        == []
    )


def test_each_rule_names_the_prop_the_value_and_what_is_allowed():
    assert problems(
        instance_arn="arn:aws:connect:us-east-1:123456789012:instance/x",
        stream_prefix="has space",
        retention_hours=0,
        calls_per_task=101,
        min_tasks=3,
        max_tasks=2,
        transcript_ttl_days=0,
        alarm_millis_behind=0,
    ) == [
        "instance_arn='arn:aws:connect:us-east-1:123456789012:instance/x': must be an Amazon "
        "Connect instance ARN (arn:aws:connect:REGION:ACCOUNT:instance/ID)",
        "stream_prefix='has space': must be 1-128 of [a-zA-Z0-9_.-] (InstanceStorageConfig "
        "Prefix; Kinesis video stream names)",
        "retention_hours=0: must be 1-87600: 0 keeps no data, and the consumer reads stored "
        "fragments to resume and to wait",
        "calls_per_task=101: must be 1-100 (one GetMedia reader thread per call: "
        "services/connect_consumer/kvs.py READER_THREADS)",
        "min_tasks=3: must be at least 1 and at most max_tasks (2)",
        "transcript_ttl_days=0: must be 1-3650",
        "alarm_millis_behind=0: must be at least 1 (milliseconds behind the call)",
    ]


def test_exactly_one_target_and_a_storage_config_needs_a_key():
    assert problems(endpoint_url="wss://bridge.internal") == [
        "exactly one of endpoint_name (SageMaker) and endpoint_url (ECS) is set"
    ]
    assert problems(create_storage_config=True)[0].startswith(
        "stream_kms_key_arn=null: a media streams storage config needs a KMS key"
    )
    assert (
        problems(create_storage_config=True, kms_key_arn="arn:aws:kms:us-east-1:123456789012:key/k")
        == []
    )


def test_the_example_flow_needs_a_queue_of_its_own_instance():
    assert problems(create_example_flow=True)[0].startswith(
        "queue_arn=null: must name the queue the example flow"
    )
    assert problems(create_example_flow=True, queue_arn=QUEUE) == []
    other = QUEUE.replace("11111111", "99999999")
    assert problems(queue_arn=other) == [
        f"queue_arn={other!r}: must be a queue of the instance {INSTANCE} (a flow can "
        "route only to its own instance's queues)"
    ]
    assert problems(queue_arn="queue")[0] == (
        "queue_arn='queue': must be an Amazon Connect queue ARN "
        "(arn:aws:connect:REGION:ACCOUNT:instance/ID/queue/QUEUE_ID)"
    )


@pytest.mark.parametrize(
    "cpu, memory, allowed",
    [
        (256, 512, True),
        (256, 4096, False),
        (1024, 2048, True),
        (1024, 2500, False),
        (8192, 20480, True),
        (8192, 18432, False),
        (16384, 122880, True),
    ],
)
def test_cpu_and_memory_must_be_a_pair_fargate_runs(cpu, memory, allowed):
    assert (problems(cpu=cpu, memory_mib=memory) == []) is allowed
    assert memory in FARGATE_MEMORY_MIB[cpu] or not allowed


def test_a_cpu_fargate_does_not_offer_lists_the_ones_it_does():
    assert problems(cpu=3000) == [
        "cpu=3000: must be Fargate task CPU units, one of 256, 512, 1024, 2048, 4096, "
        "8192, 16384 (1024 = 1 vCPU)"
    ]
    assert problems(cpu=1024, memory_mib=1024) == [
        "memory_mib=1024: must be a memory Fargate pairs with connect.cpu=1024: 2048, 3072, "
        "4096, 5120, 6144, 7168, 8192 MiB (ECS task definition, Fargate CPU/memory)"
    ]
    assert problems(cpu=4096, memory_mib=4096) == [
        "memory_mib=4096: must be a memory Fargate pairs with connect.cpu=4096: 8192-30720 in "
        "steps of 1024 MiB (ECS task definition, Fargate CPU/memory)"
    ]


def test_the_kvs_endpoint_is_checked_against_its_regions_only_in_a_vpc():
    assert problems(region="eu-north-1") == []  # no VPC given: no endpoint to make
    assert problems(region="eu-north-1", vpc=object()) == [
        "kvs_vpc_endpoint=true: Kinesis Video Streams has no interface VPC endpoint in eu-north-1"
    ]


def test_the_props_module_imports_no_aws_cdk():
    code = (
        "import sys\nimport constructs_lib.connect.props\nimport constructs_lib.connect\n"
        "print(sorted(m for m in ('aws_cdk', 'jsii', 'constructs') if m in sys.modules))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == "[]"
