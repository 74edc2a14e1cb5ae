"""``voicectl capacity``: streams per instance, GPU memory split and (with --prices) cost per live
stream-hour.

No AWS without --prices; with it, the Price List call is replaced by a stand-in (its own parsing is
tested in test_pricing.py)."""

from __future__ import annotations

import json

import boto3
import pytest
from botocore.stub import Stubber

from tests.conftest import ROOT
from voicectl.cli import main
from voicectl.operations import capacity, price_table, pricing

CDK_JSON = str(ROOT / "cdk.json")


def run(capsys, *args: str) -> tuple[int, str, str]:
    code = main(["capacity", "--cdk-json", CDK_JSON, *args])
    out, err = capsys.readouterr()
    return code, out, err


def test_the_defaults_need_no_aws_and_print_the_split(capsys, monkeypatch):
    monkeypatch.setattr(
        pricing, "pricing_client", lambda *a, **k: pytest.fail("no AWS call without --prices")
    )
    code, out, _ = run(capsys)
    assert code == 0
    assert "ml.g6.xlarge: one NVIDIA L4 (22.5 GiB) serves the model" in out
    assert "streams per instance  4 (auto: compute bound; KV cache fits 8, compute budget 4)" in out
    assert "range                 1-8 streams at the ends of the model's assumptions" in out
    assert "GPU memory for vLLM   20.2 GiB = weights 8.3 + KV cache 10.5 + overhead 1.5" in out
    assert "KV per live stream    1.30 GiB (83 blocks of 16 MiB; pool 669 blocks)" in out
    assert "vLLM's startup figure 1.83x maximum concurrency for 45000-token requests" in out
    assert "add --prices" in out


def test_an_explicit_setting_and_extra_types(capsys):
    code, out, _ = run(
        capsys, "-c", "voxtral.max_num_seqs=6", "--instance-type", "ml.g6e.xlarge", "--json"
    )
    assert code == 0
    report = json.loads(out)
    first, second = report["instance_types"]
    assert (first["instance_type"], first["streams_per_instance"], first["streams_source"]) == (
        "ml.g6.xlarge",
        6,
        "voxtral.max_num_seqs",
    )
    assert (second["instance_type"], second["kv_cache_fit"], second["compute_cap"]) == (
        "ml.g6e.xlarge",
        23,
        28,
    )
    assert (
        second["vllm_budget_bytes"]
        == second["weight_bytes"] + second["kv_cache_bytes"] + second["overhead_bytes"]
    )
    assert second["usd_per_live_stream_hour"] is None


def test_prices_give_cost_per_live_stream_hour_and_per_audio_hour(capsys, monkeypatch):
    monkeypatch.setattr(pricing, "pricing_client", lambda session, region: object())
    asked = []

    def usd_per_hour(instance_type, region, *, client):
        asked.append((instance_type, region))
        return 0.8048

    monkeypatch.setattr(pricing, "usd_per_hour", usd_per_hour)
    code, out, _ = run(capsys, "--prices")
    assert code == 0 and asked == [("ml.g6.xlarge", "us-east-1")]
    assert "per live stream-hour  USD 0.2012 at 4 streams per instance" in out  # 0.8048 / 4
    assert (
        "per audio hour        USD 0.2874 at the autoscaling target (0.7 x 4 = 2.8 streams per "
        "instance)"
    ) in out


def test_a_price_that_cannot_be_read_is_said_and_exits_1(capsys, monkeypatch):
    monkeypatch.setattr(pricing, "pricing_client", lambda session, region: object())

    def usd_per_hour(instance_type, region, *, client):
        raise pricing.PriceNotFound(f"no price for {instance_type}")

    monkeypatch.setattr(pricing, "usd_per_hour", usd_per_hour)
    code, out, _ = run(capsys, "--prices")
    assert code == 1 and "no price: no price for ml.g6.xlarge" in out


def test_prices_asked_for_but_unreadable_never_say_add_prices(capsys, monkeypatch):
    def no_client(session, region):
        raise pricing.NoCredentialsError(
            "no AWS credentials found: the Price List API needs signed requests"
        )

    monkeypatch.setattr(pricing, "pricing_client", no_client)
    code, out, _ = run(capsys, "--prices")
    assert code == 1 and "add --prices" not in out
    assert "  no price: no AWS credentials found: the Price List API needs signed requests" in out


def test_the_report_fits_in_120_columns(capsys):
    code, out, _ = run(capsys, "--instance-type", "ml.g6e.2xlarge")
    assert code == 0 and max(len(line) for line in out.splitlines()) <= 120


@pytest.mark.parametrize(
    "args,message",
    [
        (
            ["--instance-type", "ml.m5.xlarge"],
            "--instance-type ml.m5.xlarge: not a GPU instance type",
        ),
        (["-c", "voxtral.max_num_seqs=40"], "for at most 8 live stream(s) of that length"),
    ],
)
def test_bad_input_exits_2_with_the_reason(capsys, args, message):
    code, _, err = run(capsys, *args)
    assert code == 2 and message in err


