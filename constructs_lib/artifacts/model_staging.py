"""ModelStaging: stage the model's weights into S3 during ``cdk deploy``, before the endpoint reads
them.

A CodeBuild project runs the same code as ``voicectl stage-model`` (``python -m stage_model``, from
the folder ``services/model_staging/`` shipped as one asset as it is, the staging package and its
hash-pinned requirements, with the ``contracts`` package it imports copied beside it at synth) to
download a pinned revision from the Hugging Face Hub and upload it under the model prefix. A custom
resource on the CDK Provider framework starts the build and polls it until it ends; its properties
are the repository id, revision and S3 URI only, so CloudFormation runs it again only when one of
those changes. The endpoint depends on the custom resource (:meth:`ModelStaging.add_dependent`, or
by using :attr:`ModelStaging.model_s3_uri`), so its weights are in place before SageMaker copies
them.

Why CodeBuild and not an ECS task: it needs no VPC, subnets or cluster (a Fargate task needs subnets
with a route to the internet to reach the Hub), bills per minute only while it runs, reads the Hub
token from Secrets Manager as an environment variable by itself, logs to CloudWatch, and its MEDIUM
compute type has 128 GB of disk for the 8.3 GB download (Fargate has 20 GiB of ephemeral storage by
default). Build environment facts:
https://docs.aws.amazon.com/codebuild/latest/userguide/build-env-ref-compute-types.html

Permissions: the build role may write (PutObject, DeleteObject, multipart) only under the model
prefix, list only that prefix, and read only the Hub token secret (and decrypt it through Secrets
Manager when it is encrypted with a customer managed key, ``hf_token_secret_kms_key_arn``); the
Lambda roles may only start, poll and stop builds of this project, and the OnEvent role may describe
its own stack (to recognize a rollback). Cost: the build's minutes (about 10 minutes on
BUILD_GENERAL1_MEDIUM for the 8.3 GB model, an estimate) and the Lambda and Step Functions calls of
the polling (one per minute).
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import jsii
from aws_cdk import (
    Acknowledgment,
    AssetHashType,
    BundlingOptions,
    CustomResource,
    DockerImage,
    Duration,
    ILocalBundling,
    RemovalPolicy,
    Stack,
    Token,
    Validations,
    aws_codebuild as codebuild,
    aws_iam as iam,
    aws_kms as kms,
    aws_lambda as lambda_,
    aws_logs as logs,
    aws_s3 as s3,
    aws_s3_assets as s3_assets,
    aws_secretsmanager as secretsmanager,
    aws_stepfunctions as sfn,
    custom_resources as cr,
)
from constructs import Construct, IConstruct

import contracts
from constructs_lib.facts.names import check_hub_token_key, check_repository_id, check_revision
from constructs_lib.nag import (
    CUSTOM_RESOURCE_HANDLER_SKIPS,
    acknowledge_compliance,
    nag_render,
    skip_checkov,
)
from constructs_lib.network.encryption import secret_decrypt_statement
from constructs_lib.service_code import MODEL_STAGING_PACKAGE, handler_dir, package_dir
from constructs_lib.validation import Problems
from contracts.weights import MANIFEST_NAME

#: The build's source: the staging package (``stage_model/``) and its hash-pinned
#: ``requirements.txt``, and the contracts it imports (:data:`CONTRACTS_DIR`) beside them, nothing
#: else, so that changes elsewhere in the repository leave the project untouched
#: (:func:`stage_build_source`).
BUILD_SOURCE_DIR = package_dir(MODEL_STAGING_PACKAGE)
#: The ``contracts`` package: the staging code imports the model's identity, its S3 prefix and the
#: manifest's format from it, so the build's source carries it (``python -m stage_model`` finds it
#: beside ``stage_model/``).
CONTRACTS_DIR = Path(contracts.__file__).resolve().parent
#: Bytecode Python writes when ``voicectl`` imports the package from the source tree: not part of
#: the asset (it would change the asset hash from one machine to the next).
BUILD_SOURCE_EXCLUDE = ["**/__pycache__", "**/*.pyc"]
#: The container image CDK's bundling requires to be named; never pulled or run (the source is
#: staged locally, :class:`_LocalBuildSource`).
_UNUSED_BUNDLING_IMAGE = DockerImage.from_registry("public.ecr.aws/docker/library/python:3.12-slim")
#: The Lambda handlers of the custom resource (``index.on_event``, ``index.is_complete``).
WAITER_CODE_DIR = handler_dir("model_staging_waiter")

#: CloudFormation gives a custom resource operation at most 3600 s (ServiceTimeout, range 1-3600:
#: https://docs.aws.amazon.com/AWSCloudFormation/latest/TemplateReference/aws-resource-cloudformation-customresource.html).
CUSTOM_RESOURCE_TIMEOUT = Duration.seconds(3600)
#: Total time the Provider framework polls the build. Below CloudFormation's 3600 s so that the
#: failure CloudFormation shows is the build's own (status, phase, log link), not a bare timeout. A
#: staging may take up to 2 hours; one custom resource cannot wait longer than 1 hour.
TOTAL_TIMEOUT = Duration.minutes(55)
#: Time between two BatchGetBuilds polls.
QUERY_INTERVAL = Duration.minutes(1)
#: Longest a build may wait in CodeBuild's queue (CodeBuild's minimum queued timeout is 5 minutes).
QUEUED_TIMEOUT = Duration.minutes(5)
#: Longest allowed build: queueing plus building must end before the polling gives up.
MAX_BUILD_TIMEOUT = Duration.minutes(TOTAL_TIMEOUT.to_minutes() - QUEUED_TIMEOUT.to_minutes())
#: Default build timeout. A measured figure is in the report; downloading and uploading 8.3 GB
#: inside AWS takes minutes, and a rerun after a timeout resumes (files and parts already in S3 are
#: kept).
DEFAULT_BUILD_TIMEOUT = Duration.minutes(45)
#: Where the build downloads to (the build's disk, not the Hugging Face cache in the home
#: directory).
BUILD_DOWNLOAD_DIR = "/codebuild/output/model"
#: Lambda and build log retention.
LOG_RETENTION = logs.RetentionDays.ONE_MONTH


def stage_build_source(destination: Path) -> Path:
    """Write the build's source into ``destination`` (made when missing): the build folder as it is
    and the contracts beside it, without bytecode. What CodeBuild runs ``python -m stage_model``
    in; returns ``destination``."""
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    shutil.copytree(BUILD_SOURCE_DIR, destination, ignore=ignore, dirs_exist_ok=True)
    shutil.copytree(
        CONTRACTS_DIR, destination / CONTRACTS_DIR.name, ignore=ignore, dirs_exist_ok=True
    )
    return destination


@jsii.implements(ILocalBundling)
class _LocalBuildSource:
    """CDK's bundling of the build's source asset, done here (:func:`stage_build_source`) with no
    container."""

    def try_bundle(self, output_dir: str, options: Any = None) -> bool:  # options: unused
        stage_build_source(Path(output_dir))
        return True


@dataclass(frozen=True)
class ModelStagingProps:
    """What to stage and where.

    Attributes:
        bucket: the model bucket. When it is encrypted with a customer managed KMS key, the build
            role is granted encrypt/decrypt on that key.
        prefix: key prefix of the model, e.g. "models/voxtral/" (no leading "/", trailing "/" added
            if missing).
        repository_id: Hub repository, e.g. "mistralai/Voxtral-Mini-4B-Realtime-2602".
        revision: full 40-character commit hash of the repository.
        hf_token_secret: Secrets Manager secret whose plain SecretString is the Hub access token
            (needed for gated repositories); None when the repository is public.
        hf_token_secret_kms_key_arn: ARN of the customer managed KMS key that encrypts
            ``hf_token_secret``; None when the secret uses the AWS managed key aws/secretsmanager
            (then GetSecretValue alone suffices). The build role gets kms:Decrypt on this key only
            when Secrets Manager calls it for this secret (kms:ViaService and the
            kms:EncryptionContext:SecretARN Secrets Manager sets:
            https://docs.aws.amazon.com/secretsmanager/latest/userguide/security-encryption.html).
            The key policy must let the account's IAM policies grant access (the default key policy
            does).
        encryption_key: a customer managed key: the build role may encrypt the weights it writes
            with it (an SSE-KMS model bucket), and it encrypts the build's artifacts and every log
            group here (its key policy must let CloudWatch Logs use it). Default: the AWS managed
            key for S3, and CloudWatch Logs' own encryption.
        role_path: IAM path of the build's role (see ``SageMakerExecutionRole``'s ``path``). Default
            ``/``.
        build_timeout: CodeBuild build timeout, at most MAX_BUILD_TIMEOUT (50 minutes).
        compute_type: CodeBuild compute type (MEDIUM: 4 vCPU, 7 GB memory, 128 GB disk).
    """

    bucket: s3.IBucket
    prefix: str
    repository_id: str
    revision: str
    hf_token_secret: secretsmanager.ISecret | None = None
    hf_token_secret_kms_key_arn: str | None = None
    encryption_key: kms.IKey | None = None
    role_path: str | None = None
    build_timeout: Duration = field(default_factory=lambda: DEFAULT_BUILD_TIMEOUT)
    compute_type: codebuild.ComputeType = codebuild.ComputeType.MEDIUM

    def problems(self, p: Problems, region: str | None = None) -> None:
        """Every problem of these props; ``region`` (the stack's, None when unknown) for the key
        ARN."""
        if not self.prefix.strip("/") or self.prefix.startswith("/"):
            p.add("prefix", self.prefix, "must be a non-empty key prefix without a leading '/'")
        check_repository_id(p, "repository_id", self.repository_id)
        check_revision(p, "revision", self.revision)
        if self.hf_token_secret_kms_key_arn is not None:
            check_hub_token_key(
                p,
                "hf_token_secret_kms_key_arn",
                self.hf_token_secret_kms_key_arn,
                "hf_token_secret",
                self.hf_token_secret is not None,
                region,
            )
        minutes = self.build_timeout.to_minutes()
        if not 5 <= minutes <= MAX_BUILD_TIMEOUT.to_minutes():
            p.add(
                "build_timeout",
                f"{minutes} minutes",
                f"must be 5 to {MAX_BUILD_TIMEOUT.to_minutes()} minutes (the "
                f"custom resource waits at most {TOTAL_TIMEOUT.to_minutes()} minutes)",
            )

    @property
    def normalized_prefix(self) -> str:
        return self.prefix.strip("/") + "/"


class ModelStaging(Construct):
    """Stages the model into ``s3://<bucket>/<prefix>`` during deployment (see the module
    docstring).

    Attributes:
        project: the CodeBuild project.
        resource: the custom resource; make the endpoint depend on it (:meth:`add_dependent`).
        model_s3_uri: ``s3://bucket/prefix/`` as a token read from the custom resource, so whatever
            uses it (the Model's ModelDataSource S3Uri) is created after the staging finished.
        manifest_s3_uri: the manifest written when staging succeeded.

    Raises:
        constructs_lib.validation.PropsError: listing every invalid prop.
    """

    def __init__(self, scope: Construct, construct_id: str, props: ModelStagingProps) -> None:
        region = Stack.of(scope).region
        problems = Problems()
        props.problems(problems, None if Token.is_unresolved(region) else region)
        problems.raise_if_any(f"ModelStaging {construct_id}")
        super().__init__(scope, construct_id)
        prefix = props.normalized_prefix
        s3_uri = f"s3://{props.bucket.bucket_name}/{prefix}"

        self.project = self._build_project(props, prefix, s3_uri)
        self.resource = self._custom_resource(props, s3_uri)
        acknowledge_compliance(
            self,
            {
                "IAMNoInlinePolicy": "Each role of the staging (build, handlers, Provider "
                "framework) has statements scoped to this project, prefix and log groups; an "
                "inline policy belongs to that one role.",
                "LambdaConcurrency": "The handlers run only when CloudFormation creates, updates "
                "or deletes the staging custom resource, and poll once a minute; nothing else "
                "can invoke them.",
                "LambdaDLQ": "The handlers serve a CloudFormation custom resource: a failure "
                "fails the deployment with the build's reason, which is where it must be seen; "
                "there is no event to keep for a retry.",
                "LambdaInsideVPC": "The handlers call only the CodeBuild and CloudFormation APIs "
                "and handle no model or inference data; they do not run in the endpoints' VPC.",
                "CodeBuildProjectSourceRepoUrl": "The build's source is an S3 asset object (the "
                "staging code), not a repository URL; there is no URL that could hold "
                "credentials.",
            },
        )
        skip_checkov(self, "AWS::Lambda::Function", CUSTOM_RESOURCE_HANDLER_SKIPS)
        skip_checkov(
            self,
            "AWS::IAM::Policy",
            {
                "CKV_AWS_111": "The Provider framework's waiter state machine needs CloudWatch "
                "Logs log-delivery actions, which take no resource (Step Functions developer "
                "guide, logging).",
            },
        )
        self.model_s3_uri: str = self.resource.get_att_string("S3Uri")
        self.manifest_s3_uri: str = self.resource.get_att_string("ManifestUri")

    def add_dependent(self, *dependents: IConstruct) -> None:
        """Make each of ``dependents`` (the Model, EndpointConfig or Endpoint) wait for the staging
        to finish."""
        for dependent in dependents:
            dependent.node.add_dependency(self.resource)

    def _build_project(
        self, props: ModelStagingProps, prefix: str, s3_uri: str
    ) -> codebuild.Project:
        # The asset is the staged source (the hash of what CodeBuild receives), made at synth in the
        # cloud assembly.
        source = s3_assets.Asset(
            self,
            "Source",
            path=str(BUILD_SOURCE_DIR),
            asset_hash_type=AssetHashType.OUTPUT,
            bundling=BundlingOptions(image=_UNUSED_BUNDLING_IMAGE, local=_LocalBuildSource()),  # pyright: ignore[reportArgumentType] (jsii protocol, structural)
        )
        # MODEL_REPOSITORY_ID, MODEL_REVISION and MODEL_S3_URI are not set here: the custom resource
        # passes them with every StartBuild (environmentVariablesOverride, from its own properties).
        # On an update rollback CloudFormation reverts the custom resource before this project, so
        # values kept in the project would make the rollback build stage the failed update's target.
        environment_variables = {
            # Python prints progress lines as they come, not when a buffer fills.
            "PYTHONUNBUFFERED": codebuild.BuildEnvironmentVariable(value="1"),
        }
        if props.hf_token_secret is not None:
            # The template and the build environment hold only the secret's ARN; stage-model reads
            # the token with GetSecretValue (--hf-token-secret-id), under a grant on exactly this
            # secret.
            environment_variables["MODEL_HF_TOKEN_SECRET_ARN"] = codebuild.BuildEnvironmentVariable(
                value=props.hf_token_secret.secret_arn
            )
        log_group = logs.LogGroup(
            self,
            "BuildLogs",
            retention=LOG_RETENTION,
            removal_policy=RemovalPolicy.DESTROY,
            encryption_key=props.encryption_key,
        )
        project = codebuild.Project(
            self,
            "Build",
            # Static: what to stage arrives with each StartBuild, so a new revision leaves the
            # project unchanged.
            description="Stages model weights for the ModelStaging custom resource (voicectl "
            "stage-model)",
            source=codebuild.Source.s3(bucket=source.bucket, path=source.s3_object_key),
            environment=codebuild.BuildEnvironment(
                build_image=codebuild.LinuxBuildImage.STANDARD_7_0,
                compute_type=props.compute_type,
                environment_variables=environment_variables,
            ),
            build_spec=codebuild.BuildSpec.from_object(
                {
                    "version": "0.2",
                    "env": {"shell": "bash"},
                    "phases": {
                        "install": {
                            "runtime-versions": {"python": "3.12"},
                            "commands": [
                                "python -m pip install --no-cache-dir "
                                "--disable-pip-version-check --require-hashes -r requirements.txt"
                            ],
                        },
                        "build": {
                            "commands": [
                                # A build started without the custom resource's overrides stops with
                                # a reason.
                                "for name in MODEL_REPOSITORY_ID MODEL_REVISION "
                                'MODEL_S3_URI; do [ -n "${!name}" ] || '
                                '{ echo "$name is not set: the ModelStaging custom resource '
                                "passes it with StartBuild "
                                '(environmentVariablesOverride)" >&2; exit 2; }; done',
                                'python -m stage_model --repo-id "$MODEL_REPOSITORY_ID" '
                                '--revision "$MODEL_REVISION" --s3-uri "$MODEL_S3_URI" '
                                f"--download-dir {BUILD_DOWNLOAD_DIR} --delete-extra --yes "
                                "${MODEL_HF_TOKEN_SECRET_ARN:+--hf-token-secret-id "
                                '"$MODEL_HF_TOKEN_SECRET_ARN"}',
                            ]
                        },
                    },
                }
            ),
            timeout=props.build_timeout,
            queued_timeout=QUEUED_TIMEOUT,
            # The AWS managed key for S3 encrypts the build's artifacts (it has none) and satisfies
            # CodeBuild's default explicitly, without a customer managed key to pay for.
            encryption_key=props.encryption_key
            or kms.Alias.from_alias_name(self, "S3ManagedKey", "alias/aws/s3"),
            role=iam.Role(  # pyright: ignore[reportArgumentType] (jsii binding: parameter names differ from the interface's)
                self,
                "BuildRole",
                assumed_by=iam.ServicePrincipal("codebuild.amazonaws.com"),  # pyright: ignore[reportArgumentType] (jsii binding: parameter names differ from the interface's)
                path=props.role_path,
            )
            if props.role_path
            else None,
            logging=codebuild.LoggingOptions(
                cloud_watch=codebuild.CloudWatchLoggingOptions(log_group=log_group)
            ),
        )
        if props.role_path:
            # With a path, CodeBuild's ServiceRole must be the role's ARN, not its name (cfn-lint
            # E3050).
            build = cast(codebuild.CfnProject, project.node.default_child)
            build.add_property_override("ServiceRole", cast(iam.IRole, project.role).role_arn)
            # CDK's template validation reads the property before the override; the template has the
            # ARN.
            Validations.of(project).acknowledge(
                Acknowledgment(
                    id="CloudFormation-Validate::E3050",
                    reason="ServiceRole is the role's ARN (GetAtt, set by the override above), "
                    "as a role with a path needs.",
                )
            )
        self._grant_prefix(project, props.bucket, prefix, props.encryption_key)
        if props.hf_token_secret is not None:
            props.hf_token_secret.grant_read(project)
            if props.hf_token_secret_kms_key_arn is not None:
                self._grant_secret_key(
                    project, props.hf_token_secret, props.hf_token_secret_kms_key_arn
                )
        return project

    @staticmethod
    def _grant_secret_key(
        project: codebuild.Project, secret: secretsmanager.ISecret, key_arn: str
    ) -> None:
        """kms:Decrypt on the hub-token secret's customer managed key
        (:func:`secret_decrypt_statement`)."""
        project.add_to_role_policy(
            secret_decrypt_statement(secret, key_arn, sid="DecryptHubTokenSecret")
        )

    @staticmethod
    def _grant_prefix(
        project: codebuild.Project, bucket: s3.IBucket, prefix: str, key: kms.IKey | None
    ) -> None:
        """Object read/write/delete and multipart under ``prefix`` only; listing only that
        prefix."""
        project.add_to_role_policy(
            iam.PolicyStatement(
                sid="StageModelObjects",
                actions=[
                    "s3:GetObject",
                    "s3:PutObject",
                    "s3:DeleteObject",
                    "s3:AbortMultipartUpload",
                    "s3:ListMultipartUploadParts",
                ],
                resources=[bucket.arn_for_objects(f"{prefix}*")],
            )
        )
        project.add_to_role_policy(
            iam.PolicyStatement(
                sid="ListModelPrefix",
                actions=["s3:ListBucket"],
                resources=[bucket.bucket_arn],
                conditions={"StringLike": {"s3:prefix": [f"{prefix}*"]}},
            )
        )
        # ListMultipartUploads (finding an interrupted upload to resume) has no s3:prefix condition
        # key
        # (https://docs.aws.amazon.com/service-authorization/latest/reference/list_amazons3.html);
        # it lists the names of unfinished uploads, not object contents.
        project.add_to_role_policy(
            iam.PolicyStatement(
                sid="FindUnfinishedUploads",
                actions=["s3:ListBucketMultipartUploads"],
                resources=[bucket.bucket_arn],
            )
        )
        if bucket.encryption_key is not None:
            bucket.encryption_key.grant_encrypt_decrypt(project)
        if key is not None and bucket.encryption_key is None:
            # The bucket is known by name (another stack's): its key is passed apart. PutObject and
            # multipart uploads of SSE-KMS objects need both (S3 user guide, "Using server-side
            # encryption with AWS KMS keys").
            project.add_to_role_policy(
                iam.PolicyStatement(
                    sid="EncryptModelObjects",
                    actions=["kms:Decrypt", "kms:GenerateDataKey"],
                    resources=[key.key_arn],
                )
            )
        # What cdk-nag finds in the role's policy, and why it stays.
        stack = Stack.of(project)
        region = "<AWS::Region>" if Token.is_unresolved(stack.region) else stack.region
        account = "<AWS::AccountId>" if Token.is_unresolved(stack.account) else stack.account
        name = nag_render(stack, project.project_name)
        source_read = (
            "CDK's grant for the CodeBuild source: read the staging-code asset object only."
        )
        _acknowledge(
            cast(Construct, project.role),
            {
                "AwsSolutions-IAM5[Action::kms:GenerateDataKey*]": "CDK's grant on the build's "
                "encryption key (the data key): data keys for the build's artifacts and logs, on "
                "that one key.",
                "AwsSolutions-IAM5[Action::kms:ReEncrypt*]": "CDK's grant on the build's "
                "encryption key (the data key): re-encryption on that one key only.",
                "AwsSolutions-IAM5[Resource::"
                f"{nag_render(stack, bucket.arn_for_objects(prefix + '*'))}]": "The build role "
                "may read and write objects only under the model prefix; the wildcard is that "
                "prefix.",
                "AwsSolutions-IAM5[Action::s3:GetObject*]": source_read,
                "AwsSolutions-IAM5[Action::s3:GetBucket*]": source_read,
                "AwsSolutions-IAM5[Action::s3:List*]": source_read,
                f"AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:codebuild:{region}:{account}:"
                f"report-group/{name}-*]": "CodeBuild's default report-group permission, limited "
                "to this project's report groups.",
                f"AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:logs:{region}:{account}:log-"
                f"group:/aws/codebuild/{name}:*]": "CodeBuild's default log permission, limited "
                "to this project's log streams.",
            },
        )

    def _custom_resource(self, props: ModelStagingProps, s3_uri: str) -> CustomResource:
        project_arn = self.project.project_arn
        on_event = self._handler(
            "OnEvent",
            "index.on_event",
            ["codebuild:StartBuild", "codebuild:BatchGetBuilds", "codebuild:StopBuild"],
            project_arn,
            props.encryption_key,
        )
        # Whether an Update is a rollback (the handler then starts no build for another prefix): its
        # own stack only.
        on_event.add_to_role_policy(
            iam.PolicyStatement(
                actions=["cloudformation:DescribeStacks"], resources=[Stack.of(self).stack_id]
            )
        )
        is_complete = self._handler(
            "IsComplete",
            "index.is_complete",
            ["codebuild:BatchGetBuilds"],
            project_arn,
            props.encryption_key,
        )
        provider = cr.Provider(
            self,
            "Provider",
            on_event_handler=on_event,  # pyright: ignore[reportArgumentType] (jsii binding: parameter names differ from the interface's)
            is_complete_handler=is_complete,  # pyright: ignore[reportArgumentType] (jsii binding: parameter names differ from the interface's)
            provider_function_env_encryption=props.encryption_key,
            query_interval=QUERY_INTERVAL,
            total_timeout=TOTAL_TIMEOUT,
            log_group=logs.LogGroup(
                self,
                "ProviderLogs",
                retention=LOG_RETENTION,
                removal_policy=RemovalPolicy.DESTROY,
                encryption_key=props.encryption_key,
            ),
            disable_waiter_state_machine_logging=False,
            waiter_state_machine_log_options=cr.LogOptions(
                destination=logs.LogGroup(
                    self,
                    "WaiterLogs",
                    retention=LOG_RETENTION,
                    removal_policy=RemovalPolicy.DESTROY,
                    encryption_key=props.encryption_key,
                ),
                include_execution_data=False,
                level=sfn.LogLevel.ALL,
            ),
        )
        # The Provider framework (aws-cdk-lib custom_resources.Provider) builds these roles itself.
        framework = [
            fn
            for fn in provider.node.find_all()
            if isinstance(fn, lambda_.Function)
            and fn.node.id in ("framework-isComplete", "framework-onTimeout")
        ]
        invoke_own = (
            "The Provider framework may invoke every version of its own handler functions "
            "(grantInvoke)."
        )
        _acknowledge(
            provider,
            {
                "AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/"
                "AWSLambdaBasicExecutionRole]": "The CDK Provider framework's own functions use "
                "the basic execution role (CloudWatch Logs only).",
                "AwsSolutions-IAM5[Resource::*]": "The Provider framework's waiter state machine "
                "needs log delivery permissions, which take no resource.",
                "AwsSolutions-SF2": "The Provider framework's waiter only polls a build once a "
                "minute; its execution history is logged (level ALL), X-Ray traces would add "
                "nothing.",
                **{
                    f"AwsSolutions-IAM5[Resource::{_arn_ref(fn)}:*]": invoke_own
                    for fn in (on_event, is_complete, *framework)
                },
            },
        )
        resource = CustomResource(
            self,
            "Resource",
            service_token=provider.service_token,
            resource_type="Custom::ModelStaging",
            service_timeout=CUSTOM_RESOURCE_TIMEOUT,
            # Only these change the staged content; CloudFormation starts a new build only when one
            # of them changes.
            properties={
                "ProjectName": self.project.project_name,
                "RepositoryId": props.repository_id,
                "Revision": props.revision,
                "S3Uri": s3_uri,
            },
        )
        # The build must find its permissions in place when it starts (the project itself is
        # referenced already).
        resource.node.add_dependency(self.project.role)
        return resource

    def _handler(
        self, name: str, handler: str, actions: list[str], project_arn: str, key: kms.IKey | None
    ) -> lambda_.Function:
        """A Python Lambda function of the waiter code with its own log group and a role limited to
        ``actions``."""
        log_group = logs.LogGroup(
            self,
            f"{name}Logs",
            retention=LOG_RETENTION,
            removal_policy=RemovalPolicy.DESTROY,
            encryption_key=key,
        )
        principal = iam.ServicePrincipal("lambda.amazonaws.com")
        role = iam.Role(self, f"{name}Role", assumed_by=principal)  # pyright: ignore[reportArgumentType] (jsii binding: parameter names differ from the interface's)
        role.add_to_policy(iam.PolicyStatement(actions=actions, resources=[project_arn]))
        # A log group's Arn attribute already ends in ":*" (its log streams).
        role.add_to_policy(
            iam.PolicyStatement(
                actions=["logs:CreateLogStream", "logs:PutLogEvents"],
                resources=[log_group.log_group_arn],
            )
        )
        return lambda_.Function(
            self,
            name,
            runtime=lambda_.Runtime.PYTHON_3_14,
            handler=handler,
            code=lambda_.Code.from_asset(str(WAITER_CODE_DIR), exclude=BUILD_SOURCE_EXCLUDE),
            timeout=Duration.seconds(30),
            memory_size=128,
            role=role,  # pyright: ignore[reportArgumentType] (jsii binding: parameter names differ from the interface's)
            log_group=log_group,
            environment={"MANIFEST_NAME": MANIFEST_NAME},
            environment_encryption=key,
            description=f"Model staging custom resource: {handler}",
        )


def _acknowledge(scope: Construct, findings: dict[str, str]) -> None:
    """Acknowledge cdk-nag AwsSolutions findings (``{rule[resource]: reason}``) on ``scope`` and its
    children. cdk-nag 3 matches findings by exact id, and ids embed logical ids, so callers compute
    them from the resources."""
    Validations.of(scope).acknowledge(
        *(
            Acknowledgment(id=f"AwsSolutions::{rule}", reason=reason)
            for rule, reason in findings.items()
        )
    )


def _arn_ref(function: lambda_.Function) -> str:
    """A function's ARN as cdk-nag writes it in a finding id: ``<LogicalId.Arn>``."""
    return nag_render(Stack.of(function), function.function_arn)
