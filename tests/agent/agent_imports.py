"""Print, as JSON, what the bot's process imports (as consumer_imports.py does for the Connect
consumer, whose import follower this reuses). Run as a script from the repository root with
``services`` on the path (the image's PYTHONPATH, /app/services, holds the bot and the bridge's task
protection module).

Passes: the bot's entry point and server; one session's services built for each target (Voxtral
on SageMaker and on the ECS target, Bedrock and an OpenAI-compatible LLM) and its pipeline built
(Silero VAD included); task protection on a (never called) ECS agent URI; then every import
statement of our loaded modules, followed (``consumer_imports._follow_imports``).

Output: ``{"modules": [our files, relative to the root], "distributions": [...], "failed": [...]}``.
"""

from __future__ import annotations

import asyncio
import importlib.metadata
import json
import os
import re
import sys
from pathlib import Path

#: Our top-level packages (from the root, and the bridge's from services/).
OURS = ("agent", "contracts", "voicectl", "voice_client", "constructs_lib", "config", "bridge")
BASE_ENV = {
    "AGENT_SONIC_ENDPOINT": "sonic-tts",
    "AGENT_SONIC_VOICE": "voice-1",
    "AWS_REGION": "us-east-1",
    "AWS_DEFAULT_REGION": "us-east-1",
    "AWS_ACCESS_KEY_ID": "AKIAIOSFODNN7EXAMPLE",
    "AWS_SECRET_ACCESS_KEY": "fake",
    "AWS_EC2_METADATA_DISABLED": "true",
    "ECS_AGENT_URI": "http://127.0.0.1:9/api/t",
}
TARGETS = [
    {"AGENT_VOXTRAL_ENDPOINT": "voxtral-realtime", "AGENT_LLM_MODEL_ID": "amazon.nova-lite-v1:0"},
    {
        "AGENT_VOXTRAL_URL": "ws://127.0.0.1:9/invocations-bidirectional-stream",
        "AGENT_LLM_URL": "http://127.0.0.1:9/v1",
        "AGENT_LLM_MODEL_ID": "m",
    },
]


async def _build(environ: dict[str, str]) -> None:
    import agent.__main__  # noqa: F401
    from agent.metrics import MetricsSink
    from agent.server import AgentServer, services_factory, task_protection
    from agent.session import AgentSession
    from contracts.agent_env import AgentEnv

    env = AgentEnv.from_env(environ)
    with open(os.devnull, "w") as devnull:  # noqa: ASYNC230 (devnull opens at once)
        metrics = MetricsSink(env.metric_dimensions, out=devnull)
        AgentServer(env, services_factory(env), metrics, protection=task_protection(env, metrics))
        services = await services_factory(env)()
        AgentSession(object(), services, metrics, max_session_s=60, idle_s=10).build()


def trace(root: Path) -> dict[str, list[str]]:
    sys.path.insert(
        0, str(Path(__file__).resolve().parents[1] / "unit" / "services" / "connect_consumer")
    )
    import consumer_imports

    consumer_imports.OURS = OURS
    for target in TARGETS:
        asyncio.run(_build({**BASE_ENV, **target}))
    failed: list[str] = []
    consumer_imports._follow_imports(failed)
    owners = importlib.metadata.packages_distributions()
    modules, distributions = set(), set()
    for name, module in list(sys.modules.items()):
        top = name.split(".")[0]
        if top not in OURS:
            distributions.update(
                re.sub(r"[-_.]+", "-", owner).lower() for owner in owners.get(top, [])
            )
        elif getattr(module, "__file__", None):
            modules.add(str(Path(module.__file__).resolve().relative_to(root)))
    distributions.discard("sagemaker-realtime-voice")  # this project, installed (editable) too
    return {"modules": sorted(modules), "distributions": sorted(distributions), "failed": failed}


if __name__ == "__main__":
    sys.path[:1] = [str(Path.cwd()), str(Path.cwd() / "services")]
    print(json.dumps(trace(Path.cwd().resolve()), indent=1))
