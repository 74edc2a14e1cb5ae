"""``voicectl verify``: is every endpoint of this synth InService and running the EndpointConfig the synth expects?

Reads the synthesized app (``cdk.out``: ``manifest.json`` and the stack templates), takes each
``AWS::SageMaker::Endpoint`` with its EndpointConfig, Model and scalable target, and compares them with what
SageMaker reports. Read-only: STS GetCallerIdentity, SageMaker DescribeEndpoint, DescribeEndpointConfig and
DescribeModel, Application Auto Scaling DescribeScalableTargets, CloudFormation ListExports (to resolve
``Fn::ImportValue``) and DescribeStacks (a value only CloudFormation knows, such as the S3 URI the model-staging
custom resource returns, is read from the stack output whose template value is the same expression).

What it catches: an endpoint that is missing, not InService (Creating, Updating, Failed, RollingBack...), or InService
on another EndpointConfig than the synth's, for instance after SageMaker rolled an update back (the endpoint then
runs the old instance type or image), or after a deployment that never happened. Instance count: with a scalable
target the count autoscaling chose must lie within its min and max (and the registered target must have them);
without one, the count must be the template's InitialInstanceCount.

Exit code: 0 when every check passes, 1 when one fails (or AWS cannot be reached), 2 for bad input.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping

import boto3
import botocore.exceptions

from voicectl.cli import UsageError

STACK_ARTIFACT = "aws:cloudformation:stack"
ENDPOINT = "AWS::SageMaker::Endpoint"
ENDPOINT_CONFIG = "AWS::SageMaker::EndpointConfig"
MODEL = "AWS::SageMaker::Model"
SCALABLE_TARGET = "AWS::ApplicationAutoScaling::ScalableTarget"
IN_SERVICE = "InService"


class Unresolvable(Exception):
    """A template value depends on something only CloudFormation knows (``Fn::GetAtt``, a resource ``Ref``)."""


@dataclass(frozen=True)
class ExpectedEndpoint:
    """One endpoint as the synthesized template describes it. Values are template expressions (plain values, or
    intrinsic functions that :class:`TemplateResolver` resolves).

    Attributes:
        stack_name: the stack that holds it.
        region: the stack's region (from the cloud assembly's environment).
        endpoint_name: the EndpointName.
        variant_name: the ProductionVariant's name.
        instance_type: the variant's InstanceType.
        initial_instance_count: the variant's InitialInstanceCount.
        image: the Model's PrimaryContainer Image, or None (a model package).
        model_package: the Model's PrimaryContainer ModelPackageName, or None.
        model_data_s3_uri: the Model's ModelDataSource S3Uri, or None.
        scaling: (min, max) of the variant's scalable target, or None without one.
        outputs: the stack's template outputs, ``{output key: template value}``; a ``Fn::GetAtt`` or resource
            ``Ref`` that one of them holds is resolved from the deployed stack's output.
    """

    stack_name: str
    region: str
    endpoint_name: Any
    variant_name: Any
    instance_type: Any
    initial_instance_count: int
    image: Any
    model_package: Any
    model_data_s3_uri: Any
    scaling: tuple[int, int] | None
    outputs: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Check:
    """One comparison: ``ok`` when ``actual`` is what the synth expects; ``skipped`` when it could not be judged."""

    endpoint: str
    what: str
    expected: str
    actual: str
    ok: bool
    skipped: bool = False

    def line(self) -> str:
        status = "SKIP" if self.skipped else ("OK" if self.ok else "MISMATCH")
        detail = self.actual if self.ok or self.skipped else f"expected {self.expected}, found {self.actual}"
        return f"{status:<8} {self.endpoint}: {self.what}: {detail}"


def _resource_ref(value: Any) -> str | None:
    """The logical id a ``Fn::GetAtt``/``Ref`` points at, or None."""
    if isinstance(value, dict):
        if "Fn::GetAtt" in value:
            return value["Fn::GetAtt"][0]
        if "Ref" in value:
            return value["Ref"]
    return None


def read_cloud_assembly(cdk_out: Path) -> list[ExpectedEndpoint]:
    """Every endpoint in the stacks of the cloud assembly at ``cdk_out``.

    Raises:
        UsageError: ``cdk_out`` holds no cloud assembly (run ``make synth``), or a template is not what this app
            synthesizes.
    """
    manifest_file = cdk_out / "manifest.json"
    if not manifest_file.is_file():
        raise UsageError(f"{cdk_out} holds no synthesized app (no manifest.json); run `make synth` first")
    manifest = json.loads(manifest_file.read_text())
    expected: list[ExpectedEndpoint] = []
    for stack_name, artifact in manifest.get("artifacts", {}).items():
        if artifact.get("type") != STACK_ARTIFACT:
            continue
        region = artifact.get("environment", "").rsplit("/", 1)[-1]
        stack_name = artifact["properties"].get("stackName", stack_name)
        template = json.loads((cdk_out / artifact["properties"]["templateFile"]).read_text())
        resources: dict[str, dict] = template.get("Resources", {})
        outputs = {key: output["Value"] for key, output in template.get("Outputs", {}).items()}
        targets = [r["Properties"] for r in resources.values() if r["Type"] == SCALABLE_TARGET]
        for endpoint in (r["Properties"] for r in resources.values() if r["Type"] == ENDPOINT):
            config_id = _resource_ref(endpoint["EndpointConfigName"])
            if config_id not in resources:
                raise UsageError(f"{stack_name}: the endpoint's EndpointConfigName does not refer to an EndpointConfig")
            (variant,) = resources[config_id]["Properties"]["ProductionVariants"]
            model_id = _resource_ref(variant["ModelName"])
            container = resources[model_id]["Properties"]["PrimaryContainer"] if model_id in resources else {}
            source = container.get("ModelDataSource", {}).get("S3DataSource", {})
            resource_id = f"endpoint/{endpoint['EndpointName']}/variant/{variant['VariantName']}"
            scaling = next(((t["MinCapacity"], t["MaxCapacity"]) for t in targets if t["ResourceId"] == resource_id), None)
            expected.append(ExpectedEndpoint(
                stack_name=stack_name,
                region=region,
                endpoint_name=endpoint["EndpointName"],
                variant_name=variant["VariantName"],
                instance_type=variant["InstanceType"],
                initial_instance_count=variant["InitialInstanceCount"],
                image=container.get("Image"),
                model_package=container.get("ModelPackageName"),
                model_data_s3_uri=source.get("S3Uri"),
                scaling=scaling,
                outputs=outputs,
            ))
    return expected


class TemplateResolver:
    """Evaluates the intrinsic functions the CDK emits for names and URIs: ``Ref`` of pseudo parameters,
    ``Fn::Join``, ``Fn::Select``, ``Fn::Split``, ``Fn::Sub`` (pseudo parameters only) and ``Fn::ImportValue``; and
    a ``Fn::GetAtt`` or resource ``Ref`` that a stack output holds, from the deployed stack's output.

    Args:
        account / region: of the deployment (STS, the stack's environment).
        exports: loads ``{export name: value}`` on first use (CloudFormation ListExports).
        template_outputs: ``{output key: template value}`` of the stack the values come from.
        stack_outputs: loads the deployed stack's ``{output key: value}`` on first use (CloudFormation
            DescribeStacks), or returns None when the stack is not deployed.
    """

    def __init__(self, account: str, region: str, exports: Callable[[], Mapping[str, str]],
                 template_outputs: Mapping[str, Any] | None = None,
                 stack_outputs: Callable[[], Mapping[str, str] | None] | None = None) -> None:
        partition = "aws-cn" if region.startswith("cn-") else "aws-us-gov" if region.startswith("us-gov-") else "aws"
        self.pseudo = {
            "AWS::AccountId": account,
            "AWS::Region": region,
            "AWS::Partition": partition,
            "AWS::URLSuffix": "amazonaws.com.cn" if partition == "aws-cn" else "amazonaws.com",
        }
        self._load_exports = exports
        self._exports: Mapping[str, str] | None = None
        self._template_outputs = dict(template_outputs or {})
        self._load_stack_outputs = stack_outputs
        self._stack_outputs: Mapping[str, str] | None = None
        self._stack_outputs_loaded = False

    def _from_output(self, value: dict, what: str) -> Any:
        """The deployed value of the stack output whose template value is ``value``.

        Raises:
            Unresolvable: no output holds ``value``, the stack is not deployed, or it lacks that output.
        """
        keys = [key for key, template_value in self._template_outputs.items() if template_value == value]
        if not keys or self._load_stack_outputs is None:
            raise Unresolvable(what)
        if not self._stack_outputs_loaded:
            self._stack_outputs = self._load_stack_outputs()
            self._stack_outputs_loaded = True
        if self._stack_outputs is None:
            raise Unresolvable(f"{what}: its stack is not deployed, so output {keys[0]} cannot be read")
        for key in keys:
            if key in self._stack_outputs:
                return self._stack_outputs[key]
        raise Unresolvable(f"{what}: the deployed stack has no output {keys[0]} (deployed from another version?)")

    def resolve(self, value: Any) -> Any:
        """The value of ``value``.

        Raises:
            Unresolvable: it needs ``Fn::GetAtt``, a resource ``Ref`` or an export that does not exist.
        """
        if not isinstance(value, dict):
            return value
        ((function, argument),) = value.items()
        if function == "Ref":
            if argument in self.pseudo:
                return self.pseudo[argument]
            return self._from_output(value, f"Ref {argument}")
        if function == "Fn::GetAtt":
            return self._from_output(value, f"Fn::GetAtt {'.'.join(map(str, argument))}")
        if function == "Fn::Join":
            separator, parts = argument
            return separator.join(str(self.resolve(part)) for part in parts)
        if function == "Fn::Select":
            index, items = argument
            listed = self.resolve(items) if isinstance(items, dict) else [self.resolve(item) for item in items]
            return listed[int(self.resolve(index))]
        if function == "Fn::Split":
            separator, source = argument
            return str(self.resolve(source)).split(separator)
        if function == "Fn::Sub" and isinstance(argument, str):
            text = argument
            for name, pseudo_value in self.pseudo.items():
                text = text.replace("${" + name + "}", pseudo_value)
            if "${" in text:
                raise Unresolvable(f"Fn::Sub {argument}")
            return text
        if function == "Fn::ImportValue":
            if self._exports is None:
                self._exports = self._load_exports()
            name = self.resolve(argument)
            if name not in self._exports:
                raise Unresolvable(f"export {name} (is its stack deployed?)")
            return self._exports[name]
        raise Unresolvable(function)


def _exports_loader(session: boto3.Session, region: str) -> Callable[[], dict[str, str]]:
    def load() -> dict[str, str]:
        exports: dict[str, str] = {}
        for page in session.client("cloudformation", region_name=region).get_paginator("list_exports").paginate():
            exports.update({e["Name"]: e["Value"] for e in page.get("Exports", [])})
        return exports
    return load


def _stack_outputs_loader(session: boto3.Session, region: str, stack_name: str) -> Callable[[], dict[str, str] | None]:
    def load() -> dict[str, str] | None:
        try:
            stacks = session.client("cloudformation", region_name=region).describe_stacks(StackName=stack_name)
        except botocore.exceptions.ClientError as error:
            # DescribeStacks answers ValidationError for a stack that does not exist.
            if _error_code(error) == "ValidationError":
                return None
            raise
        return {o["OutputKey"]: o["OutputValue"] for o in stacks["Stacks"][0].get("Outputs", [])}
    return load


def _error_code(error: botocore.exceptions.ClientError) -> str:
    return error.response.get("Error", {}).get("Code", "")


def verify_endpoint(expected: ExpectedEndpoint, session: boto3.Session, account: str) -> list[Check]:
    """Compare one endpoint with SageMaker's view of it. Read-only."""
    resolver = TemplateResolver(account, expected.region, _exports_loader(session, expected.region), expected.outputs,
                                _stack_outputs_loader(session, expected.region, expected.stack_name))
    name = resolver.resolve(expected.endpoint_name)
    sagemaker = session.client("sagemaker", region_name=expected.region)
    checks: list[Check] = []

    def compare(what: str, template_value: Any, actual: Any) -> None:
        try:
            wanted = resolver.resolve(template_value)
        except Unresolvable as error:
            checks.append(Check(name, what, "?", f"cannot resolve the template's value ({error})", ok=False, skipped=True))
            return
        checks.append(Check(name, what, str(wanted), str(actual), ok=wanted == actual))

    try:
        endpoint = sagemaker.describe_endpoint(EndpointName=name)
    except botocore.exceptions.ClientError as error:
        if _error_code(error) == "ValidationException":
            return [Check(name, "endpoint", "deployed", f"not found in {expected.region} ({expected.stack_name} not "
                          "deployed?)", ok=False)]
        raise
    status = endpoint["EndpointStatus"]
    reason = f" ({endpoint['FailureReason']})" if endpoint.get("FailureReason") else ""
    checks.append(Check(name, "status", IN_SERVICE, status + reason, ok=status == IN_SERVICE))

    config_name = endpoint["EndpointConfigName"]
    config = sagemaker.describe_endpoint_config(EndpointConfigName=config_name)
    variant_name = resolver.resolve(expected.variant_name)
    variants = {v["VariantName"]: v for v in config["ProductionVariants"]}
    if variant_name not in variants:
        checks.append(Check(name, f"EndpointConfig {config_name}", f"variant {variant_name}",
                            f"variants {sorted(variants)}", ok=False))
        return checks
    variant = variants[variant_name]
    compare(f"EndpointConfig {config_name} instance type", expected.instance_type, variant.get("InstanceType"))
    compare(f"EndpointConfig {config_name} initial instance count", expected.initial_instance_count,
            variant.get("InitialInstanceCount"))

    model = sagemaker.describe_model(ModelName=variant["ModelName"])
    container = model.get("PrimaryContainer") or (model.get("Containers") or [{}])[0]
    if expected.image is not None:
        compare(f"Model {variant['ModelName']} image", expected.image, container.get("Image"))
    if expected.model_package is not None:
        compare(f"Model {variant['ModelName']} model package", expected.model_package, container.get("ModelPackageName"))
    if expected.model_data_s3_uri is not None:
        source = container.get("ModelDataSource", {}).get("S3DataSource", {})
        compare(f"Model {variant['ModelName']} model data", expected.model_data_s3_uri, source.get("S3Uri"))

    running = {v["VariantName"]: v for v in endpoint.get("ProductionVariants", [])}.get(variant_name, {})
    count = running.get("CurrentInstanceCount")
    if expected.scaling is None:
        checks.append(Check(name, "instance count (no autoscaling)", str(expected.initial_instance_count), str(count),
                            ok=count == expected.initial_instance_count))
    else:
        low, high = expected.scaling
        checks.append(Check(name, "instance count (autoscaled)", f"{low}-{high}", str(count),
                            ok=count is not None and low <= count <= high))
        resource_id = f"endpoint/{name}/variant/{variant_name}"
        targets = session.client("application-autoscaling", region_name=expected.region).describe_scalable_targets(
            ServiceNamespace="sagemaker", ResourceIds=[resource_id],
            ScalableDimension="sagemaker:variant:DesiredInstanceCount",
        )["ScalableTargets"]
        registered = f"{targets[0]['MinCapacity']}-{targets[0]['MaxCapacity']}" if targets else "not registered"
        checks.append(Check(name, f"scalable target {resource_id}", f"{low}-{high}", registered,
                            ok=registered == f"{low}-{high}"))
    return checks


