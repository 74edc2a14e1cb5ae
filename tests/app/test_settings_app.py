"""app.py with settings it refuses, run as the CDK CLI runs it: one clear message per problem before
anything is built. load_settings' own refusals and derived values:
tests/unit/config/test_settings.py; what a setting does to a template: its stack's file."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from tests.conftest import ROOT, cdk_json_context

# --- app.py --------------------------------------------------------------------------------------
# app.py with settings it refuses: ``cdk synth`` (the app run as the CDK CLI runs it, a subprocess
# of the whole app) exits with the settings' messages before building anything, and no traceback.


def run_app(context_json: str, outdir) -> subprocess.CompletedProcess:
    """Run app.py as the CDK CLI does, with the context in CDK_CONTEXT_JSON."""
    env = {**os.environ, "CDK_CONTEXT_JSON": context_json, "CDK_OUTDIR": str(outdir)}
    return subprocess.run(
        [sys.executable, "app.py"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )


def test_app_exits_with_one_clear_message_and_no_traceback(tmp_path):
    result = run_app(
        json.dumps({**cdk_json_context(), "voxtral.instance_type": "ml.g6.huge"}), tmp_path
    )
    assert result.returncode == 1
    assert "Traceback" not in result.stderr and "jsii" not in result.stderr
    assert (
        "voxtral.instance_type='ml.g6.huge': not a SageMaker real-time instance type"
        in result.stderr
    )


def test_app_exits_with_the_message_before_building_anything(tmp_path):
    """cdk synth (app.py) fails with the settings' message for an instance type without an NVIDIA
    GPU."""
    context = {"voxtral.target": "ecs", "ecs.instance_type": "m5.large", "ecs.min_tasks": 5}
    result = run_app(json.dumps(context), tmp_path)
    assert result.returncode == 1
    assert "ecs.instance_type='m5.large': has no NVIDIA GPU" in result.stderr
    assert "ecs.max_tasks=4: must be at least ecs.min_tasks=5" in result.stderr
    assert "Traceback" not in result.stderr


def test_app_run_by_a_python_without_the_project_says_how_to_run_it(tmp_path):
    """``npx cdk`` runs cdk.json's ``python3 app.py``: a python3 without the project's environment
    (here: site-packages off) gets one line saying what to do, not an ImportError traceback."""
    result = subprocess.run(
        [sys.executable, "-S", "app.py"], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 1
    assert result.stderr == (
        f"app.py: {sys.executable} cannot import aws_cdk: run `make synth` (or `make deploy`), or "
        "activate the project's environment first (`. .venv/bin/activate`, made by `make deps`) "
        "and run `npx cdk` again\n"
    )


def test_a_bridge_setting_the_container_would_refuse_stops_synth_with_its_key(tmp_path):
    """The bridge's contract is checked with the settings: its rule under the key, no traceback."""
    result = run_app(json.dumps({**cdk_json_context(), "voxtral.max_model_len": 10}), tmp_path)
    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    assert "  - voxtral.max_model_len=10: must be at least 50: " in result.stderr


def test_app_exits_with_the_network_message_before_building_anything(tmp_path):
    result = run_app(json.dumps({"network.max_azs": 3}), tmp_path)
    assert result.returncode == 1
    assert "network.max_azs=3: set only with network.mode=vpc" in result.stderr