def test_instance_pools_show_every_type_at_the_one_cap_vllm_gets(capsys):
    code, out, _ = run(
        capsys,
        "-c",
        "voxtral.instance_type=ml.g6e.2xlarge",
        "-c",
        "voxtral.instance_pools=ml.g6e.2xlarge,ml.g6.4xlarge",
        "--json",
    )
    assert code == 0
    rows = json.loads(out)["instance_types"]
    # Each pool type runs a Model of its own (ModelNameOverride), so each gets its own cap.
    assert [(r["instance_type"], r["streams_per_instance"], r["kv_cache_fit"]) for r in rows] == [
        ("ml.g6e.2xlarge", 23, 23),
        ("ml.g6.4xlarge", 4, 8),
    ]
    assert rows[0]["streams_source"] == "auto: memory bound; the variant's Model"
    assert rows[1]["streams_source"] == "auto: compute bound; this pool's own Model"


# --- --compare ----------------------------------------------------------------------------------


def test_compare_works_offline_from_the_dated_table_and_says_so(capsys, monkeypatch):
    monkeypatch.setattr(
        pricing, "pricing_client", lambda *a, **k: pytest.fail("no AWS call without --prices")
    )
    code, out, _ = run(capsys, "--compare")
    assert code == 0
    assert (
        "Prices: USD on demand, the price table shipped with voicectl "
        f"(voicectl/operations/price_table.py), us-east-1, recorded\n{price_table.RECORDED}"
    ) in out
    assert "them; not read from the Price List API; add --prices for today's" in out
    header, first, second = [
        line for line in out.splitlines() if line.startswith(("target ", "ecs ", "sagemaker "))
    ][:3]
    assert header.split()[:3] == ["target", "instance", "type"]
    # The L40S is the cheapest per live stream-hour on both targets: 23 streams for USD 1.861 (EC2)
    # / 2.3263.
    assert first.split() == [
        "ecs",
        "g6e.xlarge",
        "L40S",
        "23",
        "(17-25)",
        "memory",
        "7",
        "1.8610",
        "0.0809",
        "13.03",
    ]
    assert second.split() == [
        "sagemaker",
        "ml.g6e.xlarge",
        "L40S",
        "23",
        "(17-25)",
        "memory",
        "7",
        "2.3263",
        "0.1011",
        "16.28",
    ]
    assert max(len(line) for line in out.splitlines()) <= 120


def test_compare_keeps_its_columns_apart_for_a_large_number_of_streams(capsys):
    code, out, _ = run(capsys, "--compare", "--streams", "100000")
    assert code == 0
    header, first = [line for line in out.splitlines() if line.startswith(("target ", "ecs "))][:2]
    assert header.split()[-4:] == ["USD/stream-h", "USD/h", "for", "100000"]
    assert first.split()[-3:] == ["1.8610", "0.0809", "11560.53"]  # 6212 x g6e.xlarge
    assert header.index("USD/h for") + len("USD/h for 100000") == len(
        first
    )  # right-aligned with its column


def test_compare_json_is_cheapest_per_live_stream_hour_first_and_sized_for_the_streams(capsys):
    code, out, _ = run(capsys, "--compare", "--json", "--streams", "40")
    assert code == 0
    report = json.loads(out)
    assert report["streams_wanted"] == 40 and report["prices"].startswith(
        "the price table shipped with voicectl"
    )
    options = report["options"]
    priced = [
        o["usd_per_live_stream_hour"] for o in options if o["usd_per_live_stream_hour"] is not None
    ]
    assert priced == sorted(priced) and len(priced) > 20
    by_type = {(o["target"], o["instance_type"]): o for o in options}
    l4 = by_type[("sagemaker", "ml.g6.4xlarge")]
    assert (l4["streams_per_instance"], l4["bound"], l4["usd_per_instance_hour"]) == (
        4,
        "compute",
        1.654,
    )
    assert l4["usd_per_live_stream_hour"] == pytest.approx(1.654 / 4)
    assert l4["instances_for_streams"] == 15  # ceil(40 / (0.7 x 4))
    assert l4["usd_per_hour_for_streams"] == pytest.approx(15 * 1.654)
    host = by_type[("ecs", "g6e.12xlarge")]  # 4 L40S, one task each
    assert (host["gpus_serving"], host["streams_per_instance"], host["instances_for_streams"]) == (
        4,
        92,
        1,
    )
    left_out = {o["instance_type"]: o["reason"] for o in report["left_out"]}
    assert "no BF16" in left_out["ml.g4dn.xlarge / g4dn.xlarge"]
    assert "8 GPUs; a SageMaker instance runs one vLLM on one GPU" in left_out["ml.p5.48xlarge"]


