"""ModelStaging in a small test stack: template assertions, cfn-lint and cdk-nag (AwsSolutions)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from aws_cdk import (
    Acknowledgment,
    App,
    Duration,
    Stack,
    Validations,
    aws_s3 as s3,
    aws_sagemaker as sagemaker,
    aws_secretsmanager as secretsmanager,
)
from aws_cdk.assertions import Match, Template
from cdk_nag import AwsSolutionsChecks

from constructs_lib.artifacts.model_staging import (
    BUILD_SOURCE_DIR,
    CONTRACTS_DIR,
    ModelStaging,
    ModelStagingProps,
    stage_build_source,
)
from tests.conftest import ROOT
from tests.unit.constructs_lib.construct_kit import unit_app

ENV = {"account": "123456789012", "region": "us-east-1"}
REVISION = "0123456789abcdef0123456789abcdef01234567"
SECRET_ARN = "arn:aws:secretsmanager:us-east-1:123456789012:secret:hf-token-AbCdEf"
SECRET_KEY_ARN = "arn:aws:kms:us-east-1:123456789012:key/1234abcd-12ab-34cd-56ef-1234567890ab"

REPO_ROOT = ROOT


def staging_stack(app: App, name: str, **overrides) -> tuple[Stack, ModelStaging]:
    """A stack with a model bucket, the staging construct and a stand-in Voxtral Model and
    Endpoint."""
    stack = Stack(app, name, env=ENV)
    bucket = s3.Bucket(
        stack,
        "Models",
        enforce_ssl=True,
        block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
    )
    # The bucket is a stand-in for the artifacts stack's model bucket, which is not under test here.
    Validations.of(bucket).acknowledge(
        Acknowledgment(
            id="AwsSolutions::AwsSolutions-S1",
            reason="Test stand-in for the model bucket of the artifacts stack.",
        )
    )
    props = {
        "bucket": bucket,
        "prefix": "models/voxtral",
        "repository_id": "mistralai/Voxtral-Mini-4B-Realtime-2602",
        "revision": REVISION,
        "hf_token_secret": secretsmanager.Secret.from_secret_complete_arn(
            stack, "HubToken", SECRET_ARN
        ),
        **overrides,
    }
    staging = ModelStaging(stack, "ModelStaging", ModelStagingProps(**props))
    sagemaker.CfnModel(
        stack,
        "VoxtralModel",
        execution_role_arn=f"arn:aws:iam::{ENV['account']}:role/voxtral-execution",
        primary_container=sagemaker.CfnModel.ContainerDefinitionProperty(
            image=f"{ENV['account']}.dkr.ecr.us-east-1.amazonaws.com/voxtral:latest",
            model_data_source=sagemaker.CfnModel.ModelDataSourceProperty(
                s3_data_source=sagemaker.CfnModel.S3DataSourceProperty(
                    s3_uri=staging.model_s3_uri, s3_data_type="S3Prefix", compression_type="None"
                )
            ),
        ),
    )
    endpoint = sagemaker.CfnEndpoint(
        stack, "VoxtralEndpoint", endpoint_config_name="voxtral-config"
    )
    staging.add_dependent(endpoint)
    return stack, staging


@pytest.fixture(scope="module")
def synthesized(tmp_path_factory):
    """One app: the stack under test (checked by cdk-nag at synth) and two variants for the rerun
    tests."""
    outdir = tmp_path_factory.mktemp("cdk.out")
    app = unit_app(outdir=str(outdir))
    stack, staging = staging_stack(app, "StagingTest", hf_token_secret_kms_key_arn=SECRET_KEY_ARN)
    slower, _ = staging_stack(app, "StagingSlowerBuild", build_timeout=Duration.minutes(30))
    other_revision, _ = staging_stack(app, "StagingOtherRevision", revision="f" * 40)
    Validations.of(app).add_plugins(AwsSolutionsChecks(app))
    assembly = app.synth()  # raises when cdk-nag reports an unacknowledged finding
    return {
        "assembly": assembly,
        "outdir": outdir,
        "stack": stack,
        "staging": staging,
        "template": Template.from_stack(stack),
        "slower": Template.from_stack(slower),
        "other_revision": Template.from_stack(other_revision),
    }


def only(template: Template, resource_type: str) -> tuple[str, dict]:
    resources = template.find_resources(resource_type)
    assert len(resources) == 1, resources.keys()
    return next(iter(resources.items()))


def logical_id(synthesized, construct) -> str:
    return synthesized["stack"].resolve(construct.node.default_child.logical_id)


def test_build_project_runs_the_stage_model_module_with_pinned_dependencies(synthesized):
    _, project = only(synthesized["template"], "AWS::CodeBuild::Project")
    props = project["Properties"]
    assert props["Environment"]["Image"] == "aws/codebuild/standard:7.0"
    assert props["Environment"]["ComputeType"] == "BUILD_GENERAL1_MEDIUM"
    assert props["Environment"]["PrivilegedMode"] is False
    assert (props["TimeoutInMinutes"], props["QueuedTimeoutInMinutes"]) == (45, 5)
    variables = {v["Name"]: v for v in props["Environment"]["EnvironmentVariables"]}
    # What to stage comes with each StartBuild (environmentVariablesOverride from the custom
    # resource's properties), never from the project, which an update rollback reverts only after
    # the custom resource.
    assert sorted(variables) == ["MODEL_HF_TOKEN_SECRET_ARN", "PYTHONUNBUFFERED"]
    assert variables["MODEL_HF_TOKEN_SECRET_ARN"] == {
        "Name": "MODEL_HF_TOKEN_SECRET_ARN",
        "Type": "PLAINTEXT",
        "Value": SECRET_ARN,
    }
    assert all(
        v["Type"] == "PLAINTEXT" and v["Name"] != "HF_TOKEN" for v in variables.values()
    )  # never the token
    build_spec = json.loads(props["Source"]["BuildSpec"])
    install = build_spec["phases"]["install"]
    assert install["runtime-versions"] == {"python": "3.12"}
    assert "--require-hashes -r requirements.txt" in install["commands"][0]
    (check, command) = build_spec["phases"]["build"]["commands"]
    assert check.startswith("for name in MODEL_REPOSITORY_ID MODEL_REVISION MODEL_S3_URI; do")
    assert command.startswith("python -m stage_model ")
    for option in (
        '--repo-id "$MODEL_REPOSITORY_ID"',
        '--revision "$MODEL_REVISION"',
        '--s3-uri "$MODEL_S3_URI"',
        "--delete-extra --yes",
    ):
        assert option in command
    assert (
        '${MODEL_HF_TOKEN_SECRET_ARN:+--hf-token-secret-id "$MODEL_HF_TOKEN_SECRET_ARN"}' in command
    )
    assert props["Source"]["Type"] == "S3"


def asset_dir_of_the_build(synthesized) -> Path:
    _, project = only(synthesized["template"], "AWS::CodeBuild::Project")
    asset_hash = project["Properties"]["Source"]["Location"].split("/")[-1].removesuffix(".zip")
    return synthesized["outdir"] / f"asset.{asset_hash}"


def source_files(folder: Path) -> list[str]:
    """The files under ``folder`` without bytecode, relative, sorted."""
    return sorted(
        str(p.relative_to(folder))
        for p in folder.rglob("*")
        if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc"
    )


def test_build_source_asset_is_the_build_folder_as_it_is_with_the_contracts_beside_it(synthesized):
    """The asset is services/model_staging/ as it is (the staging package and
    its pinned requirements) and contracts/ beside it (the package the staging code imports),
    without bytecode."""
    asset_dir = asset_dir_of_the_build(synthesized)
    files = source_files(asset_dir)
    contracts = [f"contracts/{name}" for name in source_files(CONTRACTS_DIR)]
    assert files == sorted(source_files(BUILD_SOURCE_DIR) + contracts)
    assert {
        "requirements.txt",
        "stage_model/command.py",
        "stage_model/upload.py",
        "stage_model/__main__.py",
        "contracts/model.py",
        "contracts/weights.py",
    } <= set(files)
    for name in files:
        folder = CONTRACTS_DIR.parent if name.startswith("contracts/") else BUILD_SOURCE_DIR
        origin = folder / name
        assert (asset_dir / name).read_bytes() == origin.read_bytes(), name


def test_the_build_code_imports_nothing_of_the_project_but_the_contracts(tmp_path):
    """The build installs only requirements.txt: the staging package must not import voicectl,
    config, stacks or the constructs, and finds the contracts it imports in its own source (checked
    in a staged copy, where nothing else of the repository is importable)."""
    copy = stage_build_source(tmp_path / "build")
    modules = sorted(
        p.stem
        for p in (copy / "stage_model").glob("*.py")
        if p.stem not in ("__main__", "__init__")
    )
    project = ("voicectl", "config", "stacks", "constructs_lib", "aws_cdk")
    code = (
        "import importlib, sys\n"
        + "".join(f"importlib.import_module('stage_model.{m}')\n" for m in modules)
        + f"print(sorted(m for m in sys.modules if m.split('.')[0] in {project!r}))\n"
        + "import contracts; print(contracts.__file__)"
    )
    env = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=copy, env=env, capture_output=True, text=True, check=True
    )
    assert result.stdout.splitlines() == ["[]", str(copy / "contracts" / "__init__.py")]


def test_asset_code_runs_as_the_codebuild_command_does(synthesized):
    asset_dir = asset_dir_of_the_build(synthesized)
    where = subprocess.run(
        [sys.executable, "-c", "import stage_model.command as m; print(m.__file__)"],
        cwd=asset_dir,
        capture_output=True,
        text=True,
        check=True,
    )
    assert where.stdout.strip() == str(asset_dir / "stage_model" / "command.py")
    bad = subprocess.run(
        [
            sys.executable,
            "-m",
            "stage_model",
            "--s3-uri",
            "s3://models-bucket/voxtral/",
            "--revision",
            "main",
        ],
        cwd=asset_dir,
        capture_output=True,
        text=True,
    )
    assert bad.returncode == 2
    assert "not a full 40-character commit hash" in bad.stderr


def test_build_role_writes_only_the_model_prefix_and_reads_only_its_secret(synthesized):
    template = synthesized["template"]
    stack = synthesized["stack"]
    staging = synthesized["staging"]
    role_id = stack.resolve(staging.project.role.node.default_child.logical_id)
    bucket_arn = {
        "Fn::GetAtt": [
            stack.resolve(stack.node.find_child("Models").node.default_child.logical_id),
            "Arn",
        ]
    }
    policies = template.find_resources("AWS::IAM::Policy")
    build_statements = [
        statement
        for policy in policies.values()
        if {"Ref": role_id} in policy["Properties"]["Roles"]
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]
    ]
    writes = [
        s
        for s in build_statements
        if any(
            a in _actions(s) for a in ("s3:PutObject", "s3:DeleteObject", "s3:AbortMultipartUpload")
        )
    ]
    assert writes == [
        {
            "Sid": "StageModelObjects",
            "Effect": "Allow",
            "Action": [
                "s3:GetObject",
                "s3:PutObject",
                "s3:DeleteObject",
                "s3:AbortMultipartUpload",
                "s3:ListMultipartUploadParts",
            ],
            "Resource": {"Fn::Join": ["", [bucket_arn, "/models/voxtral/*"]]},
        }
    ]
    (listing,) = [s for s in build_statements if "s3:ListBucket" in _actions(s)]
    assert listing["Condition"] == {"StringLike": {"s3:prefix": ["models/voxtral/*"]}}
    assert listing["Resource"] == bucket_arn
    # No statement anywhere in the template grants a write on the model bucket outside the prefix.
    for policy in policies.values():
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]:
            if any(
                a.startswith(("s3:Put", "s3:Delete")) or a == "s3:*" for a in _actions(statement)
            ):
                assert statement["Resource"] == {
                    "Fn::Join": ["", [bucket_arn, "/models/voxtral/*"]]
                }
    secret_statements = [
        (policy["Properties"]["Roles"], statement)
        for policy in policies.values()
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]
        if any(a.startswith("secretsmanager:") for a in _actions(statement))
    ]
    assert secret_statements == [
        (
            [{"Ref": role_id}],
            {
                "Effect": "Allow",
                "Action": ["secretsmanager:GetSecretValue", "secretsmanager:DescribeSecret"],
                "Resource": SECRET_ARN,
            },
        )
    ]


def kms_statements(template: Template) -> list[tuple[list, dict]]:
    return [
        (policy["Properties"]["Roles"], statement)
        for policy in template.find_resources("AWS::IAM::Policy").values()
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]
        if any(a.startswith("kms:") for a in _actions(statement))
    ]


def test_build_role_may_decrypt_the_secret_with_its_customer_managed_key_only_through_secrets_manager(  # noqa: E501 (a test's name says what it checks)
    synthesized,
):
    """A secret encrypted with a customer managed key needs kms:Decrypt besides GetSecretValue
    (grant_read of an imported secret adds none); the grant holds only for Secrets Manager
    decrypting this secret."""
    role_id = synthesized["stack"].resolve(
        synthesized["staging"].project.role.node.default_child.logical_id
    )
    assert kms_statements(synthesized["template"]) == [
        (
            [{"Ref": role_id}],
            {
                "Sid": "DecryptHubTokenSecret",
                "Effect": "Allow",
                "Action": "kms:Decrypt",
                "Resource": SECRET_KEY_ARN,
                "Condition": {
                    "StringEquals": {
                        "kms:ViaService": "secretsmanager.us-east-1.amazonaws.com",
                        "kms:EncryptionContext:SecretARN": SECRET_ARN,
                    }
                },
            },
        )
    ]
    assert (
        kms_statements(synthesized["slower"]) == []
    )  # without the prop: the aws/secretsmanager key, no grant


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (
            {"hf_token_secret_kms_key_arn": "alias/hub-token"},
            "hf_token_secret_kms_key_arn='alias/hub-token': must be a KMS key ARN",
        ),
        (
            {"hf_token_secret_kms_key_arn": SECRET_KEY_ARN, "hf_token_secret": None},
            "set only together with hf_token_secret",
        ),
    ],
)
def test_secret_key_prop_is_checked(tmp_path, overrides, message):
    with pytest.raises(ValueError, match=message):
        staging_stack(unit_app(outdir=str(tmp_path)), "BadKey", **overrides)


def _actions(statement: dict) -> list[str]:
    actions = statement.get("Action", [])
    return [actions] if isinstance(actions, str) else actions


def test_custom_resource_polls_the_build_for_at_most_55_minutes(synthesized):
    template = synthesized["template"]
    _, resource = only(template, "Custom::ModelStaging")
    props = resource["Properties"]
    assert set(props) == {
        "ServiceToken",
        "ServiceTimeout",
        "ProjectName",
        "RepositoryId",
        "Revision",
        "S3Uri",
    }
    assert props["ServiceTimeout"] == "3600"
    assert props["Revision"] == REVISION
    assert props["ProjectName"] == {"Ref": logical_id(synthesized, synthesized["staging"].project)}
    assert "Fn::GetAtt" in props["ServiceToken"]
    _, machine = only(template, "AWS::StepFunctions::StateMachine")
    definition = json.dumps(machine["Properties"]["DefinitionString"])
    assert (
        '\\"IntervalSeconds\\":60' in definition and '\\"MaxAttempts\\":55' in definition
    )  # 55 x 1 min
    assert machine["Properties"]["LoggingConfiguration"]["Level"] == "ALL"
    handlers = template.find_resources(
        "AWS::Lambda::Function", {"Properties": {"Runtime": "python3.14"}}
    )
    assert sorted(h["Properties"]["Handler"] for h in handlers.values()) == [
        "index.is_complete",
        "index.on_event",
    ]


def test_on_event_may_read_only_its_own_stack(synthesized):
    """DescribeStacks tells a rollback from an update; the OnEvent role may call it on its own stack
    only."""
    template = synthesized["template"]
    (on_event,) = template.find_resources(
        "AWS::Lambda::Function", {"Properties": {"Handler": "index.on_event"}}
    ).values()
    role_id = on_event["Properties"]["Role"]["Fn::GetAtt"][0]
    statements = [
        statement
        for policy in template.find_resources("AWS::IAM::Policy").values()
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]
        if any(a.startswith("cloudformation:") for a in _actions(statement))
    ]
    assert statements == [
        {
            "Action": "cloudformation:DescribeStacks",
            "Effect": "Allow",
            "Resource": {"Ref": "AWS::StackId"},
        }
    ]
    (policy,) = [
        p
        for p in template.find_resources("AWS::IAM::Policy").values()
        if statements[0] in p["Properties"]["PolicyDocument"]["Statement"]
    ]
    assert policy["Properties"]["Roles"] == [{"Ref": role_id}]


def test_custom_resource_reruns_only_when_repository_revision_or_prefix_change(synthesized):
    def properties(template: Template) -> dict:
        return only(template, "Custom::ModelStaging")[1]["Properties"]

    base, slower, other = (
        properties(synthesized["template"]),
        properties(synthesized["slower"]),
        properties(synthesized["other_revision"]),
    )
    assert (
        only(synthesized["slower"], "AWS::CodeBuild::Project")[1]["Properties"]["TimeoutInMinutes"]
        == 30
    )
    assert slower == base  # a build setting changed: CloudFormation sends no Update, no new build
    assert {k for k in base if base[k] != other[k]} == {"Revision"}
    # A new revision leaves the project as it is: the target travels with the StartBuild of the
    # custom resource.
    project = only(synthesized["template"], "AWS::CodeBuild::Project")[1]
    assert only(synthesized["other_revision"], "AWS::CodeBuild::Project")[1] == project


def test_endpoint_depends_on_the_staging_and_the_model_reads_its_uri(synthesized):
    template = synthesized["template"]
    resource_id = synthesized["stack"].resolve(
        synthesized["staging"].resource.node.default_child.logical_id
    )
    template.has_resource(
        "AWS::SageMaker::Endpoint", {"DependsOn": Match.array_with([resource_id])}
    )
    _, model = only(template, "AWS::SageMaker::Model")
    source = model["Properties"]["PrimaryContainer"]["ModelDataSource"]["S3DataSource"]
    assert source["S3Uri"] == {"Fn::GetAtt": [resource_id, "S3Uri"]}


def test_cdk_nag_aws_solutions_is_clean_with_reasoned_acknowledgements(synthesized):
    report = json.loads((synthesized["outdir"] / "validation-report.json").read_text())
    (nag,) = [r for r in report["pluginReports"] if r["pluginName"] == "AwsSolutions"]
    assert nag["conclusion"] == "success"
    assert nag["violations"] == []
    assert nag["suppressedViolations"], (
        "expected acknowledged findings (provider framework, CodeBuild defaults)"
    )
    for finding in nag["suppressedViolations"]:
        assert len(finding["reason"]) > 30, finding["ruleName"]


#: cfn-lint rules not applied: W3005 "dependency already enforced" fires on the DependsOn CDK itself
#: writes for every Lambda function (role and policy); informational rules (I*) are style
#: suggestions (Fn::Sub over Fn::Join).
CFN_LINT_IGNORED = ("W3005",)


def test_cfn_lint_is_clean(synthesized):
    from cfnlint.api import lint

    template_path = synthesized["outdir"] / "StagingTest.template.json"
    matches = lint(template_path.read_text(), regions=[ENV["region"]])
    findings = [
        f"{m.rule.id} {m.message} at {'/'.join(map(str, m.path))}"
        for m in matches
        if not m.rule.id.startswith("I") and m.rule.id not in CFN_LINT_IGNORED
    ]
    assert findings == []


def test_invalid_props_are_reported_together(tmp_path):
    stack = Stack(unit_app(outdir=str(tmp_path)), "Invalid", env=ENV)
    bucket = s3.Bucket(stack, "Models")
    with pytest.raises(ValueError) as error:
        ModelStaging(
            stack,
            "Staging",
            ModelStagingProps(
                bucket=bucket,
                prefix="/",
                repository_id="voxtral",
                revision="main",
                build_timeout=Duration.minutes(55),
            ),
        )
    message = str(error.value)
    assert message.splitlines() == [
        "ModelStaging Staging: invalid props:",
        "  - prefix='/': must be a non-empty key prefix without a leading '/'",
        "  - repository_id='voxtral': must be a model hub repository id '<owner>/<name>'",
        "  - revision='main': must be a full 40-character commit hash of the model hub "
        "repository (a branch or tag such as 'main' can move)",
        "  - build_timeout='55 minutes': must be 5 to 50 minutes (the custom resource waits at "
        "most 55 minutes)",
    ]


def test_build_requirements_match_the_project_lock():
    sys.path.insert(0, str(REPO_ROOT / "tools"))
    try:
        import staging_requirements
    finally:
        sys.path.pop(0)
    current = (BUILD_SOURCE_DIR / "requirements.txt").read_text()
    assert current == staging_requirements.render((REPO_ROOT / "requirements.lock").read_text())
    assert (
        "\nboto3==" in current and "\nhuggingface-hub==" in current and "--hash=sha256:" in current
    )
