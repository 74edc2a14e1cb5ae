"""What the files of tests/app share: the fixtures of the registry's variants under the names their
tests use (each is ``app_variant(name)``, synthesized once per session by tests/conftest.py; the
variants are named in tests/app/variants.py), and the readers of a synthesized template. A test file
imports the fixtures it uses from here, and pytest offers them to its tests under their ``name``:
each function is ``fixture_<name>``, so that a test's parameter does not shadow the imported
function (pytest's documented way; Pyflakes' F811 otherwise)."""

from __future__ import annotations

import json

import pytest
from aws_cdk.assertions import Template

from tests.conftest import Synthesized

# --- Fixtures: variants of the registry ----------------------------------------------------------


@pytest.fixture(scope="module", name="private")
def fixture_private(synthesized_vpc):
    """network.mode=vpc with everything else as in cdk.json: a new VPC and a key the app makes."""
    return synthesized_vpc


@pytest.fixture(scope="module", name="existing")
def fixture_existing(app_variant):
    """network.mode=vpc in an existing VPC, described by settings, with the caller policy bound to
    the endpoint."""
    return app_variant("vpc_existing")


@pytest.fixture(scope="module", name="public_with_key")
def fixture_public_with_key(app_variant):
    return app_variant("public_key")


@pytest.fixture(scope="module", name="private_ecs")
def fixture_private_ecs(app_variant):
    return app_variant("ecs_vpc")


@pytest.fixture(scope="module", name="existing_ecs")
def fixture_existing_ecs(app_variant):
    return app_variant("ecs_vpc_existing")


@pytest.fixture(scope="module", name="sonic_ecs")
def fixture_sonic_ecs(app_variant):
    return app_variant("sonic_ecs")


@pytest.fixture(scope="module", name="changed")
def fixture_changed(app_variant):
    """Voxtral only, on a different instance type, with a prebuilt image, external weights and
    retained data."""
    return app_variant("changed")


@pytest.fixture(scope="module", name="sonic_only")
def fixture_sonic_only(app_variant):
    return app_variant("sonic_only")


@pytest.fixture(scope="module", name="own_vpc")
def fixture_own_vpc(app_variant):
    return app_variant("connect_own_vpc")


# --- Reading a template -------------------------------------------------------------------------


def resources(template: dict, resource_type: str) -> dict[str, dict]:
    """``{logical id: resource}`` of one type."""
    return {k: v for k, v in template["Resources"].items() if v["Type"] == resource_type}


def alarms_by_name(template: dict) -> dict[str, dict]:
    """``{AlarmName: Properties}`` of every CloudWatch alarm in ``template``."""
    return {
        r["Properties"]["AlarmName"]: r["Properties"]
        for r in resources(template, "AWS::CloudWatch::Alarm").values()
    }


def only(template, resource_type: str):
    """The one resource of ``resource_type`` in ``template`` (fails when there are zero or several).
    Of an ``aws_cdk.assertions.Template`` (how the "cdk.json's settings" sections of the stack files
    read a template): the resource. Of a template's JSON (a dict, how the "Scaling and updates"
    sections read it): ``(logical id, resource)``. One helper under one name for both, as the two
    sections' tests were written before they shared a file."""
    if isinstance(template, Template):
        found = template.find_resources(resource_type)
        assert len(found) == 1, f"expected one {resource_type}, found {sorted(found)}"
        return next(iter(found.values()))
    (item,) = resources(template, resource_type).items()
    return item


def one(template: dict, resource_type: str) -> dict:
    """The properties of the one resource of ``resource_type`` in ``template``'s JSON."""
    (resource,) = resources(template, resource_type).values()
    return resource["Properties"]


def container(template: dict) -> dict:
    (definition,) = one(template, "AWS::ECS::TaskDefinition")["ContainerDefinitions"]
    return definition


def nag_violations(app: Synthesized) -> dict[str, list]:
    """``{report name: violations}`` of the validation report: cdk-nag's packs, and the construct
    annotations that @aws-cdk/core:annotationsInValidationReport adds as the report "Construct
    Annotations" (CDK's warnings)."""
    reports = json.loads((app.outdir / "validation-report.json").read_text())["pluginReports"]
    return {
        report["pluginName"]: report["violations"] for report in reports if report["violations"]
    }


def every_resource(synthesized, resource_type: str) -> dict[str, dict]:
    """``{stack/logical id: resource}`` of one type across all stacks."""
    return {
        f"{stack}/{k}": v
        for stack, template in synthesized.templates.items()
        for k, v in resources(template, resource_type).items()
    }


