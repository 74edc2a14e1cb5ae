"""Resolving the template values of a synthesized endpoint, for ``voicectl verify``
(:mod:`voicectl.operations.verify`): the intrinsic functions the CDK emits, evaluated with what the
deployment's CloudFormation knows (ListExports, DescribeStacks, ListStackResources). Read-only."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import botocore.exceptions

from voice_client.aws import error_code
from voicectl.operations.verify_assembly import resource_ref

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
        logical_id = resource_ref(value)
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


def exports_loader(session: Any, region: str) -> Callable[[], dict[str, str]]:
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


def stack_outputs_loader(
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


def physical_ids_loader(
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
