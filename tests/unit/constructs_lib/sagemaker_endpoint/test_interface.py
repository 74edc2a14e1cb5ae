"""constructs_lib/sagemaker_endpoint/interface.py: IEndpoint, what alarms and scaling need of an
endpoint. A RealtimeEndpoint and an imported one provide every member it declares; the module itself
loads no aws_cdk."""

from __future__ import annotations

import subprocess
import sys
import typing

from constructs_lib.sagemaker_endpoint.endpoint import RealtimeEndpoint
from constructs_lib.sagemaker_endpoint.interface import IEndpoint
from tests.conftest import ROOT
from tests.unit.constructs_lib.construct_kit import bare_stack, endpoint_props

MEMBERS = sorted({*IEndpoint.__annotations__, "add_rollback_alarm", "register_scaling"})


def test_the_interface_declares_what_alarms_and_scaling_read():
    assert MEMBERS == [
        "add_rollback_alarm",
        "endpoint_arn",
        "endpoint_name",
        "initial_instance_count",
        "instance_type",
        "instance_types",
        "node",
        "register_scaling",
        "rolling_update",
        "scalable_instance_count",
        "variant_name",
        "when_in_service",
    ]
    assert typing.get_origin(IEndpoint) is None and getattr(IEndpoint, "_is_protocol", False)


def test_a_built_endpoint_and_an_imported_one_provide_every_member():
    stack = bare_stack()
    built = RealtimeEndpoint(stack, "Speech", endpoint_props())
    imported = RealtimeEndpoint.from_endpoint_name(stack, "Imported", "voxtral-realtime")
    for endpoint in (built, imported):
        missing = [name for name in MEMBERS if not hasattr(endpoint, name)]
        assert missing == [], f"{type(endpoint).__name__} lacks {missing}"
    assert (built.instance_type, built.instance_types, built.initial_instance_count) == (
        "ml.g6.4xlarge",
        ("ml.g6.4xlarge",),
        1,
    )
    assert (imported.instance_type, imported.instance_types, imported.when_in_service) == (
        None,
        (),
        None,
    )


def test_the_interface_loads_no_aws_cdk():
    code = (
        "import sys\nimport constructs_lib.sagemaker_endpoint.interface\n"
        "print(sorted(m for m in ('aws_cdk', 'jsii') if m in sys.modules))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == "[]"
