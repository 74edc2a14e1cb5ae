"""Required grants: for each resource the app creates, what AWS says its role or key policy must
hold. IAM and KMS accept a policy that leaves out what a service later needs; the template
synthesizes, lints clean and fails only when the service acts (a Model in a VPC cannot create its
network interfaces, an encrypted bus cannot encrypt). These rules read what is granted, across the
app's stacks (keys live in the Foundation stack, their users elsewhere), and name what is missing.

Each rule is a cfn-lint custom rule like those of :mod:`aws_rules` (ids E90xx) and an app-level
check the gate (``_gate.template_findings``) runs over every synthesized variant. A key or role
given by ARN (the user's own) is not in any template: ``voicectl preflight`` reads a user's key
instead. Where AWS does not document a fact, the rule's text says "unconfirmed".

The rules, one module per family of services, on the helpers of :mod:`_grants`:

- :mod:`grants_sagemaker` (E9001-E9004): a Model's execution role, an endpoint's volume key;
- :mod:`grants_ecs` (E9005, E9013): a task's execution role, a Fargate task's way out;
- :mod:`grants_serverless` (E9006-E9010): Lambda in a VPC, EventBridge, SQS, DynamoDB;
- :mod:`grants_connect` (E9011, E9012): Connect's media streams and Lambda functions.

This module gathers them (:data:`RULES`, which the gate runs); cfn-lint loads each family's file of
the folder itself, and no rule class is imported here, so that it loads each rule once.
"""

from __future__ import annotations

import sys
from pathlib import Path

# cfn-lint imports this file by its path (``--append-rules``), not as a package: make the family
# modules importable.
if str(Path(__file__).resolve().parent) not in sys.path:
    sys.path.insert(0, str(Path(__file__).resolve().parent))

import grants_connect
import grants_ecs
import grants_sagemaker
import grants_serverless
from _template import TemplateRule

#: The required grants' modules, one per family of services, in id order of their first rule.
FAMILIES = (grants_sagemaker, grants_ecs, grants_serverless, grants_connect)

#: Every required grant, in id order.
RULES: tuple[type[TemplateRule], ...] = tuple(
    sorted((rule for family in FAMILIES for rule in family.RULES), key=lambda rule: rule.id)
)
