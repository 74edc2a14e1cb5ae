"""voice_devtools.connect_replay: the checks of what a replay is given, the event Connect sends, how
a call's end reads, and one replay of a stereo recording through the start function, moto, the KVS
stand-in and the consumer to the bridge (the fake vLLM behind it), its segments handed over as they
arrive. The command that prints them: tests/unit/voicectl/commands/test_connect_replay.py."""

from __future__ import annotations

import sys

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
from voice_client.errors import UsageError
from voice_client.transcribe import TranscriptionTarget
from voice_devtools import connect_replay


@pytest.mark.parametrize(
    ("quiet_s", "message"),
    [
        (float("nan"), "--quiet-s must be a finite number of seconds above 0, got nan: "),
        (0.0, "--quiet-s must be a finite number of seconds above 0, got 0: "),
        (
            READ_TIMEOUT_S,
            f"--quiet-s must be above GetMedia's {READ_TIMEOUT_S:g} s idle timeout, got "
            f"{READ_TIMEOUT_S:g}: a call's end would be taken for a stalled stream",
        ),
    ],
)
def test_a_quiet_time_that_cannot_tell_a_stall_from_the_end_is_refused(quiet_s, message):
    with pytest.raises(UsageError) as refused:
        connect_replay.check_quiet_s(quiet_s)
    assert str(refused.value).startswith(message)
    connect_replay.check_quiet_s(QUIET_S)  # above the idle timeout: accepted


def test_a_call_is_loaded_before_anything_starts_and_a_bad_one_is_refused(tmp_path):
    customer = np.frombuffer(speech_like(1, 1), dtype="<i2")
    agent = np.frombuffer(speech_like(1, 2), dtype="<i2")
    call = tmp_path / "call.wav"
    soundfile.write(call, np.stack([customer, agent], axis=1), 8000, subtype="PCM_16")
    assert connect_replay.load_call(call) == (customer.tobytes(), agent.tobytes())
    with pytest.raises(UsageError, match=r"absent\.wav: no such file$"):
        connect_replay.load_call(tmp_path / "absent.wav")
    with pytest.raises(UsageError, match=r": not a file$"):
        connect_replay.load_call(tmp_path)
    mono = tmp_path / "mono.wav"
    soundfile.write(mono, customer, 8000, subtype="PCM_16")
    with pytest.raises(UsageError, match="two channels"):
        connect_replay.load_call(mono)


def test_the_event_is_what_connect_sends_after_start_media_streaming():
    event = connect_replay.connect_event("c-1", "arn:aws:kinesisvideo:stream/s/1", "91343852")
    assert event["Name"] == "ContactFlowEvent"
    contact = event["Details"]["ContactData"]
    assert (contact["ContactId"], contact["Channel"]) == ("c-1", "VOICE")
    assert contact["MediaStreams"]["Customer"]["Audio"] == {
        "StreamARN": "arn:aws:kinesisvideo:stream/s/1",
        "StartFragmentNumber": "91343852",
        "StartTimestamp": "1700000000000",
    }


@pytest.mark.parametrize(
    ("reason", "failed"),
    [
        ("the stream ended", False),
        ("failed: the endpoint refused the stream", True),
        (RuntimeError("boom"), True),
    ],
)
def test_a_call_failed_when_the_consumer_says_so(reason, failed):
    assert connect_replay.ReplayOutcome("c-1", reason).failed is failed


def test_a_replay_hands_over_the_start_functions_answer_and_both_speakers_segments(tmp_path):
    customer = speech_like(6, 1)
    agent = speech_like(6, 2)
    answers, segments = [], []
    stdout = sys.stdout
    with Background() as background:
        outcome = connect_replay.replay_call(
            customer,
            agent,
            TranscriptionTarget(url=background.url),
            speed=0,
            quiet_s=QUIET_S,
            on_started=answers.append,
            on_segment=segments.append,
        )
    assert sys.stdout is stdout  # the consumer's lines went to os.devnull, and stdout is back
    assert (outcome.failed, outcome.reason) == (False, "the stream ended")
    assert answers and answers[0]["transcription"] == "started"
    assert {segment.speaker for segment in segments} == {
        "AUDIO_FROM_CUSTOMER",
        "AUDIO_TO_CUSTOMER",
    }
    for speaker in ("AUDIO_FROM_CUSTOMER", "AUDIO_TO_CUSTOMER"):
        ends = [segment.end_s for segment in segments if segment.speaker == speaker]
        assert ends == sorted(ends) and abs(ends[-1] - 6.0) < 0.05
