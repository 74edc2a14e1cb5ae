"""The harness's fixes for moto's gaps (listed in lifecycle_moto.py's docstring), one function per
patched service or concern, each returning its patches as context managers; :func:`moto_patches`
gives them all, and ``lifecycle_moto.moto_server`` applies them while its server runs."""

from __future__ import annotations

import contextlib
import json
import traceback
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from tests.e2e.lifecycle.lifecycle_moto_stand_ins import (
    CLOUDFORMATION_STAND_INS,
    CUSTOM_RESOURCE_STAND_INS,
    camel,
)

if TYPE_CHECKING:
    from tests.e2e.lifecycle.lifecycle_moto import MotoServer

#: Longest name of each resource type (the services' API references: CreateStateMachine ``name`` 80,
#: IAM role name 64, Lambda function name 64, SageMaker ModelName and EndpointConfigName 63).
#: CloudFormation shortens the names it generates to fit; moto does not, and then rejects its own
#: names.
GENERATED_NAME_LIMITS = {
    "AWS::StepFunctions::StateMachine": 80,
    "AWS::IAM::Role": 64,
    "AWS::Lambda::Function": 64,
    "AWS::SageMaker::Model": 63,
    "AWS::SageMaker::EndpointConfig": 63,
}


#: Types whose every update is a replacement under a new generated name (CloudFormation reference:
#: all properties of AWS::SageMaker::Model and AWS::SageMaker::EndpointConfig say "Update requires:
#: Replacement").
REPLACED_ON_UPDATE = {
    "AWS::SageMaker::Model",
    "AWS::SageMaker::EndpointConfig",
    "AWS::ECS::TaskDefinition",
}


def _references(value: Any) -> set[str]:
    """Logical ids a template fragment reads through ``Ref`` or ``Fn::GetAtt``."""
    found: set[str] = set()
    if isinstance(value, dict):
        if isinstance(value.get("Ref"), str):
            found.add(value["Ref"])
        get_att = value.get("Fn::GetAtt")
        if isinstance(get_att, list) and get_att:
            found.add(get_att[0])
        elif isinstance(get_att, str):
            found.add(get_att.split(".", 1)[0])
        for item in value.values():
            found |= _references(item)
    elif isinstance(value, list):
        for item in value:
            found |= _references(item)
    return found


@contextlib.contextmanager
def _patched(owner: Any, name: str, value: Any) -> Iterator[None]:
    original = owner.__dict__[name] if isinstance(owner, type) else getattr(owner, name)
    setattr(owner, name, value)
    try:
        yield
    finally:
        setattr(owner, name, original)


@contextlib.contextmanager
def _added(owner: type, name: str, value: Any) -> Iterator[None]:
    """Give ``owner`` its own ``name`` (it inherits an abstract one), removed again on exit."""
    assert name not in owner.__dict__, f"{owner.__name__}.{name} exists now: drop this harness fix"
    setattr(owner, name, value)
    try:
        yield
    finally:
        delattr(owner, name)


def ec2_network_patches() -> list[contextlib.AbstractContextManager]:
    """EC2: a delete for each VPC part moto's CloudFormation cannot delete (the Foundation stack's
    private network in network.mode=vpc, the ECS target's own VPC)."""
    from moto.ec2 import models as ec2_models
    from moto.ec2.models import (
        elastic_ip_addresses,
        flow_logs,
        internet_gateways,
        nat_gateways,
        route_tables,
        subnets,
        vpcs,
        vpn_gateway,
    )

    # moto's CloudFormation cannot delete these VPC parts (the Foundation stack's private network in
    # network.mode=vpc, the ECS target's own VPC), so deleting the stack fails on the VPC ("has
    # dependencies"). CloudFormation deletes them first; each gets a delete through moto's EC2 API.
    def ec2_delete(delete: Callable[[Any, Any], None]) -> Callable[..., None]:
        """A ``delete(account_id, region_name)`` for a moto EC2 model, as moto's CloudFormation
        calls it."""

        def method(self: Any, account_id: str, region_name: str) -> None:
            delete(ec2_models.ec2_backends[account_id][region_name], self)

        return method

    def delete_route_table(backend: Any, table: Any) -> None:
        if table.id not in backend.route_tables:
            return  # moto may call a delete again after another resource's delete failed
        table._associations.clear()  # moto names an association by its route table's id (see below)
        backend.delete_route_table(table.id)

    def delete_nat_gateway(backend: Any, gateway: Any) -> None:
        backend.delete_nat_gateway(
            gateway.id
        )  # moto marks it deleted but keeps its network interface
        backend.enis.pop(gateway._eni.id, None)

    def delete_vpc_endpoint(backend: Any, endpoint: Any) -> None:
        # A gateway endpoint removes its routes; those of a route table deleted before it are gone
        # already.
        if endpoint.id not in backend.vpc_end_points:
            return
        endpoint.route_table_ids = [
            t for t in endpoint.route_table_ids or [] if t in backend.route_tables
        ]
        backend.delete_vpc_endpoints([endpoint.id])

    network_deletes = {
        nat_gateways.NatGateway: delete_nat_gateway,
        vpcs.VPCEndPoint: delete_vpc_endpoint,
        flow_logs.FlowLogs: lambda backend, r: backend.delete_flow_logs([r.id]),
        route_tables.RouteTable: delete_route_table,
        # The route table's delete removes its associations.
        subnets.SubnetRouteTableAssociation: lambda backend, r: None,
        vpn_gateway.VPCGatewayAttachment: lambda backend, r: backend.detach_internet_gateway(
            r.gateway_id, r.vpc_id
        ),
        internet_gateways.InternetGateway: lambda backend, r: backend.delete_internet_gateway(r.id),
        elastic_ip_addresses.ElasticAddress: lambda backend, r: backend.release_address(
            allocation_id=r.allocation_id
        ),
    }

    return [
        *(_added(model, "delete", ec2_delete(delete)) for model, delete in network_deletes.items())
    ]


