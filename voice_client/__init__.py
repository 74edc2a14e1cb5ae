"""What callers of the deployed endpoints run and import.

Subcommands: :mod:`~voice_client.transcribe` (recordings, through the Voxtral endpoint),
:mod:`~voice_client.speak` (text to speech, through the Sonic endpoint) and
:mod:`~voice_client.mic` (the live microphone page, with its gate
:mod:`~voice_client.mic_guard` and its recorder in ``mic_page/``).

For your own code: :mod:`voice_client.realtime` (the transcription over any transport:
``transcribe_stream``), :mod:`~voice_client.sagemaker_stream` (the SageMaker bidirectional
stream transport: ``open_endpoint``), :mod:`~voice_client.audio` (reading, resampling and
writing PCM16), :mod:`~voice_client.sonic` (Sonic's request and its event stream) and
:mod:`~voice_client.bounded_json` (JSON parsing with size and depth bounds).
"""
