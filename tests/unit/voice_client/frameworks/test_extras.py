"""An adapter imported without its framework says which extra to install
(voice_client/frameworks/extras.py)."""

from __future__ import annotations

import importlib
import sys

import pytest

from voice_client.frameworks.extras import framework_missing


@pytest.mark.parametrize(
    ("module", "framework"),
    [
        ("voice_client.frameworks.pipecat_voxtral", "pipecat"),
        ("voice_client.frameworks.pipecat_sonic", "pipecat"),
        ("voice_client.frameworks.livekit_voxtral", "livekit"),
        ("voice_client.frameworks.livekit_sonic", "livekit"),
    ],
)
def test_an_adapter_without_its_framework_names_the_extra(monkeypatch, module, framework):
    for name in [name for name in sys.modules if name.split(".")[0] == framework]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, framework, None)  # as where it is not installed
    monkeypatch.delitem(sys.modules, module, raising=False)
    with pytest.raises(ModuleNotFoundError) as missing:
        importlib.import_module(module)
    assert missing.value.name.split(".")[0] == framework
    assert str(missing.value).endswith(
        f": the {framework} services need the '{framework}' extra: pip install "
        f"'sagemaker-realtime-voice[{framework}]', or `make agents-deps` in the repository"
    )


def test_a_missing_module_that_is_not_the_framework_is_left_as_it_is():
    error = ModuleNotFoundError("No module named 'onnxruntime'", name="onnxruntime")
    assert framework_missing(error, "pipecat") is error
