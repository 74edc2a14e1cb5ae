"""voice_client.realtime.result: the figures of a transcription, and their JSON form."""

from __future__ import annotations

from voice_client.realtime.policy import DEFAULT_SESSION_LIMIT_S
from voice_client.realtime.result import TranscriptionResult


def result(**changes) -> TranscriptionResult:
    figures = {
        "transcript": "hello world",
        "audio_seconds_sent": 10.0,
        "time_to_first_delta_s": 0.4567,
        "elapsed_s": 2.5,
        "sessions": 2,
        "reopens": 1,
    }
    return TranscriptionResult(**{**figures, **changes})


def test_the_real_time_factor_is_elapsed_time_over_audio_time():
    assert result().real_time_factor == 0.25
    assert result(audio_seconds_sent=0.0).real_time_factor is None


def test_as_dict_rounds_seconds_to_milliseconds_and_keeps_counts():
    assert result(replayed_audio_s=1.23456, rollovers=3, generations=4).as_dict() == {
        "transcript": "hello world",
        "time_to_first_delta_s": 0.457,
        "real_time_factor": 0.25,
        "audio_seconds_sent": 10.0,
        "elapsed_s": 2.5,
        "sessions": 2,
        "reopens": 1,
        "rollovers": 3,
        "generations": 4,
        "replayed_audio_s": 1.235,
        "session_limit_s": DEFAULT_SESSION_LIMIT_S,
    }


def test_a_run_without_a_delta_or_audio_reports_none():
    figures = result(time_to_first_delta_s=None, audio_seconds_sent=0.0).as_dict()
    assert figures["time_to_first_delta_s"] is None and figures["real_time_factor"] is None