def ecs_patches() -> list[contextlib.AbstractContextManager]:
    """ECS: a task definition's update registers a new revision as on create; the cluster, service
    and task definition get a delete."""
    from moto.ecs import models as ecs_models

    def update_task_definition(
        cls: Any,
        original_resource: Any,
        new_resource_name: str,
        cloudformation_json: dict[str, Any],
        account_id: str,
        region_name: str,
    ) -> Any:
        # A new revision, as CloudFormation makes (ContainerDefinitions: "Update requires:
        # Replacement").
        ecs_models.ecs_backends[account_id][region_name].deregister_task_definition(
            original_resource.arn
        )
        return cls.create_from_cloudformation_json(
            new_resource_name, cloudformation_json, account_id, region_name
        )

    def ecs_delete(delete: Callable[[Any, Any], None]) -> Callable[..., None]:
        def method(self: Any, account_id: str, region_name: str) -> None:
            delete(ecs_models.ecs_backends[account_id][region_name], self)

        return method

    def delete_service(backend: Any, service: Any) -> None:
        if service.status == "ACTIVE":
            backend.delete_service(service.cluster_name, service.name, force=True)

    ecs_deletes = {
        # DeleteCluster and DeregisterTaskDefinition leave them INACTIVE, as ECS does.
        ecs_models.Cluster: lambda backend, r: backend.delete_cluster(r.arn),
        ecs_models.Service: delete_service,
        ecs_models.TaskDefinition: lambda backend, r: backend.deregister_task_definition(r.arn),
    }

    return [
        *(_added(model, "delete", ecs_delete(delete)) for model, delete in ecs_deletes.items()),
        _patched(
            ecs_models.TaskDefinition,
            "update_from_cloudformation_json",
            classmethod(update_task_definition),
        ),
    ]


def elbv2_patches() -> list[contextlib.AbstractContextManager]:
    """Elastic Load Balancing: a target group answers the ``Fn::GetAtt`` attributes CloudFormation
    documents, and gets a delete."""
    from moto.elbv2 import models as elbv2_models

    def target_group_attribute(self: Any, attribute_name: str) -> Any:
        # Elastic Load Balancing's attributes of AWS::ElasticLoadBalancingV2::TargetGroup
        # (CloudFormation reference).
        return {
            "TargetGroupFullName": self.arn.split(":")[-1],
            "TargetGroupName": self.name,
            "TargetGroupArn": self.arn,
            "LoadBalancerArns": list(self.load_balancer_arns),
        }[attribute_name]

    return [
        _added(elbv2_models.FakeTargetGroup, "get_cfn_attribute", target_group_attribute),
        _added(
            elbv2_models.FakeTargetGroup,
            "delete",
            lambda self, account_id, region_name: elbv2_models.elbv2_backends[account_id][
                region_name
            ].delete_target_group(self.arn),
        ),
        _added(
            elbv2_models.FakeTargetGroup,
            "has_cfn_attr",
            classmethod(
                lambda cls, attr: (
                    attr
                    in {
                        "TargetGroupFullName",
                        "TargetGroupName",
                        "TargetGroupArn",
                        "LoadBalancerArns",
                    }
                )
            ),
        ),
    ]


