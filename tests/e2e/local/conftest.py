"""Fixtures for the local SageMaker runtime tests: the front door (voice_devtools.local.runtime)
over HTTP/2 with TLS, the real bridge, the fake vLLM and the Sonic stand-in, all on 127.0.0.1, on an
event loop of their own in a thread, and the environment under which the clients call the front door
(the standard AWS variables, nothing faked inside)."""

from __future__ import annotations

import asyncio
import gc
import shutil
import subprocess
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from voice_devtools.local.bidi import StreamSettings
from voice_devtools.local.bounds import ServerBounds
from voice_devtools.local.fake_sonic import FakeSonic
from voice_devtools.local.fake_vllm import FakeVllm
from voice_devtools.local.runtime import LocalEndpoint, LocalRuntime
from voice_devtools.local.serving import listen_sockets, make_certificate, serve_asgi
from voice_devtools.local.sigv4 import LocalCredentials

ACCESS_KEY_ID = "AKIALOCALTEST0001"
SECRET_ACCESS_KEY = "local-test-secret"
REGION = "us-east-1"
VOXTRAL = "voxtral-realtime"
SONIC = "sonic-tts"
DELTAS = ("Hello ", "from ", "the ", "local ", "runtime. ")


@dataclass
class Stack:
    """The running servers and where they listen."""

    loop: asyncio.AbstractEventLoop
    vllm: (
        FakeVllm | None
    )  # None: the bridge is in front of a vLLM this stack did not start (tests/vllm)
    sonic: FakeSonic
    bridge: Any
    runtime: LocalRuntime
    url: str
    ca_file: Path
    bounds: ServerBounds  # the front door's limits and what it holds

    def call(self, coroutine: Any, timeout: float = 15.0) -> Any:
        """Run ``coroutine`` on the servers' loop and return its result."""
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result(timeout)

    def add_endpoint(self, spec: str) -> LocalEndpoint:
        endpoint = LocalEndpoint.parse(spec)
        self.runtime.endpoints.append(endpoint)
        return endpoint


class StackRunner:
    """Starts and stops a :class:`Stack` on a background event loop: the fake vLLM, or the bridge in
    front of the vLLM listening on ``vllm_port`` (vLLM's real server, tests/vllm)."""

    def __init__(
        self,
        tmp_path: Path,
        settings: StreamSettings,
        vllm_port: int | None = None,
        bridge_options: dict[str, Any] | None = None,
        bounds: ServerBounds | None = None,
    ) -> None:
        self.tmp_path = tmp_path
        self.bounds = bounds or ServerBounds()
        self.bridge_options = (
            bridge_options or {}
        )  # more bridge Settings (max_model_len for vLLM's real server)
        self.settings = settings
        self.vllm_port = vllm_port
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.shutdown: asyncio.Event | None = None
        self.server: asyncio.Future[None] | None = None
        self.stack: Stack | None = None

    def call(self, coroutine: Any, timeout: float = 15.0) -> Any:
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result(timeout)

    def start(self) -> Stack:
        from bridge.server import Bridge
        from contracts.bridge_env import BridgeEnvironment

        self.thread.start()
        tls = make_certificate(self.tmp_path / "tls")

        async def start() -> Stack:
            vllm = None if self.vllm_port else await FakeVllm(deltas=DELTAS, generate=True).start()
            vllm_port = self.vllm_port or vllm.port
            settings = BridgeEnvironment.defaults(
                host="127.0.0.1", port=0, vllm_port=vllm_port, drain_s=0, **self.bridge_options
            )
            bridge = await Bridge(settings).start()
            sonic = await FakeSonic().start()
            runtime = LocalRuntime(
                endpoints=[
                    LocalEndpoint.parse(f"{VOXTRAL}=ws://127.0.0.1:{bridge.port}"),
                    LocalEndpoint.parse(f"{SONIC}=http://127.0.0.1:{sonic.port}"),
                ],
                credentials=LocalCredentials(ACCESS_KEY_ID, SECRET_ACCESS_KEY),
                region=REGION,
                settings=self.settings,
            )
            sockets = listen_sockets("127.0.0.1", 0)
            port = sockets[0].getsockname()[1]
            self.shutdown = asyncio.Event()
            self.server = asyncio.ensure_future(
                serve_asgi(runtime, sockets, self.shutdown, tls=tls, bounds=self.bounds)
            )
            return Stack(
                self.loop,
                vllm,
                sonic,
                bridge,
                runtime,
                f"https://localhost:{port}",
                tls.ca_file,
                self.bounds,
            )

        self.stack = self.call(start())
        return self.stack

    def stop(self) -> None:
        async def stop() -> None:
            assert self.shutdown is not None and self.server is not None and self.stack is not None
            self.shutdown.set()
            # hypercorn waits for open connections to close; a client connection left in a pool
            # (awscrt keeps one per client) would hold it: cancel the server after the graceful
            # period.
            done, _ = await asyncio.wait({self.server}, timeout=2)
            if not done:
                self.server.cancel()
                await asyncio.gather(self.server, return_exceptions=True)
            await self.stack.sonic.stop()
            await self.stack.bridge.shutdown(drain_s=0)
            if self.stack.vllm is not None:
                await self.stack.vllm.stop()

        async def cancel_the_rest() -> None:
            # Connections a client left open (awscrt pools one per client) keep hypercorn's handlers
            # alive: end them here, so that nothing is left pending when the loop stops.
            rest = [task for task in asyncio.all_tasks() if task is not asyncio.current_task()]
            for task in rest:
                task.cancel()
            if rest:
                await asyncio.wait(rest, timeout=1)

        # A client connection to the front door that the test dropped without closing (a client or a
        # streamed response it no longer holds) is garbage in a reference cycle, its socket open
        # until the collector runs: the front door's TLS close then waits for the peer's
        # close_notify, which never comes, and the 2 s above and the 1 s below ran out in each such
        # test. Collected first, those sockets close and each close ends at once.
        gc.collect()
        try:
            self.call(stop(), timeout=30)
        finally:
            self.call(cancel_the_rest(), timeout=10)
            self.loop.call_soon_threadsafe(self.loop.stop)
            self.thread.join(5)
            self.loop.close()


