"""The wire protocol between a page (``voicectl talk``, or your own client) and the bot: one
WebSocket per conversation, at ``ws://HOST:8080/`` (``wss://`` behind a load balancer).

Page -> bot:

- binary messages: the user's audio, PCM16 little-endian mono at 16 kHz
  (:data:`INPUT_SAMPLE_RATE_HZ`), sent continuously while the microphone is open (silence
  included: the bot's voice activity detection decides when the user speaks), any length up to
  :data:`MAX_AUDIO_MESSAGE_BYTES`;
- text messages: JSON; ``{"type": "end"}`` ends the conversation (closing the socket does too).

Bot -> page:

- binary messages: the agent's audio, PCM16 little-endian mono at 24 kHz
  (:data:`OUTPUT_SAMPLE_RATE_HZ`), to be played in order as it comes;
- text messages, JSON objects with a ``type``:

  - ``ready`` (``session_id``, ``input_sample_rate_hz``, ``output_sample_rate_hz``): first, once
    the conversation runs;
  - ``user_transcript`` (``text``, ``final``): what the user said, as it grows (``final`` false),
    then the turn's final text;
  - ``agent_text`` (``text``, ``final``): the agent's answer as the LLM writes it, then whole;
  - ``turn`` (``state``: ``user_started``, ``user_stopped``, ``agent_thinking``,
    ``agent_speaking``);
  - ``interrupt``: the user spoke over the agent: drop every queued agent audio frame now; no
    audio of the interrupted answer follows this event;
  - ``latency`` (``turn``, and in milliseconds those measured: ``VoiceToVoice`` end of speech to
    the first answer audio sent, ``TimeToFinalTranscript``, ``LlmFirstToken``,
    ``SonicFirstAudio``): once per answered turn, when its first audio is sent;
  - ``error`` (``message``): something failed (the conversation may go on);
  - ``end`` (``reason``): last, before the bot closes the socket.

A connection beyond the bot's ``AGENT_MAX_SESSIONS`` is refused at the handshake with HTTP 503;
``GET /health`` answers 200 with ``{"status": "ok", "sessions": N, "max_sessions": M}``.
"""

from __future__ import annotations

INPUT_SAMPLE_RATE_HZ = 16000
"""The page's audio rate: Voxtral's input rate (the bridge's and vLLM's 16 kHz)."""

OUTPUT_SAMPLE_RATE_HZ = 24000
"""The agent's audio rate: one Sonic offers, the usual rate of Pipecat's and LiveKit's
outputs."""

MAX_AUDIO_MESSAGE_BYTES = 64 * 1024
"""Largest audio message accepted: 2 s of 16 kHz PCM16 (a page sends 20-100 ms at a time)."""

MAX_MESSAGE_BYTES = MAX_AUDIO_MESSAGE_BYTES + 1024
"""The WebSocket's largest message (``max_size``): an audio message or a small JSON event."""

HEALTH_PATH = "/health"
