"""voicectl/operations/verify_assembly.py: the endpoints a cloud assembly describes, and the usage
error without one (a synthesized variant's: tests/app/test_ops_verify.py)."""

from __future__ import annotations

from tests.unit.voicectl.operations.verify_testkit import REGION
from voicectl.cli import main
from voicectl.operations.verify_assembly import ExpectedEndpoint


def test_no_cloud_assembly_is_a_usage_error(tmp_path, capsys):
    assert main(["verify", "--cdk-out", str(tmp_path)]) == 2
    assert (
        "holds no synthesized app (no manifest.json); run `make synth` first"
        in capsys.readouterr().err
    )


def test_an_expected_endpoint_finds_its_models_by_reference():
    endpoint = ExpectedEndpoint("S", REGION, "e", {}, (), {"ModelA": {"PrimaryContainer": {}}})
    assert endpoint.model_of({"Fn::GetAtt": ["ModelA", "ModelName"]}) == {"PrimaryContainer": {}}
    assert endpoint.model_of("literal-name") is None