def test_compare_with_fp8_keeps_only_the_gpus_that_can_run_it(capsys):
    code, out, _ = run(
        capsys,
        "--compare",
        "--json",
        "-c",
        "voxtral.instance_type=ml.p5.4xlarge",
        "-c",
        "voxtral.kv_cache_dtype=fp8",
    )
    assert code == 0
    report = json.loads(out)
    assert {o["gpu"] for o in report["options"]} <= {"NVIDIA H100", "NVIDIA H200"}
    h100 = next(o for o in report["options"] if o["instance_type"] == "ml.p5.4xlarge")
    assert h100["kv_cache_fit_per_gpu"] == 93
    left_out = {o["instance_type"]: o["reason"] for o in report["left_out"]}
    assert left_out["ml.g6e.xlarge / g6e.xlarge"] == "kv_cache_dtype fp8 refused on NVIDIA L40S"


def _product(usage_type: str, attributes: dict, usd: float) -> str:
    return json.dumps(
        {
            "product": {
                "sku": f"SKU{abs(hash(usage_type)) % 10**8}",
                "productFamily": "Compute Instance",
                "attributes": {"usagetype": usage_type, **attributes},
            },
            "terms": {
                "OnDemand": {
                    "T.JRTCKXETXF": {
                        "effectiveDate": "2026-11-01T00:00:00Z",
                        "priceDimensions": {
                            "T.JRTCKXETXF.6YS6EN2CT7": {
                                "unit": "Hrs",
                                "description": "on demand",
                                "pricePerUnit": {"USD": str(usd)},
                            }
                        },
                    }
                }
            },
        }
    )


def test_compare_with_prices_reads_the_price_list(capsys, monkeypatch):
    """The Price List stubbed (botocore Stubber, as test_pricing.py does): every candidate is asked
    for, SageMaker hosting for ml.* types and EC2 Linux on demand for the ECS target's hosts, in
    eu-west-1, where the shipped table has no prices, so every figure printed is the stub's."""
    for key in [k for k in __import__("os").environ if k.startswith("AWS_")]:
        monkeypatch.delenv(key)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent/config")
    client = boto3.Session().client("pricing", region_name="eu-central-1")
    stub = Stubber(client)
    from config.settings import load_settings
    from tests.conftest import cdk_json_context

    settings = load_settings({**cdk_json_context(), "region": "eu-west-1", "sonic.enabled": False})
    chosen, _ = capacity.candidates(settings)
    expected = {}
    for index, (target, name, _spec) in enumerate(chosen):
        usd = round(1.0 + index / 100, 2)
        expected[(target, name)] = usd
        if target == "sagemaker":
            filters = [
                ("regionCode", "eu-west-1"),
                ("instanceName", name),
                ("component", "Hosting"),
            ]
            product = _product(f"EUW1-Host:{name}", {"instanceName": name}, usd)
            service = "AmazonSageMaker"
        else:
            filters = [
                ("regionCode", "eu-west-1"),
                ("instanceType", name),
                *pricing.EC2_FILTERS.items(),
            ]
            product = _product(f"EUW1-BoxUsage:{name}", {"instanceType": name}, usd)
            service = "AmazonEC2"
        stub.add_response(
            "get_products",
            {"PriceList": [product], "FormatVersion": "aws_v1"},
            {
                "ServiceCode": service,
                "FormatVersion": "aws_v1",
                "Filters": [{"Type": "TERM_MATCH", "Field": f, "Value": v} for f, v in filters],
            },
        )
    monkeypatch.setattr(pricing, "pricing_client", lambda session, region: client)
    with stub:
        code, out, _ = run(
            capsys,
            "--compare",
            "--prices",
            "--json",
            "-c",
            "region=eu-west-1",
            "-c",
            "sonic.enabled=false",
        )
        stub.assert_no_pending_responses()
    assert code == 0
    report = json.loads(out)
    assert report["prices"] == "the AWS Price List API, eu-west-1 (read now)"
    got = {(o["target"], o["instance_type"]): o["usd_per_instance_hour"] for o in report["options"]}
    assert got == {key: usd for key, usd in expected.items() if key in got} and len(got) == len(
        report["options"]
    )
    assert all(o["price_source"] == "Price List API" for o in report["options"])


def test_compare_without_credentials_exits_1_with_the_reason(capsys, monkeypatch):
    def no_client(session, region):
        raise pricing.NoCredentialsError(
            "no AWS credentials found: the Price List API needs signed requests"
        )

    monkeypatch.setattr(pricing, "pricing_client", no_client)
    code, out, err = run(capsys, "--compare", "--prices")
    assert code == 1 and out == ""
    assert "no prices from the Price List API: no AWS credentials found" in err


@pytest.mark.parametrize(
    "args,message",
    [
        (
            ["--compare", "--streams", "0"],
            "--streams 0: must be a whole number of concurrent streams, at least 1",
        ),
        (
            ["--compare", "--instance-type", "ml.g6e.xlarge"],
            "--compare already shows every GPU instance type",
        ),
    ],
)
def test_compare_bad_input_exits_2(capsys, args, message):
    code, _, err = run(capsys, *args)
    assert code == 2 and message in err
