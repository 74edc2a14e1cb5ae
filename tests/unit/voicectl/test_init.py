"""voicectl/__init__.py: the import paths documented before the split name the moved modules
themselves."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

import voicectl
from tests.conftest import ROOT


@pytest.mark.parametrize(("old", "new"), sorted(voicectl.MOVED_MODULES.items()))
def test_an_old_path_is_the_moved_module_itself(old, new):
    moved = importlib.import_module(old)
    assert moved is importlib.import_module(new)
    assert (moved.__name__, moved.__spec__.name) == (new, new)
    assert sys.modules[old] is sys.modules[new]


def test_the_readmes_imports_resolve_in_a_fresh_interpreter_without_loading_what_they_do_not_name():
    code = (
        "import sys\nfrom voicectl.audio import iter_pcm16_chunks, pcm16_to_wav_bytes\nfrom "
        "voicectl.realtime import RealtimeError, paced_chunks, transcribe_stream\nfrom "
        "voicectl.sagemaker_stream import open_endpoint\nfrom voicectl.sonic import "
        "SonicRequest\nfrom voicectl.speak import synthesize\nfrom voicectl.pricing import "
        "pricing_client, usd_per_hour\nprint(transcribe_stream.__module__, "
        "open_endpoint.__module__, usd_per_hour.__module__)\nprint('voicectl.clients.mic' in "
        "sys.modules, 'voicectl.operations.verify' in sys.modules)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
    )
    assert result.stdout.splitlines() == [
        "voicectl.clients.realtime.driver voicectl.clients.sagemaker_stream "
        "voicectl.operations.pricing",
        "False False",
    ]


def test_a_path_that_never_existed_is_still_not_found():
    with pytest.raises(ModuleNotFoundError, match=r"voicectl.no_such_module"):
        importlib.import_module("voicectl.no_such_module")


def test_importing_voicectl_loads_none_of_the_moved_modules():
    code = "import sys, voicectl\nprint(sorted(m for m in sys.modules if m.startswith('voicectl')))"
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == "['voicectl']"
