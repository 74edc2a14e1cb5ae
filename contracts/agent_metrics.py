"""The voice agent's CloudWatch metrics: namespace, dimension, names and units, defined once.

The bot (``agent/metrics.py``) writes them as embedded metric format lines; the agent's stack
(``constructs_lib/agent``) scales, alarms and draws its dashboard on them. Both import this
module, so a name cannot drift between the two.

Standard library only and self-contained (no import of the project), like ``agent_env``: the
bot's image ships ``contracts/``.
"""

from __future__ import annotations

from typing import Final

#: CloudWatch namespace of every metric of the bot.
NAMESPACE: Final = "VoiceAgent"
#: The dimension every metric carries (METRIC_DIMENSIONS); its value is the deployment.
DIMENSION: Final = "Deployment"

#: CloudWatch units (CloudWatch API reference, MetricDatum Unit).
COUNT: Final = "Count"
MILLISECONDS: Final = "Milliseconds"

#: Live sessions of one task, the most at once in the last interval, one value per task every
#: :data:`ACTIVE_SESSIONS_INTERVAL_S`. The service's target tracking reads its Average over the
#: tasks, i.e. live sessions per task.
ACTIVE_SESSIONS: Final = "ActiveSessions"
#: Seconds between two ActiveSessions values of a task: the metric's 1-minute period.
ACTIVE_SESSIONS_INTERVAL_S: Final = 60.0
#: Sessions started (one per accepted WebSocket).
SESSIONS: Final = "Sessions"
#: Sessions that ended on an error.
SESSIONS_FAILED: Final = "SessionsFailed"
#: Connections refused because the bot was full (HTTP 503).
SESSIONS_REFUSED: Final = "SessionsRefused"
#: Times the user spoke over the agent's answer.
INTERRUPTIONS: Final = "Interruptions"

#: Per-turn latencies, milliseconds, keyed by the names of the bot's ``latency`` event
#: (agent/protocol.py): end of speech to the agent's first audio sent, end of speech to the final
#: transcript, the LLM request to its first text, the first Sonic request to its first audio.
VOICE_TO_VOICE_MS: Final = "VoiceToVoiceMs"
TURN_LATENCY_METRICS: Final = {
    "VoiceToVoice": VOICE_TO_VOICE_MS,
    "TimeToFinalTranscript": "TimeToFinalTranscriptMs",
    "LlmFirstToken": "LlmFirstTokenMs",
    "SonicFirstAudio": "SonicFirstAudioMs",
}

#: Errors of each stage of the pipeline (speech to text, the LLM, Sonic), counted one per error.
STAGE_ERRORS: Final = {"stt": "SttErrors", "llm": "LlmErrors", "tts": "TtsErrors"}

#: ECS task scale-in protection requests that failed (the agent's endpoint refused or was down).
TASK_PROTECTION_ERRORS: Final = "TaskProtectionErrors"

#: Every metric the bot writes -> its unit.
METRICS: Final[dict[str, str]] = {
    ACTIVE_SESSIONS: COUNT,
    SESSIONS: COUNT,
    SESSIONS_FAILED: COUNT,
    SESSIONS_REFUSED: COUNT,
    INTERRUPTIONS: COUNT,
    **dict.fromkeys(TURN_LATENCY_METRICS.values(), MILLISECONDS),
    **dict.fromkeys(STAGE_ERRORS.values(), COUNT),
    TASK_PROTECTION_ERRORS: COUNT,
}
