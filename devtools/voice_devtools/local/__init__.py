"""Local stand-ins for the parts of the path that run in AWS, so the whole path runs on one machine.

- :mod:`voice_devtools.local.fake_vllm`: vLLM's realtime WebSocket server, protocol-faithful,
  scripted deltas timed as the real server times them (no GPU; `tests/vllm` checks it against the
  real server).
- :mod:`voice_devtools.local.real_vllm` and :mod:`voice_devtools.local.tiny_voxtral`: vLLM's real
  server (its CPU build, in `.venv-vllm`) on a tiny random-weight Voxtral Realtime checkpoint, for
  `make test-vllm` and `make local VLLM=real`.
- :mod:`voice_devtools.local.fake_sonic`: the Sonic Marketplace container's ``/invocations``
  (newline-delimited JSON audio).
- :mod:`voice_devtools.local.runtime`: the SageMaker runtime front door: SigV4, HTTP/2 with TLS, AWS
  event streams, in front of the containers; :mod:`voice_devtools.local.local_runtime` is its
  subcommand, ``voicectl local-runtime``.
- ``python -m voice_devtools.local`` (``make local``): all of them plus the real bridge, on
loopback.

Nothing here is used on the deployed path; it ships with the package so that ``make local`` and the
tests use the same code as a user running ``voicectl local-runtime`` from an installed project.
"""
