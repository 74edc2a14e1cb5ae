"""What callers of the deployed endpoints run and import.

Subcommands: :mod:`~voicectl.clients.transcribe` (recordings, through the Voxtral endpoint),
:mod:`~voicectl.clients.speak` (text to speech, through the Sonic endpoint) and
:mod:`~voicectl.clients.mic` (the live microphone page, with its gate
:mod:`~voicectl.clients.mic_guard` and its recorder in ``mic_page/``).

For your own code: :mod:`voicectl.clients.realtime` (the transcription over any transport:
``transcribe_stream``), :mod:`~voicectl.clients.sagemaker_stream` (the SageMaker bidirectional
stream transport: ``open_endpoint``), :mod:`~voicectl.clients.audio` (reading, resampling and
writing PCM16), :mod:`~voicectl.clients.sonic` (Sonic's request and its event stream) and
:mod:`~voicectl.clients.bounded_json` (JSON parsing with size and depth bounds).
"""
