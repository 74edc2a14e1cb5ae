"""config/settings.py: parsed once from context, typed, frozen; every bad value gives one clear
message, and all of them at once. The sections' own rules: test_<section>.py beside this file."""

from __future__ import annotations

import dataclasses
import subprocess
import sys

import pytest

from config.settings import default_context, load_settings
from tests.conftest import ROOT, cdk_json_context
from tests.unit.config.conftest import one_problem, problems_for


def test_cdk_json_lists_every_setting_with_its_code_default():
    ours = {k: v for k, v in cdk_json_context().items() if not k.startswith("@")}
    assert ours == default_context()


def test_defaults_parse_into_frozen_typed_settings():
    settings = load_settings(cdk_json_context())
    assert settings.region == "us-east-1"
    assert settings.voxtral.instance_type == "ml.g6.xlarge"
    assert settings.voxtral.max_model_len == 45000
    assert settings.sonic.instance_type == "ml.g6e.2xlarge"
    assert settings.sonic_model_package_arn.endswith(
        "sonic36-sagemaker-v0-c6e9cacffcdf31178d1bd7c98c587480"
    )
    with pytest.raises(dataclasses.FrozenInstanceError):
        settings.voxtral.stream_cap = 3  # type: ignore[misc]


def test_command_line_strings_are_converted():
    settings = load_settings(
        {
            **cdk_json_context(),
            "voxtral.initial_instance_count": "3",
            "voxtral.enabled": "true",
            "sonic.enabled": "false",
            "retain_data": "yes",
            "voxtral.gpu_memory_utilization": "0.85",
            "voxtral.model_s3_uri": "s3://my-bucket/weights/voxtral",
            "voxtral.image_uri": "null",
        }
    )
    assert settings.voxtral.initial_instance_count == 3
    assert settings.sonic.enabled is False
    assert settings.retain_data is True
    assert settings.voxtral.gpu_memory_utilization == 0.85
    assert settings.voxtral.model_s3_uri == "s3://my-bucket/weights/voxtral"
    assert settings.voxtral.image_uri is None


def test_unknown_key_suggests_the_nearest_known_one():
    assert one_problem(**{"voxtral.instance_typ": "ml.g6.4xlarge"}) == (
        "unknown setting 'voxtral.instance_typ'; did you mean 'voxtral.instance_type'?"
    )


def test_cdk_feature_flags_and_lookup_keys_are_left_alone():
    settings = load_settings(
        {
            **cdk_json_context(),
            "@aws-cdk/aws-lambda:recognizeLayerVersion": True,
            "availability-zones:account=123456789012:region=us-east-1": ["us-east-1a"],
            "aws:cdk:enable-path-metadata": True,
        }
    )
    assert settings.region == "us-east-1"


def test_null_for_a_required_setting_is_refused():
    assert one_problem(**{"voxtral.endpoint_name": "null"}).startswith(
        "voxtral.endpoint_name='null': must be set"
    )
    assert one_problem(region="").startswith("region='': must be set")


def test_both_endpoints_disabled():
    assert one_problem(**{"voxtral.enabled": "false", "sonic.enabled": "false"}) == (
        "voxtral.enabled=false and sonic.enabled=false: at least one endpoint must be enabled"
    )


def test_every_problem_is_reported_at_once():
    problems = problems_for(
        **{
            "voxtral.instance_type": "nope",
            "sonic.instance_type": "ml.g5.xlarge",
            "voxtral.model_data_download_timeout_s": 5,
            "bogus": 1,
        }
    )
    assert len(problems) == 4
    assert problems[0].startswith("unknown setting 'bogus'")


def test_loading_the_default_settings_starts_no_cdk():
    """voicectl (capacity, cost, verify, preflight) loads the settings: with connect.enabled=false
    (the default) that must not import aws_cdk, which starts jsii's node process (seconds per
    command, and its Node banner)."""
    code = (
        "import json, sys\n"
        "from config.settings import load_settings\n"
        "load_settings(json.load(open('cdk.json'))['context'])\n"
        "print(sorted(m for m in ('aws_cdk', 'jsii', 'constructs') if m in sys.modules))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == "[]"


def test_loading_connect_settings_starts_no_cdk_either():
    """With connect.enabled=true the settings build and check ConnectTranscriptionProps, which live
    in the CDK-free constructs_lib/connect/props.py: ``voicectl capacity`` and the other operations
    commands still start no jsii."""
    code = (
        "import json, sys\n"
        "from config.settings import load_settings\n"
        "context = json.load(open('cdk.json'))['context']\n"
        "context.update({'connect.enabled': True, 'connect.instance_arn': "
        "'arn:aws:connect:us-east-1:123456789012:instance/11111111-2222-3333-4444-555555555555'})\n"
        "settings = load_settings(context)\n"
        "props = settings.connect.props(settings, image_directory='.')\n"
        "print(type(props).__module__, props.endpoint_name)\n"
        "print(sorted(m for m in ('aws_cdk', 'jsii', 'constructs') if m in sys.modules))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
    )
    assert result.stdout.strip().splitlines() == [
        "constructs_lib.connect.props voxtral-realtime",
        "[]",
    ]


def test_the_settings_modules_stay_small():
    """One module per section: none over 800 lines, no function over 150 (the house's limits)."""
    import ast

    too_long = []
    for path in sorted((ROOT / "config").glob("*.py")):
        text = path.read_text()
        if len(text.splitlines()) > 800:
            too_long.append(f"{path.name}: {len(text.splitlines())} lines")
        for node in ast.walk(ast.parse(text)):
            if (
                isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
                and node.end_lineno - node.lineno >= 150
            ):
                too_long.append(
                    f"{path.name}: {node.name} {node.end_lineno - node.lineno + 1} lines"
                )
    assert too_long == []
