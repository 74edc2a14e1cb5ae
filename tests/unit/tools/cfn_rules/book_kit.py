"""Template dicts for the rule book's tests (tests/unit/tools/cfn_rules/test_aws_*.py) and
tests/app/test_aws_rules.py, and the findings of one rule over one."""

from __future__ import annotations

KEY = "arn:aws:kms:us-east-1:123456789012:key/0f0e0d0c-0b0a-0908-0706-050403020100"


def template(**resources: tuple[str, dict] | dict) -> dict:
    """``template(Lid=("AWS::X::Y", {props}))``: a template dict; a dict value is a whole
    resource."""
    return {
        "Resources": {
            lid: r if isinstance(r, dict) else {"Type": r[0], "Properties": r[1]}
            for lid, r in resources.items()
        }
    }


def findings(rule: type, tpl: dict) -> list[str]:
    return [message for _, message in rule().findings(tpl)]


def config(instance_type="ml.g6.4xlarge", key=KEY, **variant) -> tuple[str, dict]:
    props = {
        "ProductionVariants": [
            {
                "VariantName": "AllTraffic",
                "ModelName": "m",
                "InitialInstanceCount": 1,
                "InstanceType": instance_type,
                **variant,
            }
        ]
    }
    if key:
        props["KmsKeyId"] = key
    return "AWS::SageMaker::EndpointConfig", props