def verify(cdk_out: Path, session: boto3.Session | None = None) -> list[Check]:
    """Every check for every endpoint in ``cdk_out``.

    Raises:
        UsageError: no cloud assembly at ``cdk_out``, or it holds no endpoint.
        botocore.exceptions.NoCredentialsError, ClientError: AWS could not be asked.
    """
    expected = read_cloud_assembly(cdk_out)
    if not expected:
        raise UsageError(f"{cdk_out} holds no SageMaker endpoint (are both endpoints disabled?)")
    session = session or boto3.Session()
    account = session.client("sts", region_name=expected[0].region).get_caller_identity()["Account"]
    checks: list[Check] = []
    for endpoint in expected:
        checks.extend(verify_endpoint(endpoint, session, account))
    return checks


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``verify`` to the voicectl parser."""
    parser = subparsers.add_parser(
        "verify", help="check that each endpoint is InService on the EndpointConfig this synth expects (read-only)")
    parser.add_argument("--cdk-out", type=Path, default=Path("cdk.out"),
                        help="the synthesized app (default: cdk.out; `make verify` synthesizes it first)")
    parser.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    try:
        checks = verify(args.cdk_out)
    except (botocore.exceptions.NoCredentialsError, botocore.exceptions.PartialCredentialsError) as error:
        print(f"make verify: stopped: no AWS credentials found ({error}); configure them (for example "
              "`aws configure sso` and `export AWS_PROFILE=<profile>`) and run it again.")
        return 1
    except botocore.exceptions.ClientError as error:
        print(f"make verify: stopped: AWS refused a read: {error}")
        return 1
    for check in checks:
        print(check.line())
    failed = [c for c in checks if not c.ok and not c.skipped]
    print(f"{len(checks) - len(failed)} of {len(checks)} checks passed" + ("" if not failed else
          f"; {len(failed)} failed: the deployed endpoints are not what this synth describes"))
    return 1 if failed else 0