def kms_patches() -> list[contextlib.AbstractContextManager]:
    """KMS: a key's tags and policy in the spelling KMS reads, and its deletion scheduled with the
    stack's."""
    from moto.kms import models as kms_models

    original_create_key = kms_models.Key.create_from_cloudformation_json.__func__

    def create_key(
        cls: Any,
        resource_name: str,
        cloudformation_json: dict[str, Any],
        account_id: str,
        region_name: str,
        **kwargs: Any,
    ) -> Any:
        # moto hands CloudFormation's Tags ([{Key, Value}]) to KMS's tagger, which reads [{TagKey,
        # TagValue}]; the KeyError makes the key silently "undefined" for every Fn::GetAtt that
        # reads it.
        properties = dict(cloudformation_json["Properties"])
        properties["Tags"] = [
            {"TagKey": t["Key"], "TagValue": t["Value"]} for t in properties.get("Tags", [])
        ]
        # It also keeps KeyPolicy as the template's object, where its API (DescribeKey) expects a
        # JSON string.
        if isinstance(properties.get("KeyPolicy"), dict):
            properties["KeyPolicy"] = json.dumps(properties["KeyPolicy"])
        return original_create_key(
            cls,
            resource_name,
            {**cloudformation_json, "Properties": properties},
            account_id,
            region_name,
            **kwargs,
        )

    def delete_key(
        cls: Any,
        resource_name: str,
        cloudformation_json: dict[str, Any],
        account_id: str,
        region_name: str,
    ) -> None:
        # moto's AWS::KMS::Key has no delete; CloudFormation schedules the key's deletion
        # (PendingWindowInDays).
        days = int(cloudformation_json.get("Properties", {}).get("PendingWindowInDays", 30))
        kms_models.kms_backends[account_id][region_name].schedule_key_deletion(resource_name, days)

    return [
        _patched(kms_models.Key, "create_from_cloudformation_json", classmethod(create_key)),
        _added(kms_models.Key, "delete_from_cloudformation_json", classmethod(delete_key)),
    ]


def iam_patches() -> list[contextlib.AbstractContextManager]:
    """IAM: a managed policy gets a delete."""
    from moto.iam import models as iam_models

    def delete_managed_policy(
        cls: Any,
        resource_name: str,
        cloudformation_json: dict[str, Any],
        account_id: str,
        region_name: str,
    ) -> None:
        # moto's AWS::IAM::ManagedPolicy has no delete: deleting the stack would leave the policy
        # behind.
        from moto.utilities.utils import get_partition

        iam_models.iam_backends[account_id][get_partition(region_name)].delete_policy(resource_name)

    return [
        _added(
            iam_models.ManagedPolicy,
            "delete_from_cloudformation_json",
            classmethod(delete_managed_policy),
        )
    ]


def update_patches() -> list[contextlib.AbstractContextManager]:
    """Stack updates: the readers of a replaced resource are updated too
    (:data:`REPLACED_ON_UPDATE`)."""
    from moto.cloudformation import parsing

    original_build_resource_diff = parsing.ResourceMap.build_resource_diff

    def build_resource_diff(
        self: Any, other_template: dict[str, Any], parameters: Any = None
    ) -> dict[str, Any]:
        # moto updates a resource only when its own template JSON changed. When an update replaces a
        # resource (new physical name), CloudFormation also updates every resource that reads it
        # (the Endpoint reads the EndpointConfig's name); moto leaves them pointing at the deleted
        # one. Add those readers, in template order.
        diff = original_build_resource_diff(self, other_template, parameters)
        resources = other_template["Resources"]
        modified = set(diff["Modify"])
        replaced = {n for n in modified if resources[n]["Type"] in REPLACED_ON_UPDATE}
        while True:
            readers = {
                n
                for n, r in resources.items()
                if n not in modified and n not in diff["Add"] and _references(r) & replaced
            }
            if not readers:
                break
            modified |= readers
            replaced |= {n for n in readers if resources[n]["Type"] in REPLACED_ON_UPDATE}
        diff["Modify"] = [n for n in resources if n in modified]
        return diff

    return [_patched(parsing.ResourceMap, "build_resource_diff", build_resource_diff)]


