"""``voicectl capacity``: streams per instance, GPU memory split and (with --prices) cost per live stream-hour.

No AWS without --prices; with it, the Price List call is replaced by a stand-in (its own parsing is tested in
test_ops_cost.py)."""

from __future__ import annotations

import json

import pytest

from tests.conftest import ROOT
from voicectl import pricing
from voicectl.cli import main

CDK_JSON = str(ROOT / "cdk.json")


def run(capsys, *args: str) -> tuple[int, str, str]:
    code = main(["capacity", "--cdk-json", CDK_JSON, *args])
    out, err = capsys.readouterr()
    return code, out, err


def test_the_defaults_need_no_aws_and_print_the_split(capsys, monkeypatch):
    monkeypatch.setattr(pricing, "pricing_client", lambda *a, **k: pytest.fail("no AWS call without --prices"))
    code, out, _ = run(capsys)
    assert code == 0
    assert "ml.g6.4xlarge: one NVIDIA L4 (22.5 GiB) serves the model" in out
    assert "streams per instance  4 (auto: compute bound; KV cache fits 8, compute budget 4)" in out
    assert "GPU memory for vLLM   20.2 GiB = weights 8.3 + KV cache 10.5 + overhead 1.5" in out
    assert "KV per live stream    1.30 GiB (83 blocks of 16 MiB; pool 669 blocks)" in out
    assert "vLLM's startup figure 1.83x maximum concurrency for 45000-token requests" in out
    assert "add --prices" in out


def test_an_explicit_setting_and_extra_types(capsys):
    code, out, _ = run(capsys, "-c", "voxtral.max_num_seqs=6", "--instance-type", "ml.g6e.xlarge", "--json")
    assert code == 0
    report = json.loads(out)
    first, second = report["instance_types"]
    assert (first["instance_type"], first["streams_per_instance"], first["streams_source"]) == (
        "ml.g6.4xlarge", 6, "voxtral.max_num_seqs")
    assert (second["instance_type"], second["kv_cache_fit"], second["compute_cap"]) == ("ml.g6e.xlarge", 23, 28)
    assert second["vllm_budget_bytes"] == second["weight_bytes"] + second["kv_cache_bytes"] + second["overhead_bytes"]
    assert second["usd_per_live_stream_hour"] is None


def test_prices_give_cost_per_live_stream_hour_and_per_audio_hour(capsys, monkeypatch):
    monkeypatch.setattr(pricing, "pricing_client", lambda session, region: object())
    asked = []

    def usd_per_hour(instance_type, region, *, client):
        asked.append((instance_type, region))
        return 0.8048

    monkeypatch.setattr(pricing, "usd_per_hour", usd_per_hour)
    code, out, _ = run(capsys, "--prices")
    assert code == 0 and asked == [("ml.g6.4xlarge", "us-east-1")]
    assert "per live stream-hour  USD 0.2012 at 4 streams per instance" in out  # 0.8048 / 4
    assert "per audio hour        USD 0.2874 at the autoscaling target (0.7 x 4 = 2.8 streams per instance)" in out


def test_a_price_that_cannot_be_read_is_said_and_exits_1(capsys, monkeypatch):
    monkeypatch.setattr(pricing, "pricing_client", lambda session, region: object())

    def usd_per_hour(instance_type, region, *, client):
        raise pricing.PriceNotFound(f"no price for {instance_type}")

    monkeypatch.setattr(pricing, "usd_per_hour", usd_per_hour)
    code, out, _ = run(capsys, "--prices")
    assert code == 1 and "no price: no price for ml.g6.4xlarge" in out


def test_prices_asked_for_but_unreadable_never_say_add_prices(capsys, monkeypatch):
    def no_client(session, region):
        raise pricing.NoCredentialsError("no AWS credentials found: the Price List API needs signed requests")

    monkeypatch.setattr(pricing, "pricing_client", no_client)
    code, out, _ = run(capsys, "--prices")
    assert code == 1 and "add --prices" not in out
    assert "  no price: no AWS credentials found: the Price List API needs signed requests" in out


def test_the_report_fits_in_120_columns(capsys):
    code, out, _ = run(capsys, "--instance-type", "ml.g6e.2xlarge")
    assert code == 0 and max(len(line) for line in out.splitlines()) <= 120


@pytest.mark.parametrize("args,message", [
    (["--instance-type", "ml.m5.xlarge"], "--instance-type ml.m5.xlarge: not a GPU instance type"),
    (["-c", "voxtral.max_num_seqs=40"], "for at most 8 live stream(s) of that length"),
])
def test_bad_input_exits_2_with_the_reason(capsys, args, message):
    code, _, err = run(capsys, *args)
    assert code == 2 and message in err


def test_instance_pools_show_every_type_at_the_one_cap_vllm_gets(capsys):
    code, out, _ = run(capsys, "-c", "voxtral.instance_type=ml.g6e.2xlarge",
                       "-c", "voxtral.instance_pools=ml.g6e.2xlarge,ml.g6.4xlarge", "--json")
    assert code == 0
    rows = json.loads(out)["instance_types"]
    assert [(r["instance_type"], r["streams_per_instance"], r["kv_cache_fit"]) for r in rows] == [
        ("ml.g6e.2xlarge", 4, 23), ("ml.g6.4xlarge", 4, 8)]
    assert rows[0]["streams_source"] == "auto: the fewest of voxtral.instance_pools"
