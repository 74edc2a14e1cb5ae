"""The bridge: relays SageMaker's bidirectional-streaming WebSocket to vLLM's realtime WebSocket.

Modules: `server` (the relay and `/ping`), `protocol` (vLLM realtime facts and client-frame checks),
`health` (cached vLLM health probe), `metrics` (CloudWatch EMF), `settings` (environment variables),
`entrypoint` (the container's entrypoint: starts vLLM and the bridge), `env_secrets` (secrets read
once and kept out of every process's environment). Run with `python -m bridge`.
"""
