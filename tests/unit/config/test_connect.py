"""config/connect.py: the Connect consumers' settings, refused with the rule they break."""

from __future__ import annotations

import pytest

from config.settings import SettingsError, load_settings
from tests.conftest import (
    CONNECT,
    CONNECT_INSTANCE,
    CONNECT_QUEUE,
    CONNECT_VPC,
    cdk_json_context,
)

# --- Connect --------------------------------------------------------------------------------------
# The <prefix>-Connect stack's template: least privilege, the Connect resources as the references
# require, removal policies, and cfn-lint in both network modes (cdk-nag runs as part of the synth
# and fails it on any finding).


@pytest.mark.parametrize(
    "overrides, expected",
    [
        (
            {"connect.instance_arn": None},
            "connect.instance_arn=null: must name the Amazon Connect instance",
        ),
        (
            {"connect.instance_arn": CONNECT_INSTANCE.replace("us-east-1", "eu-west-1")},
            "must be in the app's region",
        ),
        (
            {"connect.instance_arn": "arn:aws:connect:us-east-1:123:instance/x"},
            "must be an Amazon Connect instance ARN",
        ),
        (
            {"connect.stream_kms_key_arn": "alias/connect"},
            "connect.stream_kms_key_arn='alias/connect': must be a KMS key ARN",
        ),
        (
            {
                "connect.stream_kms_key_arn": "arn:aws:kms:eu-west-1:123456789012:key/11111111-2222-3333-4444-555555555555"  # noqa: E501 (an ARN has no place to break)
            },
            "the key is in eu-west-1 but the stack deploys to us-east-1",
        ),
        ({"connect.alarm_millis_behind": -1}, "connect.alarm_millis_behind=-1: must be at least 1"),
        ({"connect.retention_hours": 0}, "0 keeps no data"),
        (
            {"connect.queue_arn": None},
            "connect.queue_arn=null: must name the queue the example flow transfers calls to",
        ),
        ({"connect.queue_arn": CONNECT_INSTANCE}, "must be an Amazon Connect queue ARN"),
        (
            {"connect.queue_arn": CONNECT_QUEUE.replace("11111111-", "22222222-")},
            "must be a queue of the instance",
        ),
        (
            {"connect.cpu": 1000},
            "connect.cpu=1000: must be Fargate task CPU units, one of 256, 512, 1024, 2048",
        ),
        (
            {"connect.memory_mib": 1024},
            "connect.memory_mib=1024: must be a memory Fargate pairs with connect.cpu=1024: "
            "2048, 3072, 4096, 5120, 6144, 7168, 8192 MiB",
        ),
        (
            {"connect.cpu": 8192, "connect.memory_mib": 18432},
            "pairs with connect.cpu=8192: 16384-61440 in steps of 4096 MiB",
        ),
        ({"connect.stream_prefix": "bad prefix"}, "must be 1-128 of [a-zA-Z0-9_.-]"),
        ({"encryption.create_key": False}, "needs a KMS key (EncryptionConfig is required)"),
        (
            {"network.mode": "vpc", "connect.kvs_vpc_endpoint": False},
            "connect.kvs_vpc_endpoint=false: must be true with network.mode=vpc and no "
            "network.vpc_id",
        ),
        (
            {"network.mode": "vpc", "network.create_endpoints": False},
            "keep network.create_endpoints=true",
        ),
        (
            {
                "network.mode": "vpc",
                "region": "eu-north-1",
                "connect.instance_arn": CONNECT_INSTANCE.replace("us-east-1", "eu-north-1"),
                "connect.queue_arn": CONNECT_QUEUE.replace("us-east-1", "eu-north-1"),
            },
            "name an existing VPC whose subnets have egress (network.vpc_id)",
        ),
        ({"voxtral.enabled": False}, "needs voxtral.enabled=true"),
        (
            {
                **CONNECT_VPC,
                "region": "eu-north-1",
                "connect.instance_arn": CONNECT_INSTANCE.replace("us-east-1", "eu-north-1"),
                "connect.queue_arn": CONNECT_QUEUE.replace("us-east-1", "eu-north-1"),
            },
            "Kinesis Video Streams has no interface VPC endpoint in eu-north-1 (it has one in "
            "af-south-1",
        ),
    ],
)
def test_connect_settings_are_refused_with_the_rule_they_break(overrides, expected):
    with pytest.raises(SettingsError) as raised:
        load_settings({**cdk_json_context(), **CONNECT, **overrides})
    assert expected in str(raised.value)
