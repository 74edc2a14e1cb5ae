"""The rule book: rules AWS states in prose in its API references (and failures users report) that
no schema carries, each checked over a synthesized template dict. cfn-lint's schemas and cdk-nag do
not know them; a template that breaks one synthesizes, lints clean and then fails at deploy (or at
destroy) on real AWS.

Every rule is a cfn-lint custom rule (``cfn-lint --append-rules tools/cfn_rules``; .cfnlintrc.yaml
does this for the project's own lint run) and a pure function over a template dict
(:meth:`TemplateRule.findings`), which ``tests/conftest.py`` applies to every app the test session
synthesizes. Its ``shortdesc`` is the rule as AWS states it; ``source_url`` is where. The ids are in
cfn-lint's range for custom rules (E9xxx: none of its own). Where AWS does not document a value we
rely on, the text says "unconfirmed".

The book has one module per family of AWS APIs, each holding the ids of its family:

- :mod:`aws_sagemaker` (E91xx): SageMaker endpoint configs, models and endpoints, and the
  Application Auto Scaling targets and policies of their variants;
- :mod:`aws_cloudwatch` (E92xx): CloudWatch alarms;
- :mod:`aws_ecs` (E93xx): ECS capacity providers, services and task definitions;
- :mod:`aws_network` (E94xx, E95xx): Elastic Load Balancing, EC2 security groups and VPC endpoints;
- :mod:`aws_storage` (E96xx to E98xx): KMS keys, S3 buckets and ECR repositories, secrets;
- :mod:`aws_codebuild` (E99xx): CodeBuild projects.

This module gathers them (:data:`RULES`, which the gate runs); cfn-lint loads each family's file of
the folder itself, and no rule class is imported here, so that it loads each rule once.

Why in tools/: the rules are a quality gate over templates, like cfn-lint and cdk-nag, not part of
the constructs (constructs_lib imports nothing of ours and must stay usable without them); they
read the instance catalogue (constructs_lib/facts/instance_types.py), a downward import.
"""

from __future__ import annotations

import sys
from pathlib import Path

# cfn-lint imports this file by its path (``--append-rules``), not as a package: make the family
# modules importable.
if str(Path(__file__).resolve().parent) not in sys.path:
    sys.path.insert(0, str(Path(__file__).resolve().parent))

import aws_cloudwatch
import aws_codebuild
import aws_ecs
import aws_network
import aws_sagemaker
import aws_storage
from _template import TemplateRule

#: The book's modules, one per family of AWS APIs, in id order.
FAMILIES = (aws_sagemaker, aws_cloudwatch, aws_ecs, aws_network, aws_storage, aws_codebuild)

#: Every rule of the book, in id order.
RULES: tuple[type[TemplateRule], ...] = tuple(
    sorted((rule for family in FAMILIES for rule in family.RULES), key=lambda rule: rule.id)
)
