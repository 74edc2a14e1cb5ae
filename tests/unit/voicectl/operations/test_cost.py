"""`voicectl cost` against recorded-format GetProducts responses (the price lookup itself:
test_pricing.py).

moto 5 has no Price List (``pricing``) backend, so botocore's Stubber answers: it checks every
request against the service model and the exact parameters we expect, and returns the response files
in tests/unit/voicectl/operations/data/pricing/ (pricing_testkit.py).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pytest
from botocore.stub import Stubber

from tests.conftest import ROOT
from tests.unit.voicectl.operations.pricing_testkit import (  # noqa: F401 (fixtures)
    NO_CREDENTIALS,
    fixture_fake_credentials,
    params,
    response,
)
from voicectl.cli import UsageError, main
from voicectl.operations import cost, pricing


def _cdk_json_on_the_recorded_type() -> Path:
    """cdk.json with Voxtral on ml.g6.4xlarge, the type the recorded-format responses in
    tests/unit/voicectl/operations/data/pricing/ are for (the default is now ml.g6.xlarge; the
    report's logic does not depend on which type it is)."""
    data = json.loads((ROOT / "cdk.json").read_text())
    data["context"]["voxtral.instance_type"] = "ml.g6.4xlarge"
    path = Path(tempfile.mkdtemp(prefix="cost-cdk-json-")) / "cdk.json"
    path.write_text(json.dumps(data))
    return path


CDK_JSON = _cdk_json_on_the_recorded_type()


# --- The report ---------------------------------------------------------------------------------

PRICES = {
    "ml.g6.4xlarge": pricing.HostingPrice(
        "ml.g6.4xlarge",
        "us-east-1",
        2.264,
        "7QXH2ZK9M4TRB6VE",
        "USE1-Host:ml.g6.4xlarge",
        "",
        "2026-11-01T00:00:00Z",
    ),
    "ml.g6e.2xlarge": pricing.HostingPrice(
        "ml.g6e.2xlarge",
        "us-east-1",
        2.8026,
        "3KD8WJ5NPV2YHQ7C",
        "USE1-Host:ml.g6e.2xlarge",
        "",
        "2026-11-01T00:00:00Z",
    ),
}


def test_the_figures_follow_from_the_price_and_the_settings():
    settings = cost.load_cost_settings(CDK_JSON, {})
    voxtral, sonic = cost.endpoint_costs(settings, PRICES.__getitem__)
    # cdk.json: Voxtral 1-4 instances, max_num_seqs auto (4 on one L4), scaling target 0.7; Sonic
    # 1-2 instances on ml.g6e.2xlarge.
    assert (voxtral.min_instances, voxtral.max_instances, voxtral.streams_per_instance) == (1, 4, 4)
    assert voxtral.usd_per_month(1) == pytest.approx(2.264 * 730) == pytest.approx(1652.72)
    assert voxtral.usd_per_month(4) == pytest.approx(6610.88)
    assert voxtral.usd_per_stream_hour == pytest.approx(0.566)
    assert voxtral.target_streams_per_instance == pytest.approx(2.8)
    assert voxtral.usd_per_stream_hour_at_target == pytest.approx(2.264 / 2.8)
    assert (sonic.streams_per_instance, sonic.streams_source) == (8, cost.SONIC_STREAMS_SOURCE)
    assert sonic.usd_per_month(1) == pytest.approx(2045.898)
    assert sonic.usd_per_month(2) == pytest.approx(4091.796)
    assert sonic.usd_per_stream_hour == pytest.approx(0.350325)
    assert sonic.target_streams_per_instance is None and sonic.usd_per_stream_hour_at_target is None
    assert "not in the AWS Price List API" in sonic.software_fee_note


def test_settings_overrides_change_the_figures():
    settings = cost.load_cost_settings(
        CDK_JSON,
        {"voxtral.max_num_seqs": "1", "voxtral.max_instances": "2", "sonic.enabled": "false"},
    )
    (voxtral,) = cost.endpoint_costs(settings, PRICES.__getitem__)
    assert voxtral.usd_per_stream_hour == pytest.approx(2.264)
    assert voxtral.usd_per_month(2) == pytest.approx(3305.44)


def test_sonic_streams_are_unknown_on_a_multi_gpu_type_unless_given():
    settings = cost.load_cost_settings(
        CDK_JSON, {"sonic.instance_type": "ml.g6e.12xlarge", "voxtral.enabled": "0"}
    )
    prices = {
        "ml.g6e.12xlarge": pricing.HostingPrice(
            "ml.g6e.12xlarge", "us-east-1", 10.0, "S", "U", "", ""
        )
    }
    (sonic,) = cost.endpoint_costs(settings, prices.__getitem__)
    assert sonic.streams_per_instance is None and sonic.usd_per_stream_hour is None
    assert "pass --sonic-streams-per-instance" in cost.format_text([sonic], "us-east-1")
    (sonic,) = cost.endpoint_costs(settings, prices.__getitem__, sonic_streams_per_instance=32)
    assert (sonic.usd_per_stream_hour, sonic.streams_source) == (
        0.3125,
        "--sonic-streams-per-instance",
    )


def test_a_missing_price_is_kept_on_its_endpoint_only():
    def lookup(instance_type):
        if instance_type == "ml.g6e.2xlarge":
            raise pricing.PriceNotFound("nothing for ml.g6e.2xlarge")
        return PRICES[instance_type]

    voxtral, sonic = cost.endpoint_costs(cost.load_cost_settings(CDK_JSON, {}), lookup)
    assert voxtral.price == PRICES["ml.g6.4xlarge"] and voxtral.error is None
    assert sonic.price is None and sonic.error == "nothing for ml.g6e.2xlarge"
    assert sonic.usd_per_month(1) is None and sonic.usd_per_stream_hour is None


def test_an_endpoint_on_the_ecs_target_is_named_not_priced_as_sagemaker_hosting():
    looked_up = []

    def lookup(instance_type):
        looked_up.append(instance_type)
        return PRICES[instance_type]

    settings = cost.load_cost_settings(
        CDK_JSON, {"voxtral.target": "ecs", "ecs.instance_type": "g6e.xlarge", "ecs.min_tasks": "3"}
    )
    voxtral, sonic = cost.endpoint_costs(settings, lookup)
    assert looked_up == [
        "ml.g6e.2xlarge"
    ]  # Sonic only: the ECS tasks run on EC2, which this command does not price
    assert (voxtral.price, voxtral.instance_type, voxtral.min_instances) == (None, "g6e.xlarge", 3)
    assert voxtral.error == (
        "voxtral.target=ecs: ECS tasks on EC2 g6e.xlarge (On-Demand or Spot) behind a load "
        "balancer; this command prices SageMaker hosting only (see Amazon EC2 pricing for that "
        "type)"
    )
    assert sonic.price == PRICES["ml.g6e.2xlarge"]
    text = cost.format_text([voxtral, sonic], settings.region)
    assert all(len(line) <= cost.WIDTH for line in text.splitlines())


@pytest.mark.parametrize(
    "overrides, message",
    [
        (
            {"voxtral.max_num_seqs": "0"},
            r"voxtral\.max_num_seqs=0: must be a positive whole number",
        ),
        ({"voxtral.instance_typ": "ml.g6.4xlarge"}, r"did you mean 'voxtral\.instance_type'"),
    ],
)
def test_invalid_settings_are_usage_errors(overrides, message):
    with pytest.raises(UsageError, match=message):
        cost.load_cost_settings(CDK_JSON, overrides)


def test_context_pairs_and_region_are_read_like_the_cdk_cli():
    assert cost.parse_overrides(["region=eu-west-1", "sonic.enabled=false"], None) == {
        "region": "eu-west-1",
        "sonic.enabled": "false",
    }
    assert cost.parse_overrides([], "eu-west-1") == {"region": "eu-west-1"}
    with pytest.raises(UsageError, match=r"expected KEY=VALUE"):
        cost.parse_overrides(["sonic.enabled"], None)
    with pytest.raises(UsageError, match=r"--region eu-west-1 and -c region=us-west-2 disagree"):
        cost.parse_overrides(["region=us-west-2"], "eu-west-1")


# --- The command, end to end (Stubber in place of the Price List API) ---------------------------


@pytest.fixture
def stubbed_api(fake_credentials, monkeypatch):
    """Route `voicectl cost` to a stubbed client (the real pricing_client runs first: credentials,
    endpoint)."""
    made = {}
    real_factory = pricing.pricing_client

    def factory(session, region):
        client = real_factory(session, region)
        made["client"], made["stub"] = client, Stubber(client)
        for name, request in queued:
            made["stub"].add_response("get_products", response(name), request)
        made["stub"].activate()
        return client

    queued: list[tuple[str, dict]] = []
    monkeypatch.setattr(pricing, "pricing_client", factory)
    yield queued, made
    if "stub" in made:
        made["stub"].assert_no_pending_responses()


DEFAULT_RESPONSES = [
    ("hosting_ml.g6.4xlarge_us-east-1.json", params("ml.g6.4xlarge", "us-east-1")),
    ("hosting_ml.g6e.2xlarge_us-east-1.json", params("ml.g6e.2xlarge", "us-east-1")),
]


def test_the_report_for_the_default_settings(stubbed_api, capsys):
    queued, made = stubbed_api
    queued.extend(DEFAULT_RESPONSES)
    assert main(["cost", "--cdk-json", str(CDK_JSON)]) == 0
    out, err = capsys.readouterr()
    assert err == ""
    assert made["client"].meta.region_name == "us-east-1"
    lines = out.splitlines()
    assert lines[0] == (
        "On-demand Amazon SageMaker real-time inference prices in us-east-1, USD (AWS Price List "
        "API, endpoint us-east-1):"
    )
    block = out.split("\n\n")[1].splitlines()
    assert block == [
        "voxtral-realtime (voxtral): ml.g6.4xlarge",
        "  per instance-hour     USD 2.2640  (SKU 7QXH2ZK9M4TRB6VE, USE1-Host:ml.g6.4xlarge, "
        "effective 2026-11-01)",
        "  per month (730 h)     USD 1,652.72 at voxtral.min_instances=1; USD 6,610.88 at "
        "voxtral.max_instances=4",
        "  per live stream-hour  USD 0.5660 at 4 live streams per instance "
        "(voxtral.max_num_seqs=auto, the capacity model)",
        "                        USD 0.8086 at the autoscaling target, 2.8 per instance "
        "(voxtral.scaling_target_fraction 0.7 x 4)",
    ]
    block = out.split("\n\n")[2].splitlines()
    assert block[:4] == [
        "sonic-tts (sonic): ml.g6e.2xlarge",
        "  per instance-hour     USD 2.8026  (SKU 3KD8WJ5NPV2YHQ7C, USE1-Host:ml.g6e.2xlarge, "
        "effective 2026-11-01)",
        "  per month (730 h)     USD 2,045.90 at sonic.min_instances=1; USD 4,091.80 at "
        "sonic.max_instances=2",
        "  per live stream-hour  USD 0.3503 at 8 concurrent requests per instance (Cartesia's "
        "figure for one NVIDIA L40S)",
    ]
    assert block[4].startswith("  software fee          not in the AWS Price List API")
    assert all(line.startswith(" " * 24) for line in block[5:])
    assert (
        " ".join(" ".join(line.split()) for line in block[4:])
        == "software fee " + cost.SONIC_SOFTWARE_FEE_NOTE
    )
    assert cost.SONIC_LISTING_SEARCH_URL in block[-2]  # never broken across lines
    assert " ".join(out.split("\n\n")[3].splitlines()) == cost.FOOTNOTE
    assert max(len(line) for line in lines) <= 120


def test_the_json_report(stubbed_api, capsys):
    queued, _ = stubbed_api
    queued.extend(DEFAULT_RESPONSES)
    assert (
        main(["cost", "--cdk-json", str(CDK_JSON), "--json", "--sonic-streams-per-instance", "4"])
        == 0
    )
    report = json.loads(capsys.readouterr().out)
    assert {k: v for k, v in report.items() if k != "endpoints"} == {
        "region": "us-east-1",
        "price_list_endpoint_region": "us-east-1",
        "currency": "USD",
        "hours_per_month": 730,
        "not_included": cost.FOOTNOTE,
    }
    voxtral, sonic = report["endpoints"]
    assert voxtral == {
        "section": "voxtral",
        "endpoint_name": "voxtral-realtime",
        "instance_type": "ml.g6.4xlarge",
        "usd_per_instance_hour": 2.264,
        "sku": "7QXH2ZK9M4TRB6VE",
        "usage_type": "USE1-Host:ml.g6.4xlarge",
        "price_description": "$2.264 per Hosting ml.g6.4xlarge hour in US East (N. Virginia)",
        "effective_date": "2026-11-01T00:00:00Z",
        "min_instances": 1,
        "max_instances": 4,
        "usd_per_month_at_min_instances": 1652.72,
        "usd_per_month_at_max_instances": 6610.88,
        "streams_per_instance": 4,
        "streams_per_instance_source": "voxtral.max_num_seqs=auto, the capacity model",
        "usd_per_live_stream_hour": 0.566,
        "autoscaling_target_streams_per_instance": pytest.approx(2.8),
        "autoscaling_target_source": "voxtral.scaling_target_fraction 0.7 x 4",
        "usd_per_live_stream_hour_at_autoscaling_target": 0.808571,
        "software_fee_usd_per_instance_hour": None,
        "software_fee_note": None,
        "error": None,
    }
    assert (sonic["streams_per_instance"], sonic["streams_per_instance_source"]) == (
        4,
        "--sonic-streams-per-instance",
    )
    assert sonic["usd_per_live_stream_hour"] == 0.70065
    assert sonic["software_fee_usd_per_instance_hour"] is None
    assert sonic["software_fee_note"] == cost.SONIC_SOFTWARE_FEE_NOTE


def test_another_region_is_priced_through_its_nearest_endpoint(stubbed_api, capsys):
    queued, made = stubbed_api
    queued.append(("hosting_ml.g6.4xlarge_eu-west-1.json", params("ml.g6.4xlarge", "eu-west-1")))
    assert (
        main(
            [
                "cost",
                "--cdk-json",
                str(CDK_JSON),
                "--region",
                "eu-west-1",
                "-c",
                "sonic.enabled=false",
                "--json",
            ]
        )
        == 0
    )
    report = json.loads(capsys.readouterr().out)
    assert made["client"].meta.region_name == "eu-central-1"
    assert (report["region"], report["price_list_endpoint_region"]) == ("eu-west-1", "eu-central-1")
    assert [e["usd_per_instance_hour"] for e in report["endpoints"]] == [2.524]


def test_aws_region_naming_another_region_is_pointed_out(stubbed_api, capsys, monkeypatch):
    queued, _ = stubbed_api
    queued.extend(DEFAULT_RESPONSES)
    monkeypatch.setenv("AWS_REGION", "eu-west-1")
    assert main(["cost", "--cdk-json", str(CDK_JSON)]) == 0
    out, err = capsys.readouterr()
    assert err == (
        "voicectl cost: note: AWS_REGION=eu-west-1, but the 'region' setting is us-east-1 and "
        "make deploy deploys there, so these are us-east-1 prices; pass --region eu-west-1 (or "
        "-c region=eu-west-1) to price eu-west-1\n"
    )
    assert "prices in us-east-1" in out


def test_one_missing_price_prints_the_rest_and_exits_1(stubbed_api, capsys):
    queued, _ = stubbed_api
    queued.extend([DEFAULT_RESPONSES[0], ("empty.json", params("ml.g6e.2xlarge", "us-east-1"))])
    assert main(["cost", "--cdk-json", str(CDK_JSON)]) == 1
    out, err = capsys.readouterr()
    assert "USD 2.2640" in out
    assert (
        "sonic-tts (sonic): ml.g6e.2xlarge\n  no price: the AWS Price List has no on-demand" in out
    )
    assert err.startswith(
        "voicectl cost: sonic (ml.g6e.2xlarge): the AWS Price List has no on-demand SageMaker "
        "real-time inference price for ml.g6e.2xlarge in us-east-1"
    )
    assert len(err.splitlines()) == 1


def test_one_instance_type_is_looked_up_once(stubbed_api, capsys):
    queued, _ = stubbed_api
    queued.append(
        DEFAULT_RESPONSES[1]
    )  # only one response queued: a second call would fail the Stubber
    assert (
        main(
            [
                "cost",
                "--cdk-json",
                str(CDK_JSON),
                "-c",
                "voxtral.instance_type=ml.g6e.2xlarge",
                "-c",
                "voxtral.alarm_gpu_memory_percent=95",
                "--json",
            ]
        )
        == 0
    )
    report = json.loads(capsys.readouterr().out)
    assert [e["usd_per_instance_hour"] for e in report["endpoints"]] == [2.8026, 2.8026]


def test_access_denied_is_one_line_and_exit_1(fake_credentials, monkeypatch, capsys):
    real_factory = pricing.pricing_client

    def factory(session, region):
        client = real_factory(session, region)
        stub = Stubber(client)
        stub.add_client_error("get_products", "AccessDeniedException", "not authorized")
        stub.activate()
        return client

    monkeypatch.setattr(pricing, "pricing_client", factory)
    assert main(["cost", "--cdk-json", str(CDK_JSON)]) == 1
    out, err = capsys.readouterr()
    assert out == ""
    assert err == (
        "voicectl cost: the Price List API denied pricing:GetProducts (AccessDeniedException: not "
        "authorized); the caller needs an IAM policy allowing pricing:GetProducts on resource '*'\n"
    )


def run_cli(*args: str, env_extra: dict | None = None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env.update(NO_CREDENTIALS | (env_extra or {}))
    return subprocess.run(
        [sys.executable, "-m", "voicectl", "cost", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


@dataclass
class Ran:
    returncode: int
    stdout: str
    stderr: str


@pytest.fixture
def cost_cli(monkeypatch, capsys):
    """``voicectl cost ARGS`` in this process, as run_cli runs it (from the project root, no AWS_*
    variable, no credentials or config file): its exit code (argparse's own exit included) and what
    it printed. The one test that runs the installed module in a process of its own is
    test_without_credentials_the_command_stops_in_one_line."""
    for key in list(os.environ):
        if key.startswith("AWS_"):
            monkeypatch.delenv(key)
    for key, value in NO_CREDENTIALS.items():
        monkeypatch.setenv(key, value)
    monkeypatch.chdir(ROOT)

    def run(*args: str) -> Ran:
        capsys.readouterr()
        try:
            code = main(["cost", *args])
        except SystemExit as exit_:
            code = exit_.code if isinstance(exit_.code, int) else 1
        out, err = capsys.readouterr()
        return Ran(code, out, err)

    return run


def test_without_credentials_the_command_stops_in_one_line():
    result = run_cli()
    assert result.returncode == 1
    assert result.stdout == ""
    assert result.stderr.startswith(
        "voicectl cost: no AWS credentials found: the Price List API needs signed"
    )
    assert len(result.stderr.splitlines()) == 1


@pytest.mark.parametrize(
    "args, message",
    [
        (
            ["-c", "voxtral.max_num_seqs=0"],
            "voxtral.max_num_seqs=0: must be a positive whole number",
        ),
        (["-c", "sonic.enabled"], "expected KEY=VALUE"),
        (["--region", "cn-north-1", "-c", "sonic.enabled=false"], "China Region prices are in CNY"),
        (["--profile", "no-such-profile"], "no-such-profile"),
        (["--cdk-json", "/nonexistent/cdk.json"], "--cdk-json /nonexistent/cdk.json: cannot read"),
    ],
    ids=["bad setting", "bad pair", "china", "unknown profile", "missing cdk.json"],
)
def test_bad_input_is_exit_2_before_credentials_are_looked_for(cost_cli, args, message):
    result = cost_cli(*args)  # no credentials either: the input is checked first
    assert result.returncode == 2, result.stderr
    assert message in result.stderr
    assert "no AWS credentials" not in result.stderr and "Traceback" not in result.stderr


def test_help_describes_the_command(cost_cli):
    result = cost_cli("--help")
    assert result.returncode == 0
    assert "AWS Price List API" in result.stdout and "pricing:GetProducts" in result.stdout
    assert "--sonic-streams-per-instance" in result.stdout


def test_a_non_positive_stream_count_is_refused(cost_cli):
    result = cost_cli("--sonic-streams-per-instance", "0")
    assert result.returncode == 2
    assert "must be a whole number of at least 1, got '0'" in result.stderr
