"""``voicectl connect-replay``: a stereo recording through the start function, moto (SQS,
EventBridge, DynamoDB), the KVS stand-in and the consumer to the bridge (the fake vLLM behind it);
both speakers' finals on stdout. The replay under it: tests/unit/devtools/test_connect_replay.py."""

from __future__ import annotations

import re

import numpy as np
import pytest
import soundfile

from tests.unit.devtools.replay_testkit import (  # noqa: F401 (short_kvs_reads: a fixture)
    Background,
    short_kvs_reads,
)
from tests.unit.services.connect_consumer.connect_testkit import (
    QUIET_S,
    READ_TIMEOUT_S,
    speech_like,
)
from voicectl.cli import main


def test_connect_replay_prints_both_speakers_in_call_order(tmp_path, capsys):
    customer = np.frombuffer(speech_like(14, 1), dtype="<i2")
    agent = np.frombuffer(speech_like(14, 2), dtype="<i2")
    path = tmp_path / "call.wav"
    soundfile.write(path, np.stack([customer, agent], axis=1), 8000, subtype="PCM_16")
    with Background() as background:
        code = main(
            [
                "connect-replay",
                str(path),
                "--url",
                background.url,
                "--speed",
                "0",
                "--quiet-s",
                str(QUIET_S),
            ]
        )
    out, err = capsys.readouterr()
    assert code == 0, err
    lines = [line for line in out.splitlines() if line.startswith("[")]
    speakers = {re.search(r"\] (\w+)", line).group(1) for line in lines}
    assert speakers == {"customer", "agent"}
    for who in ("customer", "agent"):
        ends = [
            float(m.group(2))
            for line in lines
            if (m := re.match(r"\[\s*([\d.]+)-\s*([\d.]+) s\] " + who, line))
        ]
        assert ends == sorted(ends) and abs(ends[-1] - 14.0) < 0.05
    assert '"transcription": "started"' in err and "ended: the stream ended" in err


def test_connect_replay_runs_twice_in_one_process(tmp_path, capsys):
    """moto's in-process backends outlive its server: the second replay must not find the first
    one's resources."""
    path = tmp_path / "call.wav"
    soundfile.write(
        path,
        np.stack(
            [
                np.frombuffer(speech_like(3, 1), dtype="<i2"),
                np.frombuffer(speech_like(3, 2), dtype="<i2"),
            ],
            axis=1,
        ),
        8000,
        subtype="PCM_16",
    )
    with Background() as background:
        for _ in range(2):
            code = main(
                [
                    "connect-replay",
                    str(path),
                    "--url",
                    background.url,
                    "--speed",
                    "0",
                    "--quiet-s",
                    str(QUIET_S),
                ]
            )
            _out, err = capsys.readouterr()
            assert code == 0, err
            assert "ended: the stream ended" in err


def test_connect_replay_refuses_a_mono_recording_naming_what_it_needs(tmp_path, capsys):
    path = tmp_path / "mono.wav"
    soundfile.write(path, np.frombuffer(speech_like(2, 1), dtype="<i2"), 8000, subtype="PCM_16")
    code = main(["connect-replay", str(path), "--url", "ws://127.0.0.1:9/x"])
    _out, err = capsys.readouterr()
    assert code != 0 and "two channels" in err


def test_connect_replay_refuses_a_quiet_time_within_get_medias_idle_timeout(tmp_path, capsys):
    path = tmp_path / "call.wav"
    soundfile.write(path, np.zeros((8000, 2), dtype="<i2"), 8000, subtype="PCM_16")
    code = main(
        [
            "connect-replay",
            str(path),
            "--url",
            "ws://127.0.0.1:9/x",
            "--quiet-s",
            str(READ_TIMEOUT_S),
        ]
    )
    err = capsys.readouterr().err
    assert (
        code == 2
        and (
            f"--quiet-s must be above GetMedia's {READ_TIMEOUT_S:g} s idle timeout, "
            f"got {READ_TIMEOUT_S:g}"
        )
        in err
    )


@pytest.mark.parametrize("quiet_s", ["nan", "inf", "0", "-1"])
def test_connect_replay_refuses_a_quiet_time_that_would_never_or_at_once_end_the_call(
    tmp_path, capsys, quiet_s
):
    path = tmp_path / "call.wav"
    soundfile.write(path, np.zeros((800, 2), dtype="<i2"), 8000, subtype="PCM_16")
    code = main(["connect-replay", str(path), "--url", "ws://127.0.0.1:9/x", "--quiet-s", quiet_s])
    _out, err = capsys.readouterr()
    assert (
        code == 2
        and f"--quiet-s must be a finite number of seconds above 0, got {float(quiet_s):g}" in err
    )


def test_connect_replay_refuses_a_recording_without_samples_and_a_directory(tmp_path, capsys):
    empty = tmp_path / "empty.wav"
    soundfile.write(empty, np.zeros((0, 2), dtype="<i2"), 8000, subtype="PCM_16")
    assert main(["connect-replay", str(empty), "--url", "ws://127.0.0.1:9/x"]) == 2
    assert f"{empty}: the recording holds no audio" in capsys.readouterr().err
    assert main(["connect-replay", str(tmp_path), "--url", "ws://127.0.0.1:9/x"]) == 2
    assert f"{tmp_path}: not a file" in capsys.readouterr().err