def s3_patches() -> list[contextlib.AbstractContextManager]:
    """S3: a bucket's public access block, versioning and ``BucketKeyEnabled`` applied."""
    from moto.s3 import models as s3_models

    original_create_bucket = s3_models.FakeBucket.create_from_cloudformation_json.__func__

    def create_bucket(
        cls: Any,
        resource_name: str,
        cloudformation_json: dict[str, Any],
        account_id: str,
        region_name: str,
        **kwargs: Any,
    ) -> Any:
        # moto applies only BucketEncryption and Tags of an AWS::S3::Bucket; the public access block
        # and versioning are applied here like CloudFormation would (other properties: see
        # lifecycle_resources).
        bucket = original_create_bucket(
            cls, resource_name, cloudformation_json, account_id, region_name, **kwargs
        )
        properties = cloudformation_json.get("Properties", {})
        backend = s3_models.s3_backends[account_id]["aws"]
        if "PublicAccessBlockConfiguration" in properties:
            backend.put_public_access_block(
                bucket.name, properties["PublicAccessBlockConfiguration"]
            )
        if "VersioningConfiguration" in properties:
            backend.put_bucket_versioning(
                bucket.name, properties["VersioningConfiguration"]["Status"]
            )
        # moto's conversion of BucketEncryption keeps the algorithm and key but drops
        # BucketKeyEnabled.
        rules = properties.get("BucketEncryption", {}).get("ServerSideEncryptionConfiguration", [])
        if rules and "BucketKeyEnabled" in rules[0] and bucket.encryption:
            bucket.encryption["Rule"]["BucketKeyEnabled"] = (
                "true" if rules[0]["BucketKeyEnabled"] else "false"
            )
        return bucket

    return [
        _patched(
            s3_models.FakeBucket, "create_from_cloudformation_json", classmethod(create_bucket)
        )
    ]


def ecr_patches() -> list[contextlib.AbstractContextManager]:
    """ECR: a repository's scanning and encryption in the API's spelling, and its lifecycle policy
    put."""
    from moto.ecr import models as ecr_models

    original_create_repository = ecr_models.Repository.create_from_cloudformation_json.__func__

    def create_repository(
        cls: Any,
        resource_name: str,
        cloudformation_json: dict[str, Any],
        account_id: str,
        region_name: str,
        **kwargs: Any,
    ) -> Any:
        # moto hands the CloudFormation spelling ({"ScanOnPush": true}) to its API model, which
        # reads the API's ({"scanOnPush": true}), and ignores LifecyclePolicy.
        properties = dict(cloudformation_json["Properties"])
        for key in ("ImageScanningConfiguration", "EncryptionConfiguration"):
            if key in properties:
                properties[key] = camel(properties[key])
        repository = original_create_repository(
            cls,
            resource_name,
            {**cloudformation_json, "Properties": properties},
            account_id,
            region_name,
            **kwargs,
        )
        policy = properties.get("LifecyclePolicy", {}).get("LifecyclePolicyText")
        if policy:
            ecr_models.ecr_backends[account_id][region_name].put_lifecycle_policy(
                None, resource_name, policy
            )
        return repository

    return [
        _patched(
            ecr_models.Repository, "create_from_cloudformation_json", classmethod(create_repository)
        )
    ]


def ssm_parameter_patches() -> list[contextlib.AbstractContextManager]:
    """SSM-typed parameters: ``UsePreviousValue`` keeps a value that names no SSM parameter."""
    from moto.cloudformation import parsing

    original_parse_ssm_parameter = parsing.ResourceMap.parse_ssm_parameter

    def parse_ssm_parameter(self: Any, value: str, value_type: str) -> Any:
        # For UsePreviousValue (the CLI sends it for BootstrapVersion on every update) moto
        # substitutes the previous *resolved* value ("33"), then looks it up as a parameter name and
        # fails; CloudFormation keeps the name. A value that names no SSM parameter is therefore
        # taken as that resolved value.
        from moto.ssm.models import ssm_backends

        if ssm_backends[self._account_id][self._region_name].get_parameter(value) is None:
            return value
        return original_parse_ssm_parameter(self, value, value_type)

    return [_patched(parsing.ResourceMap, "parse_ssm_parameter", parse_ssm_parameter)]


