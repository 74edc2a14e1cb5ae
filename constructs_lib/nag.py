"""How cdk-nag writes a value in a finding id, so that a construct can acknowledge its own findings
exactly.

cdk-nag 3 matches acknowledgments by exact finding id, e.g.
``AwsSolutions-IAM5[Resource::<Bucket1234.Arn>/p/*]``, and the id embeds the resolved CloudFormation
value. Rendering rules (cdk-nag ``NagRules.resolveIfPrimitive`` /
``resolveResourceFromInstrinsic``): ``Ref`` of a pseudo parameter or resource -> ``<Name>``,
``Fn::GetAtt`` -> ``<LogicalId.Attribute>``, ``Fn::ImportValue`` -> the export name, ``Fn::Join`` ->
its parts joined, literals as is.
"""

from __future__ import annotations

from typing import Any

from aws_cdk import Acknowledgment, CfnResource, Stack, Validations
from constructs import IConstruct


def _render(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, (int, float)):
        return str(value)
    if isinstance(value, dict) and len(value) == 1:
        ((function, argument),) = value.items()
        if function == "Ref":
            return f"<{argument}>"
        if function == "Fn::GetAtt":
            logical_id, attribute = (
                argument if isinstance(argument, list) else argument.split(".", 1)
            )
            return f"<{logical_id}.{attribute}>"
        if function == "Fn::ImportValue":
            return _render(argument)
        if function == "Fn::Join":
            separator, parts = argument
            return separator.join(_render(part) for part in parts)
    raise ValueError(f"cannot render {value!r} as cdk-nag does; acknowledge this finding by hand")


def nag_render(stack: Stack, value: str) -> str:
    """``value`` (a string, possibly holding CDK tokens) as it appears in a cdk-nag finding id of
    ``stack``.

    Raises:
        ValueError: the value resolves to an intrinsic this renderer does not know.
    """
    return _render(stack.resolve(value))


#: The cdk-nag compliance packs a private deployment is checked with, by rule-name prefix (cdk-nag 3
#: ``HIPAASecurityChecks`` and ``NIST80053R5Checks``). Both name most rules alike
#: (``HIPAA.Security-LambdaDLQ``, ``NIST.800.53.R5-LambdaDLQ``).
COMPLIANCE_PACKS = ("HIPAA.Security", "NIST.800.53.R5")


def acknowledge_compliance(scope: IConstruct, findings: dict[str, str]) -> None:
    """Acknowledge compliance-pack rules (``{rule: reason}``, e.g. ``{"LambdaDLQ": "..."}``) on
    ``scope`` and its children, in every pack of :data:`COMPLIANCE_PACKS`. An acknowledgment of a
    pack that is not loaded does nothing, so constructs may state theirs whatever packs the app
    runs."""
    Validations.of(scope).acknowledge(
        *(
            Acknowledgment(id=f"{pack}-{rule}", reason=reason)
            for rule, reason in findings.items()
            for pack in COMPLIANCE_PACKS
        )
    )


def skip_checkov(scope: IConstruct, resource_type: str, checks: dict[str, str]) -> None:
    """Mark every ``resource_type`` resource under ``scope`` (``scope`` included) so that checkov
    skips ``checks`` (``{check id: reason}``), with the reason in the template (checkov's
    CloudFormation suppressions: resource ``Metadata`` ``checkov.skip`` entries of ``id`` and
    ``comment``)."""
    for construct in scope.node.find_all():
        if isinstance(construct, CfnResource) and construct.cfn_resource_type == resource_type:
            metadata = construct.get_metadata("checkov") or {"skip": []}
            metadata["skip"] += [
                {"id": check, "comment": reason}
                for check, reason in checks.items()
                if check not in {entry["id"] for entry in metadata["skip"]}
            ]
            construct.add_metadata("checkov", metadata)


def stack_singletons(scope: IConstruct, prefix: str) -> list[IConstruct]:
    """The constructs at the top of ``scope``'s stack whose id starts with ``prefix``: where CDK
    puts the one provider function per stack of a feature (``Custom::S3AutoDeleteObjects...``,
    ``Custom::VpcRestrictDefaultSG...``, cdk-ecr-deployment's ``Custom::CDKECRDeployment...``)."""
    return [child for child in Stack.of(scope).node.children if child.node.id.startswith(prefix)]


#: checkov's Lambda checks that a CloudFormation custom resource's handler does not need, and why.
CUSTOM_RESOURCE_HANDLER_SKIPS = {
    "CKV_AWS_115": "A custom resource handler runs only when CloudFormation calls it during a "
    "deployment; a reserved concurrency limit protects nothing.",
    "CKV_AWS_116": "A custom resource handler's failure fails the deployment, where it must be "
    "seen; an asynchronous dead-letter queue would never receive CloudFormation's synchronous "
    "calls.",
    "CKV_AWS_117": "A custom resource handler calls only AWS control-plane APIs at deploy time "
    "and handles no inference data; the endpoints' VPC has no route to those APIs.",
}
