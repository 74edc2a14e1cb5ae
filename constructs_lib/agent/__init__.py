"""The voice agent's Fargate service: :class:`~constructs_lib.agent.service.VoiceAgentService`
(props and checks in :mod:`constructs_lib.agent.props`; its metrics, alarm rules and dashboard row
in :mod:`constructs_lib.agent.monitoring`)."""
