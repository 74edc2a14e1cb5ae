"""Rules the service developer guides state in prose (a "must", "can't", "only" or "fails if") that neither the
API references' checks of :mod:`aws_rules` nor the grants of :mod:`required_grants` cover, each checked over a
synthesized template dict. Where AWS does not document a fact, the rule's text says "unconfirmed".
"""

from __future__ import annotations

import sys
from pathlib import Path

from cfnlint.rules import CloudFormationLintRule

if str(Path(__file__).resolve().parent) not in sys.path:
    sys.path.insert(0, str(Path(__file__).resolve().parent))

import _template as t  # noqa: E402
from _template import TemplateRule  # noqa: E402

#: RollingUpdatePolicy MaximumBatchSize: "Value must be between 5% to 50% of the variant's total instance count."
BATCH_PERCENT_RANGE = (5, 50)


class RollingUpdateBatchSize(TemplateRule, CloudFormationLintRule):
    id = "E9111"
    shortdesc = ("RollingUpdatePolicy MaximumBatchSize: CAPACITY_PERCENT between 5 and 50, and a whole instance at "
                 "least of the variant's initial count (how SageMaker rounds a percent below one instance is "
                 "unconfirmed: state INSTANCE_COUNT 1 instead); INSTANCE_COUNT at least 1")
    description = ("RollingUpdatePolicy MaximumBatchSize: 'Value must be between 5% to 50% of the variant's total "
                   "instance count.' CapacitySize Value: minimum 1. The rounding of a percent below one instance "
                   "is not documented (SageMaker developer guide, 'Use rolling deployments': unconfirmed).")
    source_url = "https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_RollingUpdatePolicy.html"
    tags = ["sagemaker"]

    def findings(self, template):
        configs = t.resources(template, "AWS::SageMaker::EndpointConfig")
        for lid, props in t.resources(template, "AWS::SageMaker::Endpoint").items():
            policy = (props.get("DeploymentConfig") or {}).get("RollingUpdatePolicy") or {}
            size = policy.get("MaximumBatchSize") or {}
            kind, value = size.get("Type"), t.literal_int(size.get("Value"))
            if value is None:
                continue
            where = ("Resources", lid, "Properties", "DeploymentConfig", "RollingUpdatePolicy", "MaximumBatchSize")
            if value < 1:
                yield where, f"a batch of {value} is below the minimum 1"
            if kind != "CAPACITY_PERCENT":
                continue
            low, high = BATCH_PERCENT_RANGE
            if not low <= value <= high:
                yield where, f"{value} % is outside {low}-{high} %"
            config = configs.get(t.ref_target(template, props.get("EndpointConfigName")) or "", {})
            counts = [t.literal_int(v.get("InitialInstanceCount")) for v in t.as_list(config.get("ProductionVariants"))]
            for count in (c for c in counts if c is not None):
                if count * value < 100:
                    yield where, (f"{value} % of {count} instance(s) is less than one instance (rounding "
                                  "unconfirmed): use INSTANCE_COUNT 1")


#: Every rule of this module, in id order.
RULES: tuple[type[TemplateRule], ...] = tuple(sorted(
    (c for c in list(globals().values()) if isinstance(c, type) and issubclass(c, TemplateRule)
     and c is not TemplateRule), key=lambda c: c.id))
