"""The instance catalogue's local-storage facts (constructs_lib/facts/instance_types.py): every
family carries one with its source, the families AWS names are recorded the way AWS names them, and
an unknown type is reported as unknown."""

from __future__ import annotations

import pytest

from constructs_lib.facts import instance_types

# CreateEndpointConfig, KmsKeyId: these families carry NVMe instance storage (SageMaker names
# ml.g4dn, ml.g5 and ml.p4d; the EC2 instance-store table the rest), so an EndpointConfig on them
# must not set KmsKeyId.
NVME_TYPES = [
    "ml.g4dn.xlarge",
    "ml.g5.2xlarge",
    "ml.g5.48xlarge",
    "ml.g6.4xlarge",
    "ml.g6.48xlarge",
    "ml.g6e.2xlarge",
    "ml.g7e.2xlarge",
    "ml.g7.2xlarge",
    "ml.p4d.24xlarge",
    "ml.p4de.24xlarge",
    "ml.p5.4xlarge",
    "ml.p5.48xlarge",
    "ml.p5e.48xlarge",
    "ml.p5en.48xlarge",
]
EBS_ONLY_TYPES = [
    "ml.m5.xlarge",
    "ml.c5.large",
    "ml.c5.9xlarge",
    "ml.m7i.2xlarge",
    "ml.c7i.4xlarge",
]


@pytest.mark.parametrize("name", NVME_TYPES)
def test_nvme_families_have_local_storage(name):
    assert instance_types.has_local_storage(name) is True
    assert instance_types.lookup(name).local_storage is True


@pytest.mark.parametrize("name", EBS_ONLY_TYPES)
def test_ebs_only_families_have_no_local_storage(name):
    assert instance_types.has_local_storage(name) is False


@pytest.mark.parametrize(
    "name", ["ml.r5.large", "ml.g6.3xlarge", "ml.inf2.xlarge", "g6.4xlarge", ""]
)
def test_a_type_the_catalogue_does_not_know_is_none_not_a_guess(name):
    assert instance_types.has_local_storage(name) is None


def test_every_family_of_the_catalogue_has_a_local_storage_fact_with_a_source():
    families = {spec.family for spec in instance_types.CATALOGUE.values()}
    assert families == set(instance_types.LOCAL_STORAGE)
    for spec in instance_types.CATALOGUE.values():
        assert spec.local_storage_source == instance_types.LOCAL_STORAGE[spec.family][1]
        assert len(spec.local_storage_source) > 40, spec.name


def test_a_fact_not_confirmed_from_a_document_says_so():
    for family in ("g7e", "g7"):
        assert instance_types.LOCAL_STORAGE[family][1].startswith("unconfirmed")
    assert "p5.4xlarge: unconfirmed" in instance_types.LOCAL_STORAGE["p5"][1]
