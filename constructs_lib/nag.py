"""How cdk-nag writes a value in a finding id, so that a construct can acknowledge its own findings exactly.

cdk-nag 3 matches acknowledgments by exact finding id, e.g. ``AwsSolutions-IAM5[Resource::<Bucket1234.Arn>/p/*]``,
and the id embeds the resolved CloudFormation value. Rendering rules (cdk-nag ``NagRules.resolveIfPrimitive`` /
``resolveResourceFromInstrinsic``): ``Ref`` of a pseudo parameter or resource -> ``<Name>``, ``Fn::GetAtt`` ->
``<LogicalId.Attribute>``, ``Fn::ImportValue`` -> the export name, ``Fn::Join`` -> its parts joined, literals as is.
"""

from __future__ import annotations

from typing import Any

from aws_cdk import Stack


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
            logical_id, attribute = argument if isinstance(argument, list) else argument.split(".", 1)
            return f"<{logical_id}.{attribute}>"
        if function == "Fn::ImportValue":
            return _render(argument)
        if function == "Fn::Join":
            separator, parts = argument
            return separator.join(_render(part) for part in parts)
    raise ValueError(f"cannot render {value!r} as cdk-nag does; acknowledge this finding by hand")


def nag_render(stack: Stack, value: str) -> str:
    """``value`` (a string, possibly holding CDK tokens) as it appears in a cdk-nag finding id of ``stack``.

    Raises:
        ValueError: the value resolves to an intrinsic this renderer does not know.
    """
    return _render(stack.resolve(value))
