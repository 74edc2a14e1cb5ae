"""``voicectl verify``: is every endpoint of this synth InService, running the Model and
EndpointConfig the synth describes?

Reads the synthesized app (``cdk.out``: ``manifest.json`` and the stack templates), takes each
``AWS::SageMaker::Endpoint`` with its EndpointConfig, Models and scalable targets, and compares them
with what SageMaker reports. Read-only: STS GetCallerIdentity, SageMaker DescribeEndpoint,
DescribeEndpointConfig and DescribeModel, Application Auto Scaling DescribeScalableTargets,
CloudFormation ListExports (``Fn::ImportValue``), DescribeStacks (a value only CloudFormation knows,
such as the S3 URI the model-staging custom resource returns, is read from the stack output whose
template value is the same expression) and ListStackResources (the physical id of a resource
``Ref``, e.g. a security group or KMS key of the same stack).

Every field the synth sets is compared, one check per field, naming the field, the expected and the
found value:

- Model (the variant's, and each instance pool's ``ModelNameOverride``): every ``PrimaryContainer``
  field (image, mode, environment variable by variable, ``ModelDataSource``, model package),
  ``EnableNetworkIsolation``, ``VpcConfig`` (subnets and security groups as sets). Not compared:
  ``ExecutionRoleArn`` (the role is not replaced by an update) and tags.
- EndpointConfig: ``KmsKeyId`` and every other property but tags; the set of variant names; per
  variant every field (instance type, counts, weight, timeouts, ``InferenceAmiVersion``, routing,
  ``InstancePools`` by priority, ``VariantInstanceProvisionTimeoutInSeconds``...).
  ``EnableNetworkIsolation``, ``VpcConfig``, ``KmsKeyId``, ``InferenceAmiVersion`` and
  ``InstancePools`` are compared even when the synth leaves them out (then they must be unset): a
  rolled-back EndpointConfig may carry a value the synth no longer sets. The synth leaves
  ``KmsKeyId`` out when an instance type of the variant (an instance pool's included) has local NVMe
  storage: CreateEndpointConfig refuses a key there (API reference, ``KmsKeyId``), so verify expects
      none and says
  why (:func:`constructs_lib.facts.instance_types.volume_key_refusal`).

What it catches: an endpoint that is missing, not InService (Creating, Updating, Failed,
RollingBack...), or InService on another EndpointConfig or Model than the synth's, for instance
after SageMaker rolled an update back (the endpoint then runs the old instance type, image or
environment), or after a deployment that never happened. Instance count: with a scalable target the
count autoscaling chose must lie within its min and max (and the registered target must have them);
without one, the count must be the template's InitialInstanceCount. With instance pools, every
running instance type must be one of the pools', and a pool the synth gives a Model of its own
(``ModelNameOverride``: its own stream cap) must have one deployed, and the other way round.

Exit code: 0 when every check passes, 1 when one fails (or AWS cannot be reached), 2 for bad input.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import botocore.exceptions

from constructs_lib.facts import instance_types
from voice_client.aws import NO_CREDENTIALS_HINT, aws_session, describe_aws_failure, error_code
from voicectl.cli import UsageError

STACK_ARTIFACT = "aws:cloudformation:stack"
ENDPOINT = "AWS::SageMaker::Endpoint"
ENDPOINT_CONFIG = "AWS::SageMaker::EndpointConfig"
MODEL = "AWS::SageMaker::Model"
SCALABLE_TARGET = "AWS::ApplicationAutoScaling::ScalableTarget"
IN_SERVICE = "InService"

#: Template properties not compared: names are generated, tags are not deployment state, the
#: execution role is not replaced by an update, and variants and models are compared field by field
#: on their own.
MODEL_NOT_COMPARED = frozenset({"ModelName", "Tags", "ExecutionRoleArn", "PrimaryContainer"})
CONFIG_NOT_COMPARED = frozenset({"EndpointConfigName", "Tags", "ProductionVariants"})
VARIANT_NOT_COMPARED = frozenset({"VariantName", "ModelName"})
#: Fields compared even when the template leaves them out, with the value that "left out" means.
MODEL_DEFAULTS: Mapping[str, Any] = {"EnableNetworkIsolation": False, "VpcConfig": None}
CONFIG_DEFAULTS: Mapping[str, Any] = {"KmsKeyId": None}
VARIANT_DEFAULTS: Mapping[str, Any] = {
    "InferenceAmiVersion": None,
    "InstancePools": None,
    "VariantInstanceProvisionTimeoutInSeconds": None,
}
#: Maps whose keys must match exactly (an extra environment variable changes the container's
#: behaviour); in other maps SageMaker may add keys of its own, so only the template's keys are
#: compared.
EXACT_KEYS = frozenset({"Environment"})
#: Lists whose order means nothing.
UNORDERED = frozenset({"Subnets", "SecurityGroupIds"})
#: ``Fn::GetAtt`` attributes computed from a resource's physical id (CloudFormation resource
#: reference, "Return values" of each type): ``{type: {attribute: template with {id}, {partition},
#: {region}, {account}}}``.
GETATT_FROM_PHYSICAL_ID: Mapping[str, Mapping[str, str]] = {
    "AWS::KMS::Key": {"Arn": "arn:{partition}:kms:{region}:{account}:key/{id}", "KeyId": "{id}"},
    "AWS::EC2::SecurityGroup": {"GroupId": "{id}"},
    "AWS::EC2::Subnet": {"SubnetId": "{id}"},
}


class Unresolvable(Exception):
    """A template value depends on something only CloudFormation knows (``Fn::GetAtt``, a resource
    ``Ref``)."""


@dataclass(frozen=True)
class ExpectedVariant:
    """One ProductionVariant as the template describes it.

    Attributes:
        name: the VariantName.
        properties: the variant's template properties (values may be intrinsic functions).
        scaling: (min, max) of the variant's scalable target, or None without one.
    """

    name: Any
    properties: Mapping[str, Any]
    scaling: tuple[int, int] | None


@dataclass(frozen=True)
class ExpectedEndpoint:
    """One endpoint as the synthesized template describes it. Values are template expressions (plain
    values, or intrinsic functions that :class:`TemplateResolver` resolves).

    Attributes:
        stack_name: the stack that holds it.
        region: the stack's region (from the cloud assembly's environment).
        endpoint_name: the EndpointName.
        config: the EndpointConfig's template properties.
        variants: its ProductionVariants.
        models: ``{logical id: template properties}`` of every AWS::SageMaker::Model of the stack (a
            variant's ``ModelName`` and a pool's ``ModelNameOverride`` refer to them with
            ``Fn::GetAtt``).
        outputs: the stack's template outputs, ``{output key: template value}``; a ``Fn::GetAtt`` or
            resource ``Ref`` that one of them holds is resolved from the deployed stack's output.
        resource_types: ``{logical id: type}`` of the stack's resources (for ``Ref`` and
            ``Fn::GetAtt``).
    """

    stack_name: str
    region: str
    endpoint_name: Any
    config: Mapping[str, Any]
    variants: tuple[ExpectedVariant, ...]
    models: Mapping[str, Mapping[str, Any]]
    outputs: Mapping[str, Any] = field(default_factory=dict)
    resource_types: Mapping[str, str] = field(default_factory=dict)

    def model_of(self, reference: Any) -> Mapping[str, Any] | None:
        """The template properties of the Model ``reference`` (``Fn::GetAtt``/``Ref``) points at, or
        None."""
        return self.models.get(_resource_ref(reference) or "")


@dataclass(frozen=True)
class Check:
    """One comparison: ``ok`` when ``actual`` is what the synth expects; ``skipped`` when it could
    not be judged."""

    endpoint: str
    what: str
    expected: str
    actual: str
    ok: bool
    skipped: bool = False

    def line(self) -> str:
        status = "SKIP" if self.skipped else ("OK" if self.ok else "MISMATCH")
        detail = (
            self.actual
            if self.ok or self.skipped
            else f"expected {self.expected}, found {self.actual}"
        )
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
        UsageError: ``cdk_out`` holds no cloud assembly (run ``make synth``), or a template is not
            what this app synthesizes.
    """
    manifest_file = cdk_out / "manifest.json"
    if not manifest_file.is_file():
        raise UsageError(
            f"{cdk_out} holds no synthesized app (no manifest.json); run `make synth` first"
        )
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
        models = {
            lid: r.get("Properties", {}) for lid, r in resources.items() if r["Type"] == MODEL
        }
        for endpoint in (r["Properties"] for r in resources.values() if r["Type"] == ENDPOINT):
            config_id = _resource_ref(endpoint["EndpointConfigName"])
            if config_id not in resources:
                raise UsageError(
                    f"{stack_name}: the endpoint's EndpointConfigName does not refer to an "
                    "EndpointConfig"
                )
            config = resources[config_id]["Properties"]
            variants = tuple(
                ExpectedVariant(
                    name=variant["VariantName"],
                    properties=variant,
                    scaling=next(
                        (
                            (t["MinCapacity"], t["MaxCapacity"])
                            for t in targets
                            if t["ResourceId"] == f"endpoint/{endpoint['EndpointName']}/variant/"
                            f"{variant['VariantName']}"
                        ),
                        None,
                    ),
                )
                for variant in config["ProductionVariants"]
            )
            expected.append(
                ExpectedEndpoint(
                    stack_name=stack_name,
                    region=region,
                    endpoint_name=endpoint["EndpointName"],
                    config=config,
                    variants=variants,
                    models=models,
                    outputs=outputs,
                    resource_types={lid: r["Type"] for lid, r in resources.items()},
                )
            )
    return expected


