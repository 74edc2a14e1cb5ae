"""The voice agent's Fargate service: :class:`~constructs_lib.agent.service.VoiceAgentService`
(props and checks in :mod:`constructs_lib.agent.props`)."""
