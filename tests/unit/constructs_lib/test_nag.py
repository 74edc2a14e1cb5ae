"""constructs_lib/nag.py: values rendered as cdk-nag writes them in finding ids, compliance
acknowledgments in every pack, and checkov skips written into the resource's metadata."""

from __future__ import annotations

import pytest
from aws_cdk import RemovalPolicy, aws_s3 as s3, aws_sqs as sqs

from constructs_lib import nag
from tests.unit.constructs_lib.construct_kit import bare_stack, only


def test_tokens_render_as_cdk_nag_writes_them():
    stack = bare_stack()
    bucket = s3.Bucket(stack, "Models")
    bucket_id = stack.get_logical_id(bucket.node.default_child)
    assert nag.nag_render(stack, "plain/path") == "plain/path"
    assert nag.nag_render(stack, bucket.bucket_name) == f"<{bucket_id}>"
    assert nag.nag_render(stack, bucket.arn_for_objects("p/*")) == f"<{bucket_id}.Arn>/p/*"
    assert nag.nag_render(stack, f"arn:aws:s3:::{stack.region}") == "arn:aws:s3:::us-east-1"


def test_an_intrinsic_it_does_not_know_is_refused():
    with pytest.raises(ValueError, match=r"cannot render .*Fn::Select.* as cdk-nag does"):
        nag._render({"Fn::Select": [0, ["a"]]})


def test_checkov_skips_are_added_once_with_their_reasons():
    stack = bare_stack()
    queue = sqs.Queue(stack, "Calls")
    nag.skip_checkov(queue, "AWS::SQS::Queue", {"CKV_AWS_27": "why"})
    nag.skip_checkov(queue, "AWS::SQS::Queue", {"CKV_AWS_27": "again", "CKV_AWS_99": "other"})
    nag.skip_checkov(queue, "AWS::S3::Bucket", {"CKV_AWS_18": "not this type"})
    _, resource = only(stack, "AWS::SQS::Queue")
    assert resource["Metadata"]["checkov"] == {
        "skip": [{"id": "CKV_AWS_27", "comment": "why"}, {"id": "CKV_AWS_99", "comment": "other"}]
    }


def test_compliance_rules_are_acknowledged_in_every_pack():
    stack = bare_stack()
    queue = sqs.Queue(stack, "Calls")
    nag.acknowledge_compliance(queue, {"SQSQueueDLQ": "the reason"})
    assert nag.COMPLIANCE_PACKS == ("HIPAA.Security", "NIST.800.53.R5")
    assert [(entry.type, entry.data) for entry in queue.node.metadata] == [
        ("aws:cdk:acknowledged-rules", {"Annotation::HIPAA.Security-SQSQueueDLQ": "the reason"}),
        ("aws:cdk:acknowledged-rules", {"Annotation::NIST.800.53.R5-SQSQueueDLQ": "the reason"}),
    ]


def test_stack_singletons_are_the_top_level_constructs_of_a_prefix():
    stack = bare_stack()
    s3.Bucket(stack, "Models", auto_delete_objects=True, removal_policy=RemovalPolicy.DESTROY)
    assert [c.node.id for c in nag.stack_singletons(stack, "Custom::S3AutoDeleteObjects")] == [
        "Custom::S3AutoDeleteObjectsCustomResourceProvider"
    ]
    assert nag.stack_singletons(stack, "Custom::Nothing") == []
