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

The synth's side is read by :mod:`~voicectl.operations.verify_assembly`, its intrinsic functions
resolved by :mod:`~voicectl.operations.verify_resolver`, and values compared by
:mod:`~voicectl.operations.verify_compare`; this module makes the checks of each endpoint.
"""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import botocore.exceptions

from constructs_lib.facts import instance_types
from voice_client.aws import NO_CREDENTIALS_HINT, aws_session, describe_aws_failure, error_code
from voicectl.cli import UsageError
from voicectl.operations.verify_assembly import (
    ExpectedEndpoint,
    ExpectedVariant,
    read_cloud_assembly,
)
from voicectl.operations.verify_compare import ABSENT, Check, Comparer
from voicectl.operations.verify_resolver import (
    TemplateResolver,
    Unresolvable,
    exports_loader,
    physical_ids_loader,
    stack_outputs_loader,
)

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


def _compare_model(
    compare: Comparer, sagemaker: Any, model_name: str, template: Mapping[str, Any] | None
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
            f"Model {model_name} PrimaryContainer.{name}", name, value, container.get(name, ABSENT)
        )
    compare.properties(f"Model {model_name}", template, model, MODEL_NOT_COMPARED, MODEL_DEFAULTS)


def verify_endpoint(expected: ExpectedEndpoint, session: Any, account: str) -> list[Check]:
    """Compare one endpoint with SageMaker's view of it. Read-only."""
    resolver = TemplateResolver(
        account,
        expected.region,
        exports_loader(session, expected.region),
        expected.outputs,
        stack_outputs_loader(session, expected.region, expected.stack_name),
        expected.resource_types,
        physical_ids_loader(session, expected.region, expected.stack_name),
    )
    name = resolver.resolve(expected.endpoint_name)
    sagemaker = session.client("sagemaker", region_name=expected.region)
    compare = Comparer(name, resolver)

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


def _why_no_volume_key(compare: Comparer, what: str, variants: tuple[ExpectedVariant, ...]) -> None:
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
    compare: Comparer,
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