def stand_in_type_patches() -> list[contextlib.AbstractContextManager]:
    """The types moto's CloudFormation lacks, from :data:`CLOUDFORMATION_STAND_INS`."""
    from moto.cloudformation import parsing

    original_class_from_type = parsing.resource_class_from_type
    original_name_property = parsing.resource_name_property_from_type

    def resource_class_from_type(resource_type: str) -> Any:
        return CLOUDFORMATION_STAND_INS.get(resource_type) or original_class_from_type(
            resource_type
        )

    def resource_name_property_from_type(resource_type: str) -> str | None:
        stand_in = CLOUDFORMATION_STAND_INS.get(resource_type)
        return (
            stand_in.cloudformation_name_type()
            if stand_in
            else original_name_property(resource_type)
        )

    return [
        _patched(parsing, "resource_class_from_type", resource_class_from_type),
        _patched(parsing, "resource_name_property_from_type", resource_name_property_from_type),
    ]


def sagemaker_patches() -> list[contextlib.AbstractContextManager]:
    """SageMaker: every instance type of the catalogue accepted; an endpoint named by its
    ``EndpointName``."""
    from moto.sagemaker import models as sagemaker_models

    from constructs_lib.facts.instance_types import CATALOGUE

    original_validate = sagemaker_models.FakeEndpointConfig.validate_instance_type

    def validate_instance_type(self: Any, instance_type: str) -> None:
        if instance_type not in CATALOGUE:
            original_validate(self, instance_type)

    return [
        _patched(
            sagemaker_models.FakeEndpointConfig, "validate_instance_type", validate_instance_type
        ),
        _patched(
            sagemaker_models.FakeEndpoint,
            "cloudformation_name_type",
            staticmethod(lambda: "EndpointName"),
        ),
    ]


def generated_name_patches() -> list[contextlib.AbstractContextManager]:
    """Generated names: shortened to the service's limit (:data:`GENERATED_NAME_LIMITS`), an ECR
    repository's lower-cased."""
    from moto.cloudformation import parsing

    original_generate = parsing.generate_resource_name

    def generate_resource_name(resource_type: str, stack_name: str, logical_id: str) -> str:
        name = original_generate(resource_type, stack_name, logical_id)
        limit = GENERATED_NAME_LIMITS.get(resource_type)
        if limit and len(name) > limit:
            # Like CloudFormation: shorten the stack-and-logical-id part, keep the random suffix.
            head, _, suffix = name.rpartition("-")
            name = f"{head[: limit - len(suffix) - 1]}-{suffix}"
        return name.lower() if resource_type == "AWS::ECR::Repository" else name

    return [_patched(parsing, "generate_resource_name", generate_resource_name)]


def change_set_patches(server: MotoServer) -> list[contextlib.AbstractContextManager]:
    """Change sets: the account's exports, outputs and exports re-read after each execution, a
    stack's change sets removed once one is executed, a missing one deleted as a no-op and described
    as ChangeSetNotFoundException; exceptions recorded in :attr:`MotoServer.errors`."""
    from moto.cloudformation import models as cfn_models
    from moto.cloudformation.exceptions import CloudFormationError

    backend_class = cfn_models.CloudFormationBackend
    original_create_change_set = backend_class.create_change_set
    original_execute_change_set = backend_class.execute_change_set

    def recorded(function: Callable[..., Any]) -> Callable[..., Any]:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            try:
                return function(*args, **kwargs)
            except Exception:
                server.errors.append(traceback.format_exc())
                raise

        return wrapper

    def create_change_set(self: Any, stack_name: str, *args: Any, **kwargs: Any) -> Any:
        # A CREATE change set makes its stack here, without the account's exports (CreateStack
        # passes them).
        for stack in self.stacks.values():
            if stack.name == stack_name:
                stack.cross_stack_resources = self.exports
                stack.resource_map.cross_stack_resources = self.exports
        result = original_create_change_set(self, stack_name, *args, **kwargs)
        for stack in self.stacks.values():
            if stack.name == stack_name:
                stack.cross_stack_resources = self.exports
                stack.resource_map.cross_stack_resources = self.exports
        return result

    def execute_change_set(self: Any, change_set_name: str, stack_name: str | None = None) -> None:
        original_execute_change_set(self, change_set_name, stack_name)
        change_set = self.change_sets.get(change_set_name) or next(
            cs for cs in self.change_sets.values() if cs.change_set_name == change_set_name
        )
        stack = self.stacks[change_set.stack_id]
        stack.template_dict = change_set.template_dict
        stack.output_map = stack._create_output_map()
        for name in [n for n, e in self.exports.items() if e.exporting_stack_id == stack.stack_id]:
            del self.exports[name]
        for export in stack.exports:
            self.exports[export.name] = export
        # CloudFormation removes a stack's change sets once one of them is executed; moto keeps
        # them, and looks change sets up by name across all stacks, so the next stack's
        # "cdk-deploy-change-set" would be mixed up.
        for change_set_id in [
            i for i, cs in self.change_sets.items() if cs.stack_id == stack.stack_id
        ]:
            del self.change_sets[change_set_id]

    original_delete_change_set = backend_class.delete_change_set

    def delete_change_set(self: Any, change_set_name: str) -> None:
        # The CDK CLI deletes a leftover "cdk-deploy-change-set" before each update "if it exists"
        # (it handles no error); moto fails with UnboundLocalError (HTTP 500, which the CLI retries
        # for a minute) when none exists.
        if change_set_name in self.change_sets or any(
            cs.change_set_name == change_set_name for cs in self.change_sets.values()
        ):
            original_delete_change_set(self, change_set_name)

    class ChangeSetNotFound(CloudFormationError):
        # CloudFormation API model: query error ChangeSetNotFound, HTTP 404
        code = "ChangeSetNotFoundException"

    original_describe_change_set = backend_class.describe_change_set

    def describe_change_set(self: Any, change_set_name: str) -> Any:
        # After deleting a change set the CLI polls DescribeChangeSet until
        # ChangeSetNotFoundException; moto answers ValidationError "Stack with id
        # cdk-deploy-change-set does not exist", which fails the deploy.
        if change_set_name in self.change_sets or any(
            cs.change_set_name == change_set_name for cs in self.change_sets.values()
        ):
            return original_describe_change_set(self, change_set_name)
        raise ChangeSetNotFound(f"ChangeSet [{change_set_name}] does not exist")

    return [
        _patched(backend_class, "create_change_set", recorded(create_change_set)),
        _patched(backend_class, "execute_change_set", recorded(execute_change_set)),
        _patched(backend_class, "delete_change_set", delete_change_set),
        _patched(backend_class, "describe_change_set", describe_change_set),
    ]


