"""voicectl/operations/verify_resolver.py: the intrinsic functions the CDK emits, resolved from
exports, pseudo parameters and the deployed stack's physical ids (through a deployment:
test_verify.py)."""

from __future__ import annotations

import pytest

from tests.unit.voicectl.operations.verify_testkit import ACCOUNT
from voicectl.operations.verify_resolver import TemplateResolver, Unresolvable


def test_resolves_the_intrinsics_the_cdk_emits_for_an_asset_image():
    repository_arn = f"arn:aws:ecr:eu-west-1:{ACCOUNT}:repository/bridge"
    exports = {"Artifacts:RepoArn": repository_arn, "Artifacts:RepoName": "bridge"}
    resolver = TemplateResolver(ACCOUNT, "eu-west-1", lambda: exports)
    image = {
        "Fn::Join": [
            "",
            [
                {"Fn::Select": [4, {"Fn::Split": [":", {"Fn::ImportValue": "Artifacts:RepoArn"}]}]},
                ".dkr.ecr.",
                {"Fn::Select": [3, {"Fn::Split": [":", {"Fn::ImportValue": "Artifacts:RepoArn"}]}]},
                ".",
                {"Ref": "AWS::URLSuffix"},
                "/",
                {"Fn::ImportValue": "Artifacts:RepoName"},
                ":abc123",
            ],
        ]
    }
    assert resolver.resolve(image) == f"{ACCOUNT}.dkr.ecr.eu-west-1.amazonaws.com/bridge:abc123"
    assert resolver.resolve({"Fn::Sub": "arn:${AWS::Partition}:s3:::b"}) == "arn:aws:s3:::b"
    assert resolver.resolve_deep({"Subnets": [{"Fn::ImportValue": "Artifacts:RepoName"}, "s"]}) == {
        "Subnets": ["bridge", "s"]
    }
    with pytest.raises(Unresolvable, match="export Missing"):
        resolver.resolve({"Fn::ImportValue": "Missing"})
    with pytest.raises(Unresolvable, match="Ref Model"):
        resolver.resolve({"Ref": "Model"})
    physical = TemplateResolver(
        ACCOUNT,
        "eu-west-1",
        dict,
        resource_types={"Key": "AWS::KMS::Key", "R": "AWS::IAM::Role"},
        physical_ids=lambda: {"Key": "k-1", "R": "role-name"},
    )
    assert (
        physical.resolve({"Fn::GetAtt": ["Key", "Arn"]})
        == f"arn:aws:kms:eu-west-1:{ACCOUNT}:key/k-1"
    )
    assert physical.resolve({"Ref": "R"}) == "role-name"
    with pytest.raises(Unresolvable, match=r"Fn::GetAtt R.Arn"):
        physical.resolve(
            {"Fn::GetAtt": ["R", "Arn"]}
        )  # a role's ARN holds its path, which the id does not