@pytest.fixture
def stack_factory(tmp_path: Path) -> Iterator[Callable[..., Stack]]:
    """Start a stack with the given StreamSettings and front door bounds (at most one per test)."""
    runners: list[StackRunner] = []

    def start(settings: StreamSettings | None = None, bounds: ServerBounds | None = None) -> Stack:
        runner = StackRunner(tmp_path, settings or StreamSettings(), bounds=bounds)
        runners.append(runner)
        return runner.start()

    yield start
    for runner in runners:
        runner.stop()


#: The container's accept budget of the e2e stacks, in seconds. SageMaker gives a container 250 ms
#: to accept a stream's WebSocket (voice_devtools.local.bidi.ACCEPT_TIMEOUT_S); on a machine whose
#: cores all run the suite the bridge sometimes takes longer, which is a fact about the machine, not
#: about the path under test. The tests of that budget ask for it (``stream_settings`` parametrized
#: : with ``StreamSettings()``).
E2E_ACCEPT_S = 5.0


@pytest.fixture
def stream_settings() -> StreamSettings:
    """The front door's settings of the ``stack`` fixture: SageMaker's, with the accept budget
    E2E_ACCEPT_S."""
    return StreamSettings(accept_timeout_s=E2E_ACCEPT_S)


@pytest.fixture
def stack(stack_factory, stream_settings: StreamSettings) -> Stack:
    return stack_factory(stream_settings)


@pytest.fixture
def client_env(stack: Stack, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Stack:
    """The clients' environment for the front door: credentials, Region and CA bundle in the
    standard variables, no profile, no configuration file (the endpoint URL is left to each test:
    --endpoint-url or the variables)."""
    return front_door_env(stack, monkeypatch, tmp_path)


def front_door_env(stack: Stack, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Stack:
    """Set the clients' environment for `stack`'s front door (see `client_env`); return the
    stack."""
    for name in (
        "AWS_PROFILE",
        "AWS_DEFAULT_PROFILE",
        "AWS_SESSION_TOKEN",
        "AWS_ENDPOINT_URL",
        "AWS_ENDPOINT_URL_SAGEMAKER_RUNTIME",
        "AWS_ENDPOINT_URL_SAGEMAKER_RUNTIME_HTTP2",
    ):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-credentials"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", ACCESS_KEY_ID)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET_ACCESS_KEY)
    monkeypatch.setenv("AWS_DEFAULT_REGION", REGION)
    monkeypatch.setenv("AWS_CA_BUNDLE", str(stack.ca_file))
    return stack


RECORDED_SPEECH = Path("tests/clients/data/speech_22k_stereo.wav")
"""Speech when espeak-ng is missing (an espeak-ng recording)."""


def spoken_pcm16(text: str, directory: Path) -> bytes:
    """16 kHz PCM16 of ``text`` spoken by espeak-ng (else the committed recording, whatever
    ``text``)."""
    from voice_client.audio import load_pcm16

    espeak = shutil.which("espeak-ng")
    if espeak is None:
        return load_pcm16(RECORDED_SPEECH).data
    path = directory / "spoken.wav"
    subprocess.run(
        [espeak, "-v", "en-us", "-s", "160", "-w", str(path), text], check=True, timeout=30
    )
    return load_pcm16(path).data


@pytest.fixture(scope="module")
def utterance(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    """16 kHz PCM16 of a spoken sentence (espeak-ng; else the committed recording)."""
    return spoken_pcm16(
        "Hello from SageMaker streaming speech to text", tmp_path_factory.mktemp("speech")
    )


@pytest.fixture
def agent_factory(client_env: Stack) -> Iterator[Callable[..., Any]]:
    """Start the voice agent's bot (``agent_testkit.AgentRunner``) with the Bedrock stand-in in
    front of this stack, at most one per test: ``start(max_sessions=2)``. Sonic speaks in real
    time, so that a long answer is still streaming when a test interrupts it or leaves. Skipped
    without the pipecat extra."""
    pytest.importorskip("pipecat", reason="the pipecat extra is not installed (make agents-deps)")
    from contracts.agent_env import AgentEnv
    from tests.e2e.local.agent_testkit import AgentRunner
    from voice_devtools.local.fake_bedrock import FakeBedrock

    runners: list[AgentRunner] = []

    def start(max_sessions: int = 2) -> AgentRunner:
        client_env.sonic.pace = 1.0
        env = AgentEnv(
            sonic_endpoint=SONIC,
            sonic_voice="local-voice",
            voxtral_endpoint=VOXTRAL,
            llm_model_id="local.test-model",
            region=REGION,
            max_sessions=max_sessions,
            sagemaker_runtime_url=client_env.url,
            sagemaker_runtime_http2_url=client_env.url,
            host="127.0.0.1",
            port=0,
            metric_dimensions={"Deployment": "e2e"},
        )
        runners.append(AgentRunner(env, FakeBedrock(first_token_s=0.05, token_interval_s=0.02)))
        return runners[-1]

    yield start
    for runner in runners:
        runner.stop()


@pytest.fixture
def agent(agent_factory: Callable[..., Any]) -> Any:
    """The bot, at most two sessions at a time."""
    return agent_factory()
