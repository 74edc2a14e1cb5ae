"""What a synthesized app says each SageMaker endpoint should be, for ``voicectl verify``
(:mod:`voicectl.operations.verify`): the endpoints of the cloud assembly's stacks (``cdk.out``:
``manifest.json`` and the stack templates), each with its EndpointConfig, ProductionVariants,
scalable targets and the stack's Models, as template expressions
(:class:`~voicectl.operations.verify_resolver.TemplateResolver` resolves them)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from voicectl.cli import UsageError

STACK_ARTIFACT = "aws:cloudformation:stack"
ENDPOINT = "AWS::SageMaker::Endpoint"
ENDPOINT_CONFIG = "AWS::SageMaker::EndpointConfig"
MODEL = "AWS::SageMaker::Model"
SCALABLE_TARGET = "AWS::ApplicationAutoScaling::ScalableTarget"


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
        return self.models.get(resource_ref(reference) or "")


def resource_ref(value: Any) -> str | None:
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
            config_id = resource_ref(endpoint["EndpointConfigName"])
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
