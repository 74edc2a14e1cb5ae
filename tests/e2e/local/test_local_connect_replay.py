"""``voicectl connect-replay`` through the local SageMaker front door (bidirectional streaming over
HTTP/2, SigV4) and the real bridge: the SageMaker target's path of the Connect consumer, offline."""

from __future__ import annotations

import re

import numpy as np
import soundfile

from tests.e2e.local.conftest import VOXTRAL
from tests.unit.services.connect_consumer.connect_testkit import speech_like
from voicectl.cli import main


def test_connect_replay_through_the_local_front_door(client_env, tmp_path, capsys):
    path = tmp_path / "call.wav"
    soundfile.write(
        path,
        np.stack(
            [
                np.frombuffer(speech_like(8, 1), dtype="<i2"),
                np.frombuffer(speech_like(8, 2), dtype="<i2"),
            ],
            axis=1,
        ),
        8000,
        subtype="PCM_16",
    )
    code = main(
        [
            "connect-replay",
            str(path),
            "--endpoint",
            VOXTRAL,
            "--endpoint-url",
            client_env.url,
            "--speed",
            "0",
        ]
    )
    out, err = capsys.readouterr()
    assert code == 0, err
    who = {m.group(1) for m in re.finditer(r"^\[[^\]]+\] (\w+)\s*:", out, flags=re.M)}
    assert who == {"customer", "agent"}
    # stdout is the transcript only (no embedded-metric JSON), stderr has no access log of the local
    # moto server.
    assert all(re.match(r"^\[[^\]]+\] (customer|agent)\s*:", line) for line in out.splitlines()), (
        out[:2000]
    )
    assert 'HTTP/1.1" 200' not in err
    assert "ended: the stream ended" in err
