"""BridgeImage: the ECR repository of the bridge image, and the image itself (built asset or
prebuilt URI)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import cdk_ecr_deployment as ecr_deployment
from aws_cdk import (
    Acknowledgment,
    RemovalPolicy,
    Stack,
    Token,
    Validations,
    aws_ecr as ecr,
    aws_ecr_assets as ecr_assets,
    aws_iam as iam,
    aws_kms as kms,
)
from constructs import Construct, IDependable

from constructs_lib.facts.names import check_ecr_image_uri
from constructs_lib.nag import (
    CUSTOM_RESOURCE_HANDLER_SKIPS,
    acknowledge_compliance,
    nag_render,
    skip_checkov,
)
from constructs_lib.validation import Problems

#: Images kept in the repository; older ones expire (a rollback needs the previous few).
KEEP_NEWEST_IMAGES = 10
#: Memory of cdk-ecr-deployment's copy Lambda in MiB: the vLLM base image is several GB of layers.
COPY_MEMORY_MIB = 2048
#: The folder of the build context that the bridge's image needs besides the bridge's: the
#: contracts the bridge imports (contracts/).
CONTRACTS_DIR_NAME = "contracts"
#: Left out of the image's build context (and so of its asset hash) wherever they are: Python's
#: bytecode caches.
BYTECODE_EXCLUDE = ["**/__pycache__", "**/*.pyc"]
#: Documentation beside the code (the bridge's README): no image copies it, so an edit to it must
#: not make a new image, and with it a new Model and an endpoint update.
DOCS_EXCLUDE = ["**/*.md"]


def context_exclude(container_path: str) -> list[str]:
    """The build context's exclusions (.dockerignore rules, the last match wins): everything in the
    context but the bridge's folder (``container_path``, relative to the context, ``/``-separated:
    ``bridge`` or ``services/bridge``) and :data:`CONTRACTS_DIR_NAME`, then bytecode within
    those, and documentation (:data:`DOCS_EXCLUDE`)."""
    kept = [
        f"!{name}{suffix}"
        for name in (container_path, CONTRACTS_DIR_NAME)
        for suffix in ("", "/**")
    ]
    return ["*", *kept, *BYTECODE_EXCLUDE, *DOCS_EXCLUDE]


@dataclass(frozen=True)
class BridgeImageProps:
    """Props of :class:`BridgeImage`.

    Attributes:
        container_dir: the bridge's folder, with its ``Dockerfile`` (this project's
            ``services/bridge/``). The Dockerfile copies from it and from the contracts the bridge
            imports (``contracts/``), by their paths in the build context.
        prebuilt_image_uri: an image already in ECR (in the stack's Region); when set no asset is
            built or copied (``container_dir`` and ``context_dir`` are then not used). One of
            ``container_dir`` and ``prebuilt_image_uri`` is required.
        retain_data: keep the repository and its images on ``cdk destroy``. Default: false
            (emptied and deleted).
        encryption_key: a customer managed key for the repository (KMS encryption). Changing a
            repository's encryption replaces it (AWS::ECR::Repository EncryptionConfiguration:
            "Update requires: Replacement"), so an existing deployment should opt in knowingly.
            Default: AES-256 (SSE-S3).
        context_dir: the image's build context: a folder that holds ``contracts/`` and, at any
            depth, ``container_dir`` (this project's root). Only those two folders of it go in
            (:func:`context_exclude`). Default: ``container_dir``'s parent (the bridge's folder
            beside ``contracts/``).
    """

    container_dir: Path | None = None
    prebuilt_image_uri: str | None = None
    retain_data: bool = False
    encryption_key: kms.IKey | None = None
    context_dir: Path | None = None

    @property
    def build_context(self) -> Path | None:
        """The build context: ``context_dir``, else ``container_dir``'s parent (None without
        either)."""
        if self.context_dir is not None:
            return Path(self.context_dir)
        return None if self.container_dir is None else Path(self.container_dir).parent

    def problems(self, p: Problems, region: str | None = None) -> None:
        if self.prebuilt_image_uri is not None:
            check_ecr_image_uri(p, "prebuilt_image_uri", self.prebuilt_image_uri, region)
            return  # no build: container_dir and context_dir are not used
        if self.container_dir is None:
            p.note(
                "container_dir or prebuilt_image_uri: give one (a build context or an image "
                "already in ECR)"
            )
            return
        container, context = Path(self.container_dir), self.build_context
        assert context is not None  # container_dir is set
        if not (container / "Dockerfile").is_file():
            p.add("container_dir", str(self.container_dir), "must be a folder with a Dockerfile")
        elif self.context_dir is None:
            if not (context / CONTRACTS_DIR_NAME).is_dir():
                p.add(
                    "container_dir",
                    str(self.container_dir),
                    f"must sit beside {CONTRACTS_DIR_NAME}/, which the bridge imports (the build "
                    "context is their parent), or give context_dir: the folder that holds both",
                )
        elif not container.resolve().is_relative_to(context.resolve()):
            p.add(
                "container_dir",
                str(self.container_dir),
                f"must be inside context_dir {str(context)!r} (the build context)",
            )
        elif container.resolve() == context.resolve():
            p.add(
                "container_dir",
                str(self.container_dir),
                "must be a folder inside context_dir, not context_dir itself",
            )
        elif not (context / CONTRACTS_DIR_NAME).is_dir():
            p.add(
                "context_dir",
                str(self.context_dir),
                f"must hold {CONTRACTS_DIR_NAME}/, which the bridge imports",
            )

    def container_path(self) -> str:
        """``container_dir`` relative to the build context, ``/``-separated (validated props)."""
        assert self.container_dir is not None and self.build_context is not None
        container = Path(self.container_dir).resolve()
        return container.relative_to(self.build_context.resolve()).as_posix()


class BridgeImage(Construct):
    """ECR repository (scan on push, immutable tags, newest images kept) plus the bridge image in
    it.

    Without ``prebuilt_image_uri`` the build context (``container_dir`` and ``contracts/`` of
    ``context_dir``) becomes a ``DockerImageAsset`` for ``linux/amd64`` and cdk-ecr-deployment
    copies it from the CDK assets repository into this repository under the asset hash as tag, so
    every change of the bridge's folder or ``contracts/`` yields a new, immutable tag. The copy
    takes only the amd64 image manifest (``copy_image_index`` off), never an OCI image index:
    SageMaker rejects an index, which is what a build with provenance attestations produces (the
    Makefile also sets ``BUILDX_NO_DEFAULT_ATTESTATIONS=1``).

    Attributes:
        repository: the bridge repository.
        image_uri: what SageMaker's Model should run.
        tag: the image's tag in the repository (the asset hash), or None with a prebuilt image.
        copy: the image copy custom resource, or None with a prebuilt image; Models must depend on
            it.

    Raises:
        constructs_lib.validation.PropsError: listing every invalid prop.
    """

    def __init__(self, scope: Construct, construct_id: str, props: BridgeImageProps) -> None:
        region = Stack.of(scope).region
        problems = Problems()
        props.problems(problems, None if Token.is_unresolved(region) else region)
        problems.raise_if_any(f"BridgeImage {construct_id}")
        super().__init__(scope, construct_id)
        self.repository = ecr.Repository(
            self,
            "Repository",
            image_scan_on_push=True,
            image_tag_mutability=ecr.TagMutability.IMMUTABLE,
            encryption=ecr.RepositoryEncryption.KMS
            if props.encryption_key
            else ecr.RepositoryEncryption.AES_256,
            encryption_key=props.encryption_key,
            lifecycle_rules=[
                ecr.LifecycleRule(
                    description=f"Keep the newest {KEEP_NEWEST_IMAGES} images",
                    max_image_count=KEEP_NEWEST_IMAGES,
                    rule_priority=1,
                )
            ],
            removal_policy=RemovalPolicy.RETAIN if props.retain_data else RemovalPolicy.DESTROY,
            empty_on_delete=not props.retain_data,
        )
        self.copy: IDependable | None = None
        self.tag: str | None = None

        if props.prebuilt_image_uri:
            self.image_uri = props.prebuilt_image_uri
            return

        assert props.build_context is not None  # validated: one of the two is set
        container_path = props.container_path()
        asset = ecr_assets.DockerImageAsset(
            self,
            "Asset",
            directory=str(props.build_context),
            file=f"{container_path}/Dockerfile",
            platform=ecr_assets.Platform.LINUX_AMD64,
            # Only the bridge's folder and the contracts, without bytecode: bytecode that running
            # the bridge or its tests leaves beside the sources changed the asset hash, so a deploy
            # after `make test` rebuilt the image and updated the endpoint; anything else of the
            # repository would do the same.
            exclude=context_exclude(container_path),
        )
        self.tag = tag = asset.asset_hash
        self.image_uri = self.repository.repository_uri_for_tag(tag)
        copy = ecr_deployment.ECRDeployment(
            self,
            "Copy",
            src=ecr_deployment.DockerImageName(asset.image_uri),
            dest=ecr_deployment.DockerImageName(self.image_uri),
            copy_image_index=False,
            image_arch=["amd64"],
            memory_limit=COPY_MEMORY_MIB,
            # cdk-ecr-deployment adds ecr:* and s3:GetObject on "*" to its role; an immutable view
            # of our own role drops those statements, and _copy_role grants only what the copy uses.
            role=self._copy_role(asset).without_policy_updates(),
        )
        copy.node.add_dependency(self.repository)
        acknowledge_compliance(
            self,
            {
                "IAMNoInlinePolicy": "The copy role's policy names the two repositories it pulls "
                "from and pushes to; an inline policy belongs to that one role and goes with it.",
            },
        )
        # cdk-ecr-deployment's function is a singleton at the stack's top level, not under this
        # construct.
        for function in Stack.of(self).node.children:
            if function.node.id.startswith("Custom::CDKECRDeployment"):
                skip_checkov(function, "AWS::Lambda::Function", CUSTOM_RESOURCE_HANDLER_SKIPS)
                acknowledge_compliance(
                    function,
                    {
                        "LambdaConcurrency": "cdk-ecr-deployment's copy function runs once per "
                        "deployment, called by CloudFormation; nothing else can invoke it.",
                        "LambdaDLQ": "The copy function is a CloudFormation custom resource: a "
                        "failure fails (and rolls back) the deployment, which is where it must "
                        "be seen; there is no event to keep.",
                        "LambdaInsideVPC": "The copy function moves the image between two ECR "
                        "repositories at deploy time; it handles no inference data and does not "
                        "run in the endpoints' VPC.",
                    },
                )
        self.copy = copy

    def _copy_role(self, asset: ecr_assets.DockerImageAsset) -> iam.Role:
        """Role of the image copy Lambda: pull from the CDK assets repository, push to the bridge
        repository, and write its own logs. Nothing else."""
        role = iam.Role(
            self,
            "CopyRole",
            description="cdk-ecr-deployment: copy the bridge image asset into the bridge "
            "repository",
            assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"),  # pyright: ignore[reportArgumentType] (jsii binding: parameter names differ from the interface's)
        )
        stack = Stack.of(self)
        log_groups = (
            f"arn:{stack.partition}:logs:{stack.region}:{stack.account}:log-group:/aws/lambda/*"
        )
        policy = iam.Policy(
            self,
            "CopyPolicy",
            roles=[role],  # pyright: ignore[reportArgumentType] (jsii binding: parameter names differ from the interface's)
            statements=[
                iam.PolicyStatement(
                    sid="RegistryLogin", actions=["ecr:GetAuthorizationToken"], resources=["*"]
                ),
                iam.PolicyStatement(
                    sid="PullAsset",
                    actions=[
                        "ecr:BatchCheckLayerAvailability",
                        "ecr:BatchGetImage",
                        "ecr:GetDownloadUrlForLayer",
                    ],
                    resources=[asset.repository.repository_arn],
                ),
                iam.PolicyStatement(
                    sid="PushBridgeImage",
                    actions=[
                        "ecr:BatchCheckLayerAvailability",
                        "ecr:BatchGetImage",
                        "ecr:GetDownloadUrlForLayer",
                        "ecr:InitiateLayerUpload",
                        "ecr:UploadLayerPart",
                        "ecr:CompleteLayerUpload",
                        "ecr:PutImage",
                    ],
                    resources=[self.repository.repository_arn],
                ),
                iam.PolicyStatement(
                    sid="WriteOwnLogs",
                    actions=["logs:CreateLogGroup", "logs:CreateLogStream", "logs:PutLogEvents"],
                    resources=[log_groups],
                ),
            ],
        )
        Validations.of(policy).acknowledge(
            Acknowledgment(
                id="AwsSolutions-IAM5[Resource::*]",
                reason="ecr:GetAuthorizationToken supports no resource-level permission; it only "
                "issues a registry login token, pulls and pushes stay limited to two "
                "repositories.",
            ),
            Acknowledgment(
                id=f"AwsSolutions-IAM5[Resource::{nag_render(stack, log_groups)}]",
                reason="The copy function's name is generated by CloudFormation after this "
                "policy is written; the wildcard is limited to Lambda log groups of this account "
                "and region.",
            ),
        )
        return role
