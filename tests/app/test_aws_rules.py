"""Every app a session synthesizes is held to AWS's rules (tools/cfn_rules, through
tests/conftest.py synthesize). The rules' own cases, on templates written to break them, are in
tests/unit/tools/cfn_rules/ (test_aws_<family>.py, test_grants_<family>.py)."""

from __future__ import annotations

import copy
import json

import pytest

from tests.unit.tools.cfn_rules.book_kit import config, template
from tools.cfn_rules import _gate


def test_synthesize_holds_every_app_to_the_rules(tmp_path, monkeypatch):
    """tests/conftest.py synthesize fails an app whose template breaks a rule, naming the rule (no
    real synth: a stand-in app writes the template)."""
    import types

    import app
    from tests import conftest

    broken = template(C=config())

    class FakeApp:
        def synth(self):
            (tmp_path / "Probe.template.json").write_text(json.dumps(broken))

    stack = types.SimpleNamespace(stack_name="RealtimeVoice-Probe", artifact_id="Probe")
    monkeypatch.setattr(
        app,
        "create_app",
        lambda context, outdir: (FakeApp(), None, types.SimpleNamespace(stacks=[stack])),
    )
    with pytest.raises(
        AssertionError, match=r"(?s)breaks AWS's rules:\nE9101 RealtimeVoice-Probe: "
    ):
        conftest.synthesize(tmp_path, {"network.mode": "vpc"})
    mended = copy.deepcopy(broken)
    del mended["Resources"]["C"]["Properties"]["KmsKeyId"]
    broken.clear()
    broken.update(mended)
    assert conftest.synthesize(tmp_path).templates == {"RealtimeVoice-Probe": mended}


@pytest.mark.parametrize("app_fixture", ["synthesized", "synthesized_vpc"])
def test_every_rule_holds_on_the_session_apps(app_fixture, request):
    """The session's apps (cdk.json's settings; network.mode=vpc). synthesize already held them to
    the rules; this says so in the report, by variant."""
    app = request.getfixturevalue(app_fixture)
    assert _gate.template_findings(app.templates) == []


#: network.mode=vpc variants: SageMaker targets with and without Connect, ECS targets (Sonic on
#: SageMaker or ECS).
VPC_VARIANTS = (
    "vpc",
    "vpc_existing",
    "connect_vpc",
    "connect_own_vpc",
    "ecs_vpc",
    "ecs_vpc_existing",
    "both_ecs_vpc",
)


@pytest.mark.parametrize("name", VPC_VARIANTS)
def test_every_sagemaker_model_in_a_vpc_may_manage_its_network_interfaces(name, app_variant):
    """SageMaker creates and deletes a private endpoint's network interfaces as the Model's
    execution role: each Model of a private deployment has VpcConfig and its role allows every
    action the developer guide lists."""
    import _grants  # on sys.path through _gate
    import grants_sagemaker

    from tools.cfn_rules import _template as t

    app = app_variant(name)
    checked = []
    for stack, stack_template in app.templates.items():
        for lid, props in t.resources(stack_template, "AWS::SageMaker::Model").items():
            role = t.ref_target(stack_template, props["ExecutionRoleArn"])
            granted = _grants.role_statements(stack_template, role)
            assert props["VpcConfig"]["Subnets"], (stack, lid)
            assert [
                a for a in grants_sagemaker.SAGEMAKER_VPC_ACTIONS if not _grants.allows(granted, a)
            ] == [], (stack, lid)
            checked.append(lid)
    # Every variant but both_ecs_vpc runs a service on SageMaker.
    assert bool(checked) == (name != "both_ecs_vpc")


@pytest.mark.parametrize("name", (*VPC_VARIANTS, "connect", "connect_ecs", "ecs_key_stream_cap"))
def test_every_required_grant_holds_on_the_variant(name, app_variant):
    """The required grants (tools/cfn_rules/required_grants.py) over the variant's stacks
    together."""
    import required_grants as rg

    assert _gate.template_findings(app_variant(name).templates, rg.RULES) == []