def deleted_stack_patches() -> list[contextlib.AbstractContextManager]:
    """Deleted stacks: their outputs emptied."""
    from moto.cloudformation import models as cfn_models, parsing

    backend_class = cfn_models.CloudFormationBackend

    original_delete_stack = backend_class.delete_stack

    def delete_stack(self: Any, name_or_stack_id: str) -> None:
        # DescribeStacks of a deleted stack (the CLI polls by stack id) evaluates its outputs, and
        # moto's lazy resource map re-creates every deleted resource an output refers to. A deleted
        # stack has no outputs.
        original_delete_stack(self, name_or_stack_id)
        for stack in self.deleted_stacks.values():
            stack.output_map = parsing.OutputMap(stack.resource_map, {}, stack.stack_id)

    return [_patched(backend_class, "delete_stack", delete_stack)]


def custom_resource_patches(server: MotoServer) -> list[contextlib.AbstractContextManager]:
    """Custom resources: completed with a stand-in's data (:data:`CUSTOM_RESOURCE_STAND_INS`), none
    invoked; each recorded in :attr:`MotoServer.custom_resources`."""
    from moto.cloudformation import custom_model

    def create_custom_resource(
        cls: Any,
        resource_name: str,
        cloudformation_json: dict[str, Any],
        account_id: str,
        region_name: str,
        **kwargs: Any,
    ) -> Any:
        resource_type = kwargs["ResourceType"]
        properties = cloudformation_json["Properties"]
        resource = custom_model.CustomModel(
            region_name, "lifecycle-test", kwargs["LogicalId"], resource_name
        )
        stand_in = CUSTOM_RESOURCE_STAND_INS.get(resource_type)
        resource.set_data(stand_in(properties) if stand_in else {})
        server.custom_resources.append((resource_type, kwargs["LogicalId"]))
        return resource

    return [
        _patched(
            custom_model.CustomModel,
            "create_from_cloudformation_json",
            classmethod(create_custom_resource),
        )
    ]


def moto_patches(server: MotoServer) -> list[contextlib.AbstractContextManager]:
    """The patches listed in lifecycle_moto.py's docstring, as context managers."""
    return [
        *ec2_network_patches(),
        *ecs_patches(),
        *elbv2_patches(),
        *kms_patches(),
        *iam_patches(),
        *update_patches(),
        *s3_patches(),
        *ecr_patches(),
        *ssm_parameter_patches(),
        *stand_in_type_patches(),
        *sagemaker_patches(),
        *generated_name_patches(),
        *change_set_patches(server),
        *deleted_stack_patches(),
        *custom_resource_patches(server),
    ]
