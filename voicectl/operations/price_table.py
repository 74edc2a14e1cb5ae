"""On-demand prices shipped with the project: what ``voicectl capacity --compare`` prices with when
the Price List API cannot be asked (no ``--prices``, no credentials, no network).

Dated, with its source and Region, and printed as such. The figures are list prices in USD per
instance-hour in us-east-1, before tax, without Savings Plans, Spot or private pricing, for the
instance only (no storage volume, data transfer or Marketplace software fee).

Source (unconfirmed): transcribed from the on-demand rates AWS's public pricing pages list (Amazon
SageMaker AI pricing, real-time inference; Amazon EC2 On-Demand pricing, Linux), as third-party
price trackers reproduce them; this project has no AWS account, so none of them was read from the
Price List API. The SageMaker rates of these families are the EC2 rate x 1.25 (ml.g5.xlarge
excepted); ``voicectl capacity --prices`` reads today's figures. Other Regions are not in the table:
ask the Price List API (``--prices``) there.
"""

from __future__ import annotations

from dataclasses import dataclass

#: When the table was written, its Region and its source, as the report prints them.
RECORDED = "2026-12-01"
REGION = "us-east-1"
SOURCE = (
    "AWS's public on-demand pricing pages (SageMaker AI real-time inference, EC2 Linux) as third "
    "parties list them; not read from the Price List API"
)

#: SageMaker real-time inference, USD per instance-hour, us-east-1 (single-GPU sizes and the
#: multi-GPU ones of the same families).
SAGEMAKER_USD_PER_HOUR: dict[str, float] = {
    "ml.g5.xlarge": 1.408,
    "ml.g5.2xlarge": 1.515,
    "ml.g5.4xlarge": 2.03,
    "ml.g5.8xlarge": 3.06,
    "ml.g5.16xlarge": 5.12,
    "ml.g5.12xlarge": 7.09,
    "ml.g5.24xlarge": 10.18,
    "ml.g5.48xlarge": 20.36,
    "ml.g6.xlarge": 1.006,
    "ml.g6.2xlarge": 1.222,
    "ml.g6.4xlarge": 1.654,
    "ml.g6.8xlarge": 2.518,
    "ml.g6.16xlarge": 4.246,
    "ml.g6.12xlarge": 5.752,
    "ml.g6.24xlarge": 8.344,
    "ml.g6.48xlarge": 16.688,
    "ml.g6e.xlarge": 2.3263,
    "ml.g6e.2xlarge": 2.8026,
    "ml.g6e.4xlarge": 3.7553,
    "ml.g6e.8xlarge": 5.6607,
    "ml.g6e.16xlarge": 9.4715,
    "ml.g6e.12xlarge": 13.1158,
    "ml.g6e.24xlarge": 18.832,
    "ml.g6e.48xlarge": 37.664,
}

#: EC2 On-Demand, Linux, shared tenancy, USD per instance-hour, us-east-1 (the ECS target's hosts).
EC2_USD_PER_HOUR: dict[str, float] = {
    "g5.xlarge": 1.006,
    "g5.2xlarge": 1.212,
    "g5.4xlarge": 1.624,
    "g5.8xlarge": 2.448,
    "g5.16xlarge": 4.096,
    "g5.12xlarge": 5.672,
    "g5.24xlarge": 8.144,
    "g5.48xlarge": 16.288,
    "g6.xlarge": 0.8048,
    "g6.2xlarge": 0.9776,
    "g6.4xlarge": 1.3232,
    "g6.8xlarge": 2.0144,
    "g6.16xlarge": 3.3968,
    "g6.12xlarge": 4.6016,
    "g6.24xlarge": 6.6752,
    "g6.48xlarge": 13.3504,
    "g6e.xlarge": 1.861,
    "g6e.2xlarge": 2.24208,
    "g6e.4xlarge": 3.00424,
    "g6e.8xlarge": 4.52856,
    "g6e.16xlarge": 7.57719,
    "g6e.12xlarge": 10.49264,
    "g6e.24xlarge": 15.06559,
    "g6e.48xlarge": 30.13118,
}


@dataclass(frozen=True)
class TablePrice:
    """One price from the table: USD per instance-hour, and where it comes from (for the report)."""

    usd_per_hour: float
    source: str


def lookup(instance_type: str, region: str) -> TablePrice | None:
    """The table's price of ``instance_type`` (``ml.*``: SageMaker hosting; otherwise EC2) in
    ``region``, or None (another Region, or a type the table lacks)."""
    if region != REGION:
        return None
    table = SAGEMAKER_USD_PER_HOUR if instance_type.startswith("ml.") else EC2_USD_PER_HOUR
    price = table.get(instance_type)
    return None if price is None else TablePrice(price, f"price table {RECORDED}")


def describe() -> str:
    """One line for reports: the table's date, Region and source."""
    return (
        f"the price table shipped with voicectl (voicectl/operations/price_table.py), {REGION}, "
        f"recorded {RECORDED} from {SOURCE}"
    )
