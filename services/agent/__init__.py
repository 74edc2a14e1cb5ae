"""The voice agent that runs in AWS: a WebSocket server (:mod:`agent.server`) whose every
connection is one conversation, a Pipecat pipeline (:mod:`agent.session`): Silero VAD, Voxtral
speech to text, an LLM on Amazon Bedrock (:mod:`agent.llm`), Cartesia Sonic text to speech.

Configuration: :class:`contracts.agent_env.AgentEnv` (environment variables). Wire protocol:
:mod:`agent.protocol`. Metrics: :mod:`agent.metrics`. Run it with ``python -m agent``.
"""
