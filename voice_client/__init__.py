"""The client library: what callers of the deployed endpoints import, on its own (no command-line
code: the ``voicectl`` commands over it are :mod:`voicectl.commands`).

- :mod:`voice_client.realtime`: the transcription over any transport (``transcribe_stream``);
  :mod:`~voice_client.sagemaker_stream`: the SageMaker bidirectional stream transport
  (``open_endpoint``); :mod:`~voice_client.transcribe`: a recording through a target, a SageMaker
  endpoint or a bridge's WebSocket (``TranscriptionTarget``, ``open_target``, ``transcribe_file``).
- :mod:`~voice_client.speak`: text to speech through the Sonic endpoint (``synthesize``), over
  :mod:`~voice_client.sonic` (Sonic's request and its event stream).
- The mic page: :mod:`~voice_client.mic` (its server, ``serve``), with
  :mod:`~voice_client.mic_transcriber`, :mod:`~voice_client.mic_recording`,
  :mod:`~voice_client.mic_speak`, its gate :mod:`~voice_client.mic_guard` and its recorder in
  ``mic_page/``; the talk page's relay to the voice agent, :mod:`~voice_client.talk`.
- :mod:`~voice_client.frameworks`: the Pipecat and LiveKit Agents services.
- Shared: :mod:`~voice_client.audio` (reading, resampling and writing PCM16),
  :mod:`~voice_client.aws` (the AWS session, one-line AWS failures), :mod:`~voice_client.errors`
  (``UsageError``) and :mod:`~voice_client.bounded_json` (JSON parsing with size and depth bounds).
"""
