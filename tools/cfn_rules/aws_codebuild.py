"""The rule book's CodeBuild rules (E99xx): a project's image, environment type and timeouts
(:mod:`aws_rules` says what the book is)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import ClassVar

from cfnlint.rules import CloudFormationLintRule

# cfn-lint imports this file by its path (``--append-rules``), not as a package: make its helper
# importable.
if str(Path(__file__).resolve().parent) not in sys.path:
    sys.path.insert(0, str(Path(__file__).resolve().parent))

import _template as t
from _template import TemplateRule


class CodeBuildEnvironment(TemplateRule, CloudFormationLintRule):
    id = "E9901"
    shortdesc = (
        "CodeBuild: an aws/codebuild/standard image runs in a LINUX_CONTAINER (or "
        "LINUX_GPU_CONTAINER) environment, an amazonlinux-aarch64 image in an ARM_CONTAINER; "
        "TimeoutInMinutes is 5-2160 and QueuedTimeoutInMinutes 5-480"
    )
    description = (
        "CodeBuild user guide, 'Docker images provided by CodeBuild' (each image's environment "
        "type); CreateProject timeoutInMinutes and queuedTimeoutInMinutes."
    )
    source_url = (
        "https://docs.aws.amazon.com/codebuild/latest/userguide/build-env-ref-available.html"
    )
    tags: ClassVar[list[str]] = ["codebuild"]

    def findings(self, template):
        for lid, props in t.resources(template, "AWS::CodeBuild::Project").items():
            where = ("Resources", lid, "Properties")
            env = props.get("Environment") or {}
            image, kind = env.get("Image"), env.get("Type")
            if (
                isinstance(image, str)
                and image.startswith("aws/codebuild/standard:")
                and kind not in ("LINUX_CONTAINER", "LINUX_GPU_CONTAINER")
            ):
                yield (*where, "Environment", "Type"), f"{image} needs LINUX_CONTAINER, not {kind}"
            arm = isinstance(image, str) and image.startswith("aws/codebuild/amazonlinux-aarch64")
            if arm and kind != "ARM_CONTAINER":
                yield (*where, "Environment", "Type"), f"{image} needs ARM_CONTAINER, not {kind}"
            for key, (low, high) in {
                "TimeoutInMinutes": (5, 2160),
                "QueuedTimeoutInMinutes": (5, 480),
            }.items():
                value = t.literal_int(props.get(key))
                if value is not None and not low <= value <= high:
                    yield (*where, key), f"{key} {value} is outside {low}-{high}"


#: Every rule of this module, in id order.
RULES = t.rules_of(globals())
