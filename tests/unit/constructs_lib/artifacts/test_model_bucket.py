"""constructs_lib/artifacts/model_bucket.py: the model bucket in a bare stack: private, TLS-only,
versioned, SSE-S3 or the key given, access logs to a log bucket emptied last, and the deny of other
principals when asked."""

from __future__ import annotations

from aws_cdk import Stack, aws_kms as kms

from constructs_lib.artifacts.model_bucket import ModelBucket, ModelBucketProps
from tests.unit.constructs_lib.construct_kit import ENV, resources, unit_app

ROLE = "arn:aws:iam::123456789012:role/voxtral-execution"
#: The access-log bucket is bucket-owner-enforced and takes S3's log delivery through a bucket
#: policy, which the CDK does only with this feature flag (``cdk init`` sets it; so does this app's
#: cdk.json). Without it the CDK gives the log bucket the LogDeliveryWrite ACL and refuses the synth
#: ("objectOwnership must be set to ObjectWriter").
ACCESS_LOGS_BY_POLICY = {"@aws-cdk/aws-s3:serverAccessLogsUseBucketPolicy": True}


def bare_stack() -> Stack:
    return Stack(unit_app(context=ACCESS_LOGS_BY_POLICY), "Test", env=ENV)


def buckets(stack) -> tuple[dict, dict]:
    """(model bucket, access-log bucket) by their construct ids."""
    found = resources(stack, "AWS::S3::Bucket")
    (model,) = [b for i, b in found.items() if i.startswith("ModelsBucket")]
    (logs,) = [b for i, b in found.items() if i.startswith("ModelsAccessLogs")]
    return model, logs


def test_the_defaults_give_a_versioned_sse_s3_bucket_logging_to_its_log_bucket_both_deleted_on_destroy():  # noqa: E501 (a test's name says what it checks)
    stack = bare_stack()
    ModelBucket(stack, "Models", ModelBucketProps())
    model, logs = buckets(stack)
    properties = model["Properties"]
    assert properties["VersioningConfiguration"] == {"Status": "Enabled"}
    assert properties["BucketEncryption"]["ServerSideEncryptionConfiguration"] == [
        {"ServerSideEncryptionByDefault": {"SSEAlgorithm": "AES256"}}
    ]
    assert properties["PublicAccessBlockConfiguration"] == {
        "BlockPublicAcls": True,
        "BlockPublicPolicy": True,
        "IgnorePublicAcls": True,
        "RestrictPublicBuckets": True,
    }
    assert properties["LoggingConfiguration"]["LogFilePrefix"] == "model-bucket/"
    assert properties["LifecycleConfiguration"]["Rules"] == [
        {
            "AbortIncompleteMultipartUpload": {"DaysAfterInitiation": 7},
            "NoncurrentVersionExpiration": {"NoncurrentDays": 30},
            "Status": "Enabled",
        }
    ]
    assert logs["Properties"]["LifecycleConfiguration"]["Rules"] == [
        {"ExpirationInDays": 365, "Status": "Enabled"}
    ]
    assert model["DeletionPolicy"] == logs["DeletionPolicy"] == "Delete"
    assert len(resources(stack, "Custom::S3AutoDeleteObjects")) == 2


def test_retained_data_keeps_both_buckets_and_empties_neither():
    stack = bare_stack()
    ModelBucket(stack, "Models", ModelBucketProps(retain_data=True))
    model, logs = buckets(stack)
    assert model["DeletionPolicy"] == logs["DeletionPolicy"] == "Retain"
    assert resources(stack, "Custom::S3AutoDeleteObjects") == {}


def test_a_customer_key_encrypts_with_a_bucket_key_and_other_principals_are_denied_objects():
    stack = bare_stack()
    key = kms.Key(stack, "Key")
    ModelBucket(stack, "Models", ModelBucketProps(encryption_key=key, data_principal_arns=[ROLE]))
    model, _ = buckets(stack)
    (rule,) = model["Properties"]["BucketEncryption"]["ServerSideEncryptionConfiguration"]
    assert (
        rule["BucketKeyEnabled"] is True
        and rule["ServerSideEncryptionByDefault"]["SSEAlgorithm"] == "aws:kms"
    )
    (policy,) = [
        p
        for i, p in resources(stack, "AWS::S3::BucketPolicy").items()
        if i.startswith("ModelsBucket")
    ]
    (deny,) = [
        s
        for s in policy["Properties"]["PolicyDocument"]["Statement"]
        if s.get("Sid") == "OnlyModelRolesUseObjects"
    ]
    assert deny["Effect"] == "Deny" and deny["Principal"] == {"AWS": "*"}
    assert deny["Action"] == ["s3:GetObject*", "s3:PutObject*", "s3:DeleteObject*"]
    allowed = deny["Condition"]["ArnNotLike"]["aws:PrincipalArn"]
    assert allowed[0] == ROLE and allowed[1] == {
        "Fn::GetAtt": ["CustomS3AutoDeleteObjectsCustomResourceProviderRole3B1BD092", "Arn"]
    }  # it empties the bucket on destroy
