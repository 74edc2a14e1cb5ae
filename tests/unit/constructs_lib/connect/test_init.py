"""constructs_lib/connect/__init__.py: the package's names import their module on first use, so the
props load without aws_cdk and ``from constructs_lib.connect import ConnectTranscription`` still
works."""

from __future__ import annotations

import subprocess
import sys

import pytest

import constructs_lib.connect as package
from tests.conftest import ROOT


def test_each_name_comes_from_its_module():
    from constructs_lib.connect import props, transcription

    assert package.ConnectTranscriptionProps is props.ConnectTranscriptionProps
    assert package.ConnectTranscription is transcription.ConnectTranscription
    assert package.dashboard_rows is transcription.dashboard_rows
    assert sorted(package.__all__) == [
        "ConnectTranscription",
        "ConnectTranscriptionProps",
        "dashboard_rows",
    ]


def test_an_unknown_name_is_an_attribute_error():
    with pytest.raises(
        AttributeError, match=r"module 'constructs_lib.connect' has no attribute 'Nope'"
    ):
        package.Nope  # noqa: B018


def test_the_props_through_the_package_load_no_aws_cdk():
    code = (
        "import sys\nfrom constructs_lib.connect import ConnectTranscriptionProps\n"
        "print(sorted(m for m in ('aws_cdk', 'jsii') if m in sys.modules))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == "[]"
