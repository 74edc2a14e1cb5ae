"""The Voxtral and Sonic endpoints inside voice-agent frameworks: Pipecat services and LiveKit
Agents plugins.

Framework-neutral cores, shared by both frameworks (no framework import):

- :mod:`~voice_client.frameworks.targets`: where the endpoints are (:class:`VoxtralTarget`: a
  SageMaker endpoint over bidirectional streaming with the standard AWS credential chain, or the ECS
  target's WebSocket URL and bearer token; :class:`SonicTarget`: a SageMaker endpoint called with
  ``InvokeEndpointWithResponseStream``).
- :mod:`~voice_client.frameworks.voxtral_stream`: streaming transcription cut into utterances by
  the framework's voice activity detection (:class:`VoxtralUtteranceStream`), built on
  :func:`voice_client.realtime.transcribe_stream`.
- :mod:`~voice_client.frameworks.sonic_stream`: one Sonic request per sentence, its audio as it
  arrives, the request closed when the caller stops reading (:class:`SonicSynthesizer`).

Adapters (each imports its framework, installed with ``pip install
'sagemaker-realtime-voice[pipecat]'`` or ``[livekit]``, or ``make agents-deps``):
:mod:`~voice_client.frameworks.pipecat_voxtral`,
:mod:`~voice_client.frameworks.pipecat_sonic`,
:mod:`~voice_client.frameworks.livekit_voxtral`,
:mod:`~voice_client.frameworks.livekit_sonic`.
"""