def key_ref(synthesized) -> dict:
    """How the other stacks refer to the data key of the Foundation stack: an import of its ARN."""
    (logical_id,) = resources(synthesized.template("Foundation"), "AWS::KMS::Key")
    return logical_id


def refers_to_key(value, logical_id: str) -> bool:
    return logical_id in json.dumps(value)


def ingress(template: dict, group_prefix: str) -> list[tuple]:
    """(port, source) of every inbound rule of the security groups whose logical id starts with
    ``group_prefix``."""
    rules = []
    for logical_id, group in resources(template, "AWS::EC2::SecurityGroup").items():
        if logical_id.startswith(group_prefix):
            rules += [
                (
                    r["FromPort"],
                    r["ToPort"],
                    r.get("CidrIp") or r["SourceSecurityGroupId"]["Fn::GetAtt"][0],
                )
                for r in group["Properties"].get("SecurityGroupIngress", [])
            ]
    for rule in resources(template, "AWS::EC2::SecurityGroupIngress").values():
        if rule["Properties"]["GroupId"]["Fn::GetAtt"][0].startswith(group_prefix):
            source = (
                rule["Properties"].get("CidrIp")
                or rule["Properties"]["SourceSecurityGroupId"]["Fn::GetAtt"][0]
            )
            rules.append((rule["Properties"]["FromPort"], rule["Properties"]["ToPort"], source))
    return sorted(rules, key=str)


def endpoint_config_instance_types(config: dict) -> list[str]:
    """Every instance type an EndpointConfig's variants may run: each InstanceType and each instance
    pool's."""
    return [
        t
        for v in config["Properties"]["ProductionVariants"]
        for t in [v.get("InstanceType"), *(p["InstanceType"] for p in v.get("InstancePools", []))]
        if t
    ]


def check_volume_keys(synthesized, key: str) -> list[str]:
    """CreateEndpointConfig, KmsKeyId: no EndpointConfig sets KmsKeyId on a local-storage instance
    type (it would fail), each of those records why for checkov, and every EBS-backed one is under
    ``key``. Returns the local-storage types seen."""
    from constructs_lib.facts.instance_types import has_local_storage

    seen = []
    for name, config in every_resource(synthesized, "AWS::SageMaker::EndpointConfig").items():
        types = endpoint_config_instance_types(config)
        assert None not in [has_local_storage(t) for t in types], (
            name,
            types,
        )  # the app knows every type it runs
        local = [t for t in types if has_local_storage(t)]
        if local:
            assert "KmsKeyId" not in config["Properties"], name
            skips = {s["id"]: s["comment"] for s in config["Metadata"]["checkov"]["skip"]}
            assert skips["CKV_AWS_98"].startswith(f"KmsKeyId is left off: {', '.join(local)}"), name
            assert "CreateEndpointConfig API reference, KmsKeyId" in skips["CKV_AWS_98"]
        else:
            assert refers_to_key(config["Properties"]["KmsKeyId"], key), name
        seen += local
    return seen


#: Interface endpoints of the ECS target, by service name suffix (constructs_lib/network/props.py).
ECS_SERVICES = {"ecs", "ecs-agent", "ecs-telemetry", "logs", "monitoring", "secretsmanager", "ec2"}


SAGEMAKER_SERVICES = {"ecr.api", "ecr.dkr", "sagemaker.runtime"}
#: The interface endpoint only the voice agent adds (its logs and ecs are the ECS table's).
AGENT_SERVICES = {"bedrock-runtime"}


def suffixes(template: dict) -> set[str]:
    """The service of each VPC endpoint, as the part after ``com.amazonaws.<region>.``."""
    names = set()
    for endpoint in resources(template, "AWS::EC2::VPCEndpoint").values():
        name = json.dumps(endpoint["Properties"]["ServiceName"])
        for candidate in ECS_SERVICES | SAGEMAKER_SERVICES | AGENT_SERVICES | {"s3"}:
            if f'.{candidate}"' in name:
                names.add(candidate)
    return names


def variant_of(template: dict) -> dict:
    (config,) = resources(template, "AWS::SageMaker::EndpointConfig").values()
    (variant,) = config["Properties"]["ProductionVariants"]
    return variant


PREFIX = "models/mistralai/Voxtral-Mini-4B-Realtime-2602/b45b4dc60caf4ad824163aaa0a72adc0ad7beeaf/"
