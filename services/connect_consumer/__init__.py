"""Live call transcription for Amazon Connect: call audio from Kinesis Video Streams into the
Voxtral endpoint.

Modules: :mod:`.mkv` (Kinesis Video Streams' Matroska fragments, read and written with ebmlite),
:mod:`.consumer` (one call's two tracks through the endpoint, checkpointed; many calls per task),
:mod:`.sink` (transcript segments to EventBridge and DynamoDB), :mod:`.kvs`
(GetDataEndpoint/GetMedia), :mod:`.fake_kvs` (the local stand-in), :mod:`.service` (the ECS task's
process); ``voicectl connect-replay`` is :mod:`voice_devtools.connect_replay`. docs/connect.md draws
the data flow."""
