"""voicectl/operations/verify_compare.py: deployed values against the template's, entry by entry
(the checks it makes of a deployment: test_verify.py)."""

from __future__ import annotations

from voicectl.operations.verify_compare import ABSENT, differences


def test_comparing_values():
    assert (
        differences(
            {"A": 1, "B": {"C": "x"}}, {"A": 1.0, "B": {"C": "x", "D": "added by SageMaker"}}, "P"
        )
        == []
    )
    assert differences({"SM_X": "1"}, {"SM_X": "1", "SM_Y": "2"}, "Environment") == [
        ("Environment.SM_Y", _unset(), "2")
    ]
    assert differences(["b", "a"], ["a", "b"], "Subnets") == []
    assert differences([{"T": "x"}], [{"T": "y"}], "InstancePools") == [
        ("InstancePools[0].T", "x", "y")
    ]
    assert differences(False, None, "EnableNetworkIsolation") == []
    assert differences(None, True, "EnableNetworkIsolation") == [
        ("EnableNetworkIsolation", None, True)
    ]


def _unset():
    return ABSENT
