"""The preflight's SageMaker instance quotas (voicectl/operations/preflight_quotas.py) in a
deploy's preflight: the steady and the update's peak need of each instance type against the applied
or default quota (stand-ins: test_preflight.py)."""

from __future__ import annotations

from tests.unit.voicectl.operations.preflight_testkit import (  # noqa: F401 (fixtures)
    QUOTA_G6,
    QUOTA_G6E,
    bootstrapped,
    findings,
    fixture_aws,
    fixture_fake_credentials,
    quota,
    stub_quotas,
    stub_sonic,
)
from voicectl.operations.preflight_findings import Status
from voicectl.operations.preflight_quotas import instance_needs


def test_a_quota_below_the_maximum_count_stops_and_names_the_quota_and_the_request(aws):
    bootstrapped(aws)
    stub_sonic(aws)
    stub_quotas(aws, [quota(QUOTA_G6, 0, "L-G6X4"), quota(QUOTA_G6E, 2, "L-G6EX2")])
    found = findings(aws)
    g6 = found[f"service quota '{QUOTA_G6}'"]
    assert g6.status is Status.STOP
    assert g6.message == (
        "0 in us-east-1, below the 4 this deploy may run (Voxtral up to 4, 5 during a rolling "
        "update; the quota is shared with every other endpoint of the account in us-east-1); "
        "SageMaker would fail the endpoint after the stack waited for it. Lower the max "
        "instances, choose another instance type, or request an increase at "
        "https://us-east-1.console.aws.amazon.com/servicequotas/home/services/sagemaker/quotas/L-"
        "G6X4 or with `aws service-quotas request-service-quota-increase --service-code "
        "sagemaker --quota-code L-G6X4 --desired-value 5 --region us-east-1`"
    )
    # Enough for Sonic's maximum of 2, not for a blue/green update at that count.
    g6e = found[f"service quota '{QUOTA_G6E}'"]
    assert g6e.status is Status.WARN
    assert g6e.message.startswith(
        "2 in us-east-1: enough for 2, not for the 4 an update may run at the maximum count"
    )


def test_two_endpoints_on_one_instance_type_need_the_sum(aws):
    bootstrapped(aws)
    stub_sonic(aws, supported=("ml.g6e.2xlarge",))
    stub_quotas(aws, [quota(QUOTA_G6E, 5, "L-G6EX2")])
    finding = findings(aws, "-c", "voxtral.instance_type=ml.g6e.2xlarge")[
        f"service quota '{QUOTA_G6E}'"
    ]
    assert finding.status is Status.STOP
    assert finding.message.startswith(
        "5 in us-east-1, below the 6 this deploy may run (Voxtral up to 4, 5 during a "
        "rolling update; Sonic up to 2, 4 during a blue/green update;"
    )


def test_a_quota_never_changed_is_read_from_the_defaults(aws):
    bootstrapped(aws)
    stub_sonic(aws)
    stub_quotas(
        aws,
        [quota(QUOTA_G6, 8, "L-G6X4")],
        defaults=[
            quota("ml.g5.xlarge for endpoint usage", 2, "L-G5"),
            quota(QUOTA_G6E, 0, "L-G6EX2"),
        ],
    )
    found = findings(aws)
    assert found[f"service quota '{QUOTA_G6}'"].status is Status.OK
    assert found[f"service quota '{QUOTA_G6E}'"].message.startswith("0 in us-east-1, below the 2")


def test_instance_needs_count_the_update_overlap():
    from config.settings import load_settings
    from tests.conftest import cdk_json_context

    needs = instance_needs(
        load_settings(
            {
                **cdk_json_context(),
                "voxtral.max_instances": "6",
                "voxtral.rollout_batch_percent": "10",
                "sonic.max_instances": "3",
            }
        )
    )
    assert {t: (n.steady, n.peak) for t, n in needs.items()} == {
        "ml.g6.xlarge": (6, 7),
        "ml.g6e.2xlarge": (3, 6),
    }
