"""DataKey in a bare stack: a new key rotates and names CloudWatch Logs for its prefixes only; a
given key is used as it is."""

from __future__ import annotations

import json

import pytest

from constructs_lib.network.encryption import DataKey
from constructs_lib.network.props import DataKeyProps
from constructs_lib.validation import PropsError
from tests.unit.constructs_lib.construct_kit import ACCOUNT, bare_stack, only, resources

KEY = f"arn:aws:kms:us-east-1:{ACCOUNT}:key/0f0e0d0c-0b0a-0908-0706-050403020100"


def test_a_new_key_rotates_and_names_cloudwatch_logs_for_its_prefixes_only():
    stack = bare_stack()
    key = DataKey(
        stack, "Key", DataKeyProps(retain=True, log_group_prefixes=["/aws/sagemaker/Endpoints/"])
    )
    assert key.created
    _, resource = only(stack, "AWS::KMS::Key")
    assert (
        resource["Properties"]["EnableKeyRotation"] is True
        and resource["DeletionPolicy"] == "Retain"
    )
    (logs,) = [
        s
        for s in resource["Properties"]["KeyPolicy"]["Statement"]
        if s.get("Sid") == "CloudWatchLogsEncryptLogGroups"
    ]
    assert logs["Principal"] == {"Service": "logs.us-east-1.amazonaws.com"}
    (arn,) = logs["Condition"]["ArnLike"]["kms:EncryptionContext:aws:logs:arn"]
    assert json.dumps(arn).endswith(
        f':logs:us-east-1:{ACCOUNT}:log-group:/aws/sagemaker/Endpoints/*"]]}}'
    )


def test_a_given_key_is_used_as_it_is_and_checked():
    stack = bare_stack()
    key = DataKey(stack, "Key", DataKeyProps(kms_key_arn=KEY))
    assert not key.created and key.key_arn == KEY and resources(stack, "AWS::KMS::Key") == {}
    with pytest.raises(
        PropsError, match=r"the key is in eu-west-1 but the stack deploys to us-east-1"
    ):
        DataKey(
            bare_stack(), "Key", DataKeyProps(kms_key_arn=KEY.replace("us-east-1", "eu-west-1"))
        )
