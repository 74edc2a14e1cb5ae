"""The <prefix>-Artifacts stack's template: the bridge image's repository and its copy, the model
bucket and its access logs, the exports the endpoint stacks import. Tests that read this stack
together with another are in test_cross_stack.py; cfn-lint and cdk-nag over each variant in
test_lint.py; settings refused before a synth in test_settings_app.py."""

from __future__ import annotations

import json

import pytest
from aws_cdk.assertions import Match, Template

from tests.app.kit import fixture_changed, only  # noqa: F401 (fixtures)

# --- cdk.json's settings -------------------------------------------------------------------------
# Template assertions on the app synthesized with cdk.json's settings: every property the synth
# issue names.


@pytest.fixture(scope="module")
def artifacts(synthesized):
    return Template.from_json(synthesized.template("Artifacts"))


def statements_of(template: Template) -> list[dict]:
    """Every IAM statement of every AWS::IAM::Policy and ManagedPolicy in ``template``."""
    out = []
    for rtype in ("AWS::IAM::Policy", "AWS::IAM::ManagedPolicy"):
        for resource in template.find_resources(rtype).values():
            out.extend(resource["Properties"]["PolicyDocument"]["Statement"])
    return out


def test_repository_scans_on_push_is_immutable_and_keeps_newest_images(artifacts):
    repo = only(artifacts, "AWS::ECR::Repository")
    props = repo["Properties"]
    assert props["ImageScanningConfiguration"] == {"ScanOnPush": True}
    assert props["ImageTagMutability"] == "IMMUTABLE"
    policy = json.loads(props["LifecyclePolicy"]["LifecyclePolicyText"])
    (rule,) = policy["rules"]
    assert rule["selection"] == {
        "tagStatus": "any",
        "countType": "imageCountMoreThan",
        "countNumber": 10,
    }
    assert rule["action"] == {"type": "expire"}
    assert repo["DeletionPolicy"] == "Delete"
    assert "RepositoryName" not in props
    # empty_on_delete: the repository's images are removed with it.
    assert props["EmptyOnDelete"] is True


def test_image_is_copied_under_the_asset_hash_and_copy_depends_on_repository(
    synthesized, artifacts
):
    copies = artifacts.find_resources("Custom::CDKECRDeployment")
    ((_logical_id, copy),) = copies.items()
    repo_id = next(iter(artifacts.find_resources("AWS::ECR::Repository")))
    assert repo_id in copy["DependsOn"]
    assert copy["Properties"]["ImageArch"] == "amd64"
    dest = json.dumps(copy["Properties"]["DestImage"])
    assets = json.loads((synthesized.outdir / "RealtimeVoice-Artifacts.assets.json").read_text())
    (image_hash,) = assets["dockerImages"]
    assert f":{image_hash}" in dest, "destination tag must be the asset hash"
    assert "latest" not in dest
    image = assets["dockerImages"][image_hash]
    assert image["source"]["platform"] == "linux/amd64"


def test_copy_role_can_push_only_to_the_bridge_repository(artifacts):
    (policy,) = [
        p
        for p in artifacts.find_resources("AWS::IAM::Policy").values()
        if any(
            s.get("Sid") == "PushBridgeImage"
            for s in p["Properties"]["PolicyDocument"]["Statement"]
        )
    ]
    by_sid = {s["Sid"]: s for s in policy["Properties"]["PolicyDocument"]["Statement"]}
    repo_id = next(iter(artifacts.find_resources("AWS::ECR::Repository")))
    assert by_sid["PushBridgeImage"]["Resource"] == {"Fn::GetAtt": [repo_id, "Arn"]}
    assert "ecr:PutImage" in by_sid["PushBridgeImage"]["Action"]
    assert by_sid["RegistryLogin"] == {
        "Sid": "RegistryLogin",
        "Action": "ecr:GetAuthorizationToken",
        "Effect": "Allow",
        "Resource": "*",
    }
    # The only "*" of the copy role is the registry login; no statement anywhere pushes images with
    # "*".
    assert [s["Sid"] for s in by_sid.values() if s["Resource"] == "*"] == ["RegistryLogin"]
    for statement in statements_of(artifacts):
        if statement["Resource"] == "*":
            assert "ecr:PutImage" not in json.dumps(statement["Action"]), statement


def test_model_bucket_is_private_tls_only_encrypted_logged_and_destroyed(artifacts):
    buckets = artifacts.find_resources("AWS::S3::Bucket")
    model_id = next(k for k, v in buckets.items() if "LoggingConfiguration" in v["Properties"])
    log_id = next(k for k in buckets if k != model_id)
    model = buckets[model_id]["Properties"]
    assert model["PublicAccessBlockConfiguration"] == {
        "BlockPublicAcls": True,
        "BlockPublicPolicy": True,
        "IgnorePublicAcls": True,
        "RestrictPublicBuckets": True,
    }
    assert model["BucketEncryption"]["ServerSideEncryptionConfiguration"][0][
        "ServerSideEncryptionByDefault"
    ] == {"SSEAlgorithm": "AES256"}
    assert model["LoggingConfiguration"]["DestinationBucketName"] == {"Ref": log_id}
    assert "BucketName" not in model
    for bucket_id in (model_id, log_id):
        assert buckets[bucket_id]["DeletionPolicy"] == "Delete"
        # TLS only: a Deny on aws:SecureTransport=false in the bucket policy.
        artifacts.has_resource_properties(
            "AWS::S3::BucketPolicy",
            {
                "Bucket": {"Ref": bucket_id},
                "PolicyDocument": {
                    "Statement": Match.array_with(
                        [
                            Match.object_like(
                                {
                                    "Effect": "Deny",
                                    "Condition": {"Bool": {"aws:SecureTransport": "false"}},
                                }
                            )
                        ]
                    )
                },
            },
        )
    # Objects go with the buckets on destroy (retain_data=false); the log bucket is emptied after
    # the model bucket is deleted (the model bucket's own emptying writes access logs into it).
    empties = artifacts.find_resources("Custom::S3AutoDeleteObjects")
    assert len(empties) == 2
    buckets = artifacts.find_resources("AWS::S3::Bucket")
    (model_id,) = [k for k, v in buckets.items() if "LoggingConfiguration" in v["Properties"]]
    (log_empty,) = [v for v in empties.values() if v["Properties"]["BucketName"]["Ref"] != model_id]
    assert model_id in log_empty.get("DependsOn", [])


# --- Other settings -----------------------------------------------------------------------------
# The app under other settings: a prebuilt image, external weights, retained data, a changed
# instance type, and each endpoint switched off. The variants come from the registry
# (tests/app/variants.py).


def test_changed_settings_keep_every_export_the_deployed_stacks_import(synthesized, changed):
    """A prebuilt image, external weights or another revision must not drop or change an export:
    CloudFormation would refuse to update the Artifacts stack while the deployed Voxtral stack
    imports it."""
    before = {
        o["Export"]["Name"]: o["Value"]
        for o in synthesized.template("Artifacts")["Outputs"].values()
        if "Export" in o
    }
    after = {
        o["Export"]["Name"]: o["Value"]
        for o in changed.template("Artifacts")["Outputs"].values()
        if "Export" in o
    }
    assert before == after
