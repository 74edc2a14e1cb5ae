"""contracts/agent_metrics.py: the voice agent's metric names and units, one table the bot writes by
and the stack reads (the bot against it: tests/agent/test_agent_metrics.py)."""

from __future__ import annotations

from contracts import agent_metrics as metrics


def test_every_named_metric_has_one_unit_in_the_table():
    named = {
        metrics.ACTIVE_SESSIONS,
        metrics.SESSIONS,
        metrics.SESSIONS_FAILED,
        metrics.SESSIONS_REFUSED,
        metrics.INTERRUPTIONS,
        metrics.TASK_PROTECTION_ERRORS,
        *metrics.TURN_LATENCY_METRICS.values(),
        *metrics.STAGE_ERRORS.values(),
    }
    assert set(metrics.METRICS) == named
    assert set(metrics.METRICS.values()) == {metrics.COUNT, metrics.MILLISECONDS}
    assert {name for name, unit in metrics.METRICS.items() if unit == metrics.MILLISECONDS} == set(
        metrics.TURN_LATENCY_METRICS.values()
    )


def test_the_latency_names_follow_the_bots_event_keys_and_the_stages_are_the_pipelines():
    assert metrics.TURN_LATENCY_METRICS["VoiceToVoice"] == metrics.VOICE_TO_VOICE_MS
    assert all(name == f"{key}Ms" for key, name in metrics.TURN_LATENCY_METRICS.items())
    assert set(metrics.STAGE_ERRORS) == {"stt", "llm", "tts"}
    assert (metrics.NAMESPACE, metrics.DIMENSION) == ("VoiceAgent", "Deployment")