class TemplateResolver:
    """Evaluates the intrinsic functions the CDK emits for names and URIs: ``Ref`` of pseudo
    parameters, ``Fn::Join``, ``Fn::Select``, ``Fn::Split``, ``Fn::Sub`` (pseudo parameters only)
    and ``Fn::ImportValue``; a ``Fn::GetAtt`` or resource ``Ref`` that a stack output holds, from
    the deployed stack's output; otherwise a resource ``Ref`` (and the ``Fn::GetAtt`` attributes of
    :data:`GETATT_FROM_PHYSICAL_ID`) from the resource's physical id in the deployed stack.

    Args:
        account / region: of the deployment (STS, the stack's environment).
        exports: loads ``{export name: value}`` on first use (CloudFormation ListExports).
        template_outputs: ``{output key: template value}`` of the stack the values come from.
        stack_outputs: loads the deployed stack's ``{output key: value}`` on first use
            (CloudFormation DescribeStacks), or returns None when the stack is not deployed.
        resource_types: ``{logical id: type}`` of the stack's template resources.
        physical_ids: loads the deployed stack's ``{logical id: physical id}`` on first use
            (CloudFormation ListStackResources), or returns None when the stack is not deployed.
    """

    def __init__(
        self,
        account: str,
        region: str,
        exports: Callable[[], Mapping[str, str]],
        template_outputs: Mapping[str, Any] | None = None,
        stack_outputs: Callable[[], Mapping[str, str] | None] | None = None,
        resource_types: Mapping[str, str] | None = None,
        physical_ids: Callable[[], Mapping[str, str] | None] | None = None,
    ) -> None:
        partition = (
            "aws-cn"
            if region.startswith("cn-")
            else "aws-us-gov"
            if region.startswith("us-gov-")
            else "aws"
        )
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
        self._resource_types = dict(resource_types or {})
        self._load_physical_ids = physical_ids
        self._physical_ids: Mapping[str, str] | None = None
        self._physical_ids_loaded = False

    def _from_output(self, value: dict, what: str) -> Any:
        """The deployed value of the stack output whose template value is ``value``.

        Raises:
            Unresolvable: no output holds ``value``, the stack is not deployed, or it lacks that
                output.
        """
        keys = [
            key for key, template_value in self._template_outputs.items() if template_value == value
        ]
        if not keys or self._load_stack_outputs is None:
            return self._from_physical_id(value, what)
        if not self._stack_outputs_loaded:
            self._stack_outputs = self._load_stack_outputs()
            self._stack_outputs_loaded = True
        if self._stack_outputs is None:
            raise Unresolvable(
                f"{what}: its stack is not deployed, so output {keys[0]} cannot be read"
            )
        for key in keys:
            if key in self._stack_outputs:
                return self._stack_outputs[key]
        raise Unresolvable(
            f"{what}: the deployed stack has no output {keys[0]} (deployed from another version?)"
        )

    def _from_physical_id(self, value: dict, what: str) -> Any:
        """A resource ``Ref`` (or a :data:`GETATT_FROM_PHYSICAL_ID` attribute) from the deployed
        physical id.

        Raises:
            Unresolvable: another attribute, or the stack or resource is not deployed.
        """
        logical_id = _resource_ref(value)
        if "Fn::GetAtt" in value:
            attribute = value["Fn::GetAtt"][1]
            pattern = GETATT_FROM_PHYSICAL_ID.get(
                self._resource_types.get(logical_id or "", ""), {}
            ).get(attribute)
        else:
            pattern = "{id}"
        if pattern is None or self._load_physical_ids is None:
            raise Unresolvable(what)
        if not self._physical_ids_loaded:
            self._physical_ids = self._load_physical_ids()
            self._physical_ids_loaded = True
        if self._physical_ids is None or logical_id not in self._physical_ids:
            raise Unresolvable(f"{what}: the resource is not deployed (is its stack?)")
        return pattern.format(
            id=self._physical_ids[logical_id],
            partition=self.pseudo["AWS::Partition"],
            region=self.pseudo["AWS::Region"],
            account=self.pseudo["AWS::AccountId"],
        )

    def resolve(self, value: Any) -> Any:
        """The value of ``value``.

        Raises:
            Unresolvable: it needs ``Fn::GetAtt``, a resource ``Ref`` or an export that does not
                exist.
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
            listed = (
                self.resolve(items)
                if isinstance(items, dict)
                else [self.resolve(item) for item in items]
            )
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

    def resolve_deep(self, value: Any) -> Any:
        """``value`` with every intrinsic function inside it (in maps and lists, at any depth)
        resolved.

        Raises:
            Unresolvable: as :meth:`resolve`.
        """
        if isinstance(value, dict):
            if len(value) == 1 and next(iter(value)).startswith(("Fn::", "Ref")):
                return self.resolve(value)
            return {key: self.resolve_deep(item) for key, item in value.items()}
        if isinstance(value, list):
            return [self.resolve_deep(item) for item in value]
        return value


def _exports_loader(session: Any, region: str) -> Callable[[], dict[str, str]]:
    def load() -> dict[str, str]:
        exports: dict[str, str] = {}
        for page in (
            session.client("cloudformation", region_name=region)
            .get_paginator("list_exports")
            .paginate()
        ):
            exports.update({e["Name"]: e["Value"] for e in page.get("Exports", [])})
        return exports

    return load


def _stack_outputs_loader(
    session: Any, region: str, stack_name: str
) -> Callable[[], dict[str, str] | None]:
    def load() -> dict[str, str] | None:
        try:
            stacks = session.client("cloudformation", region_name=region).describe_stacks(
                StackName=stack_name
            )
        except botocore.exceptions.ClientError as error:
            # DescribeStacks answers ValidationError for a stack that does not exist.
            if error_code(error) == "ValidationError":
                return None
            raise
        return {o["OutputKey"]: o["OutputValue"] for o in stacks["Stacks"][0].get("Outputs", [])}

    return load


def _physical_ids_loader(
    session: Any, region: str, stack_name: str
) -> Callable[[], dict[str, str] | None]:
    def load() -> dict[str, str] | None:
        paginator = session.client("cloudformation", region_name=region).get_paginator(
            "list_stack_resources"
        )
        try:
            return {
                r["LogicalResourceId"]: r["PhysicalResourceId"]
                for page in paginator.paginate(StackName=stack_name)
                for r in page.get("StackResourceSummaries", [])
                if r.get("PhysicalResourceId")
            }
        except botocore.exceptions.ClientError as error:
            if error_code(error) == "ValidationError":
                return None
            raise

    return load


# --- Comparing values ---------------------------------------------------------------------------


class _Absent:
    """A value the template or SageMaker leaves out (falsy, like an empty map or list)."""

    def __bool__(self) -> bool:
        return False

    def __repr__(self) -> str:
        return "unset"


_ABSENT = _Absent()
#: OK lines show a map or list in full up to this many characters, else only how many entries it
#: has.
SUMMARY_CHARS = 100


def _show(value: Any) -> str:
    """A value as the user reads it: JSON for maps and lists, "unset" for a missing one."""
    if value is _ABSENT or value is None or value == {} or value == []:
        return "unset"
    if isinstance(value, (dict, list)):
        return json.dumps(value, sort_keys=True, separators=(", ", ": "))
    return str(value)


def _summary(value: Any) -> str:
    """:func:`_show`, shortened for maps and lists longer than :data:`SUMMARY_CHARS`."""
    shown = _show(value)
    if isinstance(value, (dict, list)) and len(shown) > SUMMARY_CHARS:
        return f"as synthesized ({len(value)} {'entry' if len(value) == 1 else 'entries'})"
    return shown


def _same_scalar(expected: Any, actual: Any) -> bool:
    """Equal leaves: numbers by value (the template says 1, the API 1.0), unset equals None (and
    False for a flag, SageMaker's default)."""
    if isinstance(expected, bool) or isinstance(actual, bool):
        return (expected or False) is (actual or False)
    if isinstance(expected, (int, float)) and isinstance(actual, (int, float)):
        return float(expected) == float(actual)
    if (
        not expected
        and not actual
        and expected in (None, _ABSENT, "")
        and actual in (None, _ABSENT, "")
    ):
        return True
    return expected == actual


def differences(expected: Any, actual: Any, path: str = "") -> list[tuple[str, Any, Any]]:
    """``[(path, expected, found)]`` for every leaf where ``actual`` differs from ``expected``.

    Maps compare the template's keys (and, for :data:`EXACT_KEYS`, report the deployed map's extra
    keys too); lists compare item by item (:data:`UNORDERED` ones as sets of strings); numbers
    compare by value; a missing value equals None.
    """
    name = path.rsplit(".", 1)[-1]
    if isinstance(expected, dict) and isinstance(actual, dict):
        found: list[tuple[str, Any, Any]] = []
        keys = list(expected) + (
            [key for key in actual if key not in expected] if name in EXACT_KEYS else []
        )
        for key in keys:
            found += differences(
                expected.get(key, _ABSENT),
                actual.get(key, _ABSENT),
                f"{path}.{key}" if path else key,
            )
        return found
    if isinstance(expected, list) and isinstance(actual, list):
        if name in UNORDERED:
            return (
                []
                if sorted(map(str, expected)) == sorted(map(str, actual))
                else [(path, expected, actual)]
            )
        if len(expected) != len(actual):
            return [(path, expected, actual)]
        return [
            item
            for index, (e, a) in enumerate(zip(expected, actual, strict=True))
            for item in differences(e, a, f"{path}[{index}]")
        ]
    if isinstance(expected, (dict, list)) or isinstance(actual, (dict, list)):
        return [] if not expected and not actual else [(path, expected, actual)]
    return [] if _same_scalar(expected, actual) else [(path, expected, actual)]


def _pools_by_priority(pools: Any, drop: tuple[str, ...] = ("ModelNameOverride",)) -> Any:
    """InstancePools sorted by Priority, without ``drop`` keys (each pool's Model is verified on its
    own)."""
    if not isinstance(pools, list):
        return pools
    return [
        {k: v for k, v in pool.items() if k not in drop}
        for pool in sorted(pools, key=lambda pool: int(pool.get("Priority", 0)))
    ]


class _Comparer:
    """Collects the checks of one endpoint, resolving template values on the way."""

    def __init__(self, endpoint: str, resolver: TemplateResolver) -> None:
        self.endpoint = endpoint
        self.resolver = resolver
        self.checks: list[Check] = []

    def add(self, what: str, expected: str, actual: str, ok: bool, skipped: bool = False) -> None:
        self.checks.append(Check(self.endpoint, what, expected, actual, ok=ok, skipped=skipped))

    def field(
        self,
        what: str,
        key: str,
        template_value: Any,
        actual: Any,
        normalise: Callable[[Any], Any] = lambda v: v,
    ) -> None:
        """One check named ``what``: the deployed ``actual`` of property ``key`` against the
        template's value, resolved. A mismatch inside a map or list names each differing entry
        (``SM_VLLM_MAX_MODEL_LEN=7500``)."""
        try:
            # Normalised before resolving too: what normalising drops (a pool's ModelNameOverride)
            # need not resolve.
            wanted = normalise(self.resolver.resolve_deep(normalise(template_value)))
        except Unresolvable as error:
            self.add(
                what, "?", f"cannot resolve the template's value ({error})", ok=False, skipped=True
            )
            return
        actual = normalise(actual)
        diffs = differences(wanted, actual, key)
        if not diffs:
            self.add(what, _summary(wanted), _summary(actual), ok=True)
        elif len(diffs) == 1 and diffs[0][0] == key:
            self.add(what, _show(diffs[0][1]), _show(diffs[0][2]), ok=False)
        else:
            inner = [(path[len(key) :].lstrip("."), e, a) for path, e, a in diffs]
            self.add(
                what,
                "; ".join(f"{path}={_show(e)}" for path, e, _ in inner),
                "; ".join(f"{path}={_show(a)}" for path, _, a in inner),
                ok=False,
            )

    def properties(
        self,
        prefix: str,
        template: Mapping[str, Any],
        deployed: Mapping[str, Any],
        not_compared: frozenset[str],
        defaults: Mapping[str, Any],
    ) -> None:
        """One :meth:`field` per template property (but ``not_compared``) and per ``defaults`` key
        it leaves out."""
        for name, value in template.items():
            if name not in not_compared:
                self.field(
                    f"{prefix} {name}",
                    name,
                    value,
                    deployed.get(name, _ABSENT),
                    _pools_by_priority if name == "InstancePools" else lambda v: v,
                )
        for name, default in defaults.items():
            if name not in template:
                self.field(
                    f"{prefix} {name}",
                    name,
                    default,
                    deployed.get(name, _ABSENT),
                    _pools_by_priority if name == "InstancePools" else lambda v: v,
                )


def _compare_model(
    compare: _Comparer, sagemaker: Any, model_name: str, template: Mapping[str, Any] | None
) -> None:
    """Every compared field of the deployed Model ``model_name`` against its template properties."""
    if template is None:
        compare.add(
            f"Model {model_name}",
            "a Model of this synth",
            "the template names no Model",
            ok=False,
            skipped=True,
        )
        return
    try:
        model = sagemaker.describe_model(ModelName=model_name)
    except botocore.exceptions.ClientError as error:
        if error_code(error) != "ValidationException":
            raise
        compare.add(
            f"Model {model_name}",
            "deployed",
            "not found (deleted after the EndpointConfig was made?)",
            ok=False,
        )
        return
    container = model.get("PrimaryContainer") or (model.get("Containers") or [{}])[0]
    for name, value in template.get("PrimaryContainer", {}).items():
        compare.field(
            f"Model {model_name} PrimaryContainer.{name}", name, value, container.get(name, _ABSENT)
        )
    compare.properties(f"Model {model_name}", template, model, MODEL_NOT_COMPARED, MODEL_DEFAULTS)


def verify_endpoint(expected: ExpectedEndpoint, session: Any, account: str) -> list[Check]:
    """Compare one endpoint with SageMaker's view of it. Read-only."""
    resolver = TemplateResolver(
        account,
        expected.region,
        _exports_loader(session, expected.region),
        expected.outputs,
        _stack_outputs_loader(session, expected.region, expected.stack_name),
        expected.resource_types,
        _physical_ids_loader(session, expected.region, expected.stack_name),
    )
    name = resolver.resolve(expected.endpoint_name)
    sagemaker = session.client("sagemaker", region_name=expected.region)
    compare = _Comparer(name, resolver)

    try:
        endpoint = sagemaker.describe_endpoint(EndpointName=name)
    except botocore.exceptions.ClientError as error:
        if error_code(error) == "ValidationException":
            return [
                Check(
                    name,
                    "endpoint",
                    "deployed",
                    f"not found in {expected.region} ({expected.stack_name} not deployed?)",
                    ok=False,
                )
            ]
        raise
    status = endpoint["EndpointStatus"]
    reason = f" ({endpoint['FailureReason']})" if endpoint.get("FailureReason") else ""
    compare.add("status", IN_SERVICE, status + reason, ok=status == IN_SERVICE)

    config_name = endpoint["EndpointConfigName"]
    config = sagemaker.describe_endpoint_config(EndpointConfigName=config_name)
    compare.properties(
        f"EndpointConfig {config_name}",
        expected.config,
        config,
        CONFIG_NOT_COMPARED,
        CONFIG_DEFAULTS,
    )
    if "KmsKeyId" not in expected.config:
        _why_no_volume_key(compare, f"EndpointConfig {config_name} KmsKeyId", expected.variants)
    deployed_variants = {v["VariantName"]: v for v in config["ProductionVariants"]}
    wanted_names = [resolver.resolve(variant.name) for variant in expected.variants]
    compare.add(
        f"EndpointConfig {config_name} variants",
        ", ".join(sorted(wanted_names)),
        ", ".join(sorted(deployed_variants)),
        ok=sorted(wanted_names) == sorted(deployed_variants),
    )
    running = {v["VariantName"]: v for v in endpoint.get("ProductionVariants", [])}
    for variant, variant_name in zip(expected.variants, wanted_names, strict=True):
        if variant_name not in deployed_variants:
            continue
        deployed = deployed_variants[variant_name]
        compare.properties(
            f"EndpointConfig {config_name} {variant_name}",
            variant.properties,
            deployed,
            VARIANT_NOT_COMPARED,
            VARIANT_DEFAULTS,
        )
        _compare_model(
            compare,
            sagemaker,
            deployed["ModelName"],
            expected.model_of(variant.properties.get("ModelName")),
        )
        template_pools = {
            int(pool.get("Priority", 0)): pool
            for pool in variant.properties.get("InstancePools") or []
        }
        for pool in deployed.get("InstancePools") or []:
            override = template_pools.get(int(pool.get("Priority", 0)), {}).get("ModelNameOverride")
            if override is not None and pool.get("ModelNameOverride"):
                _compare_model(
                    compare, sagemaker, pool["ModelNameOverride"], expected.model_of(override)
                )
            elif (override is None) != (not pool.get("ModelNameOverride")):
                # One side runs the pool on a Model of its own (its own stream cap) and the other on
                # the variant's.
                compare.add(
                    f"EndpointConfig {config_name} {variant_name} pool {pool.get('InstanceType')} "
                    "ModelNameOverride",
                    "a Model of its own" if override is not None else "(unset)",
                    pool.get("ModelNameOverride") or "(unset)",
                    ok=False,
                )
        _check_instances(
            compare,
            session,
            expected.region,
            name,
            variant_name,
            variant,
            running.get(variant_name, {}),
        )
    return compare.checks


def _why_no_volume_key(
    compare: _Comparer, what: str, variants: tuple[ExpectedVariant, ...]
) -> None:
    """Add the reason to the ``KmsKeyId`` check ``what`` when the synth left the key off for
    local-storage types: the found value of a pass, the expected value of a mismatch ("unset
    (ml.g6.4xlarge: local NVMe ...)")."""
    types = [
        t
        for v in variants
        for t in [
            v.properties.get("InstanceType"),
            *(p.get("InstanceType") for p in v.properties.get("InstancePools") or []),
        ]
        if isinstance(t, str)
    ]
    local = instance_types.local_storage_types(types)
    if not local:
        return
    why = (
        f"unset: {', '.join(local)} {'has' if len(local) == 1 else 'have'} local NVMe storage, "
        "encrypted by the instance; CreateEndpointConfig refuses KmsKeyId there (API reference, "
        "KmsKeyId)"
    )
    compare.checks = [
        dataclasses.replace(c, **({"actual": why} if c.ok else {"expected": why}))
        if c.what == what
        else c
        for c in compare.checks
    ]


def _check_instances(
    compare: _Comparer,
    session: Any,
    region: str,
    endpoint_name: str,
    variant_name: str,
    variant: ExpectedVariant,
    running: Mapping[str, Any],
) -> None:
    """The running instance count against the scaling range (or the initial count), the registered
    scalable target, and with instance pools the running instance types."""
    count = running.get("CurrentInstanceCount")
    initial = variant.properties.get("InitialInstanceCount")
    if variant.scaling is None:
        compare.add(
            f"{variant_name} instance count (no autoscaling)",
            str(initial),
            str(count),
            ok=count == initial,
        )
    else:
        low, high = variant.scaling
        compare.add(
            f"{variant_name} instance count (autoscaled)",
            f"{low}-{high}",
            str(count),
            ok=count is not None and low <= count <= high,
        )
        resource_id = f"endpoint/{endpoint_name}/variant/{variant_name}"
        targets = session.client(
            "application-autoscaling", region_name=region
        ).describe_scalable_targets(
            ServiceNamespace="sagemaker",
            ResourceIds=[resource_id],
            ScalableDimension="sagemaker:variant:DesiredInstanceCount",
        )["ScalableTargets"]
        registered = (
            f"{targets[0]['MinCapacity']}-{targets[0]['MaxCapacity']}"
            if targets
            else "not registered"
        )
        compare.add(
            f"scalable target {resource_id}",
            f"{low}-{high}",
            registered,
            ok=registered == f"{low}-{high}",
        )
    pools = variant.properties.get("InstancePools")
    if pools and running.get("InstancePools") is not None:
        try:
            allowed = sorted(str(compare.resolver.resolve(pool["InstanceType"])) for pool in pools)
        except Unresolvable as error:
            compare.add(
                f"{variant_name} running instance types", "?", str(error), ok=False, skipped=True
            )
            return
        by_type = {
            pool["InstanceType"]: pool.get("CurrentInstanceCount", 0)
            for pool in running["InstancePools"]
        }
        strays = sorted(t for t, n in by_type.items() if n and t not in allowed)
        compare.add(
            f"{variant_name} running instance types",
            f"only {', '.join(allowed)}",
            ", ".join(f"{t} x {n}" for t, n in sorted(by_type.items())) or "none",
            ok=not strays,
        )


def verify(cdk_out: Path, session: Any = None) -> list[Check]:
    """Every check for every endpoint in ``cdk_out``.

    Raises:
        UsageError: no cloud assembly at ``cdk_out``, or it holds no endpoint.
        botocore.exceptions.NoCredentialsError, ClientError: AWS could not be asked.
    """
    expected = read_cloud_assembly(cdk_out)
    if not expected:
        raise UsageError(
            f"{cdk_out} holds no SageMaker endpoint (are both endpoints disabled, or on the ECS "
            "target? verify checks SageMaker endpoints only)"
        )
    session = session or aws_session(region_required=False)  # each stack names its own Region
    account = session.client("sts", region_name=expected[0].region).get_caller_identity()["Account"]
    checks: list[Check] = []
    for endpoint in expected:
        checks.extend(verify_endpoint(endpoint, session, account))
    return checks


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``verify`` to the voicectl parser."""
    parser = subparsers.add_parser(
        "verify",
        help="check that each endpoint runs the Model and EndpointConfig this synth describes "
        "(read-only)",
        description=(
            "Check, read-only, that each endpoint of the synthesized app is InService and that "
            "its EndpointConfig and Model carry every value the synth sets (instance type and "
            "pools, counts, timeouts, AMI version, KMS key, image, environment, model data, "
            "network isolation, VPC), naming the field, the expected and the found value. Exit "
            "code 1 when one differs, e.g. after SageMaker rolled an update back."
        ),
    )
    parser.add_argument(
        "--cdk-out",
        type=Path,
        default=Path("cdk.out"),
        help="the synthesized app (default: cdk.out; `make verify` synthesizes it first)",
    )
    parser.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    try:
        checks = verify(args.cdk_out)
    except (
        botocore.exceptions.NoCredentialsError,
        botocore.exceptions.PartialCredentialsError,
    ) as error:
        print(f"make verify: stopped: no AWS credentials found ({error}). {NO_CREDENTIALS_HINT}")
        return 1
    except (botocore.exceptions.BotoCoreError, botocore.exceptions.ClientError) as error:
        described = describe_aws_failure(error)
        print(f"make verify: stopped: {described[1] if described else error}")
        return 1
    for check in checks:
        print(check.line())
    failed = [c for c in checks if not c.ok and not c.skipped]
    print(
        f"{len(checks) - len(failed)} of {len(checks)} checks passed"
        + (
            ""
            if not failed
            else f"; {len(failed)} failed: the deployed endpoints are not what this synth describes"
        )
    )
    return 1 if failed else 0
