"""``python -m agent``: read the configuration from the environment, serve until SIGTERM or
SIGINT (running conversations get :data:`agent.server.DRAIN_S` to finish)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import sys

from contracts.agent_env import AgentEnv, AgentEnvError


async def serve(env: AgentEnv) -> None:
    from agent.metrics import MetricsSink
    from agent.server import AgentServer, services_factory, task_protection

    metrics = MetricsSink(env.metric_dimensions)
    server = await AgentServer(
        env, services_factory(env), metrics, protection=task_protection(env, metrics)
    ).start()
    logging.getLogger("agent").info(
        "listening on %s:%d (health: GET /health; at most %d sessions)",
        env.host,
        server.port,
        env.max_sessions,
    )
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        with contextlib.suppress(NotImplementedError):
            loop.add_signal_handler(signum, stop.set)
    await stop.wait()
    await server.stop()


def main() -> int:
    logging.basicConfig(
        level=logging.INFO,
        stream=sys.stderr,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    try:
        env = AgentEnv.from_env(os.environ)
    except AgentEnvError as error:
        print(f"agent: {error}", file=sys.stderr)
        return 2
    asyncio.run(serve(env))
    return 0


if __name__ == "__main__":
    sys.exit(main())
