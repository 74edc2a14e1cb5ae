"""A cached probe of vLLM's `/health`, so that `GET /ping` never waits on vLLM.

SageMaker's health check: `GET /ping` must answer 200 only when the container can serve
(https://docs.aws.amazon.com/sagemaker/latest/dg/your-algorithms-inference-code.html, "How Your
Container Should Respond to Health Check (Ping) Requests"). vLLM answers `GET /health` with 200 once
its engine is up. The probe asks vLLM in the background every `interval_s`, each attempt bounded by
`timeout_s`, and `/ping` only reads the last answer: a dead or hanging vLLM cannot slow `/ping`.

Once vLLM is healthy the probe also reads, once, vLLM's own report of its KV cache: `num_gpu_blocks`
of the `vllm:cache_config_info` gauge on its Prometheus `/metrics` (vLLM 0.31.0 publishes every
CacheConfig field as a label of that gauge: vllm/v1/metrics/loggers.py `log_metrics_info`,
vllm/config/cache.py `metrics_info`). `/metrics` can be large and slow (vllm-project/vllm#44691
reports multi-megabyte payloads), so each read is bounded in size (`MAX_METRICS_BYTES`) and time
(`METRICS_TIMEOUT_S`); the first is made with the first healthy probe, and after a failed one the
rest run in their own task, `METRICS_RETRY_DELAYS_S` apart, never in the probe's loop; after the
last the probe gives up with one warning and the stream cap stays MAX_STREAMS.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
from collections.abc import Callable

from .protocol import VLLM_HEALTH_PATH, VLLM_MODELS_PATH, parse_served_model

log = logging.getLogger(__name__)

#: Seconds between two probes of vLLM's `/health`.
PROBE_INTERVAL_S = 0.5
#: Longest wait for one probe's answer, seconds (a hanging vLLM counts as unhealthy after this).
PROBE_TIMEOUT_S = 1.0
#: Failed probes in a row before a healthy vLLM counts as unhealthy. One slow answer (a busy event
#: loop in the bridge or in vLLM) must not take the instance out of service: SageMaker stops routing
#: to an instance whose `/ping` fails. A refused or dropped session (`mark_unhealthy`) counts at
#: once.
FAILURES_BEFORE_UNHEALTHY = 3
#: Largest HTTP answer (head and body) the probe reads, bytes; a larger one counts as a failed
#: probe. vLLM's `/health` body is empty and `/v1/models` a few hundred bytes per model.
MAX_RESPONSE_BYTES = 64 * 1024
#: vLLM's Prometheus metrics (histograms per engine): larger than the other answers.
VLLM_METRICS_PATH = "/metrics"
MAX_METRICS_BYTES = 8 * 1024 * 1024
#: Longest wait for one read of `/metrics`, seconds.
METRICS_TIMEOUT_S = 2.0
#: Pauses before the reads of `/metrics` that follow a failed one, seconds (doubling: about a minute
#: in all); after the last failure the probe gives up with one warning.
METRICS_RETRY_DELAYS_S = (1.0, 2.0, 4.0, 8.0, 16.0, 32.0)
_CACHE_CONFIG_INFO = re.compile(rb"^vllm:cache_config_info\{([^}]*)\}", re.MULTILINE)
_NUM_GPU_BLOCKS = re.compile(rb'(?:^|,)num_gpu_blocks="(\d+)"')
_BLOCK_SIZE = re.compile(rb'(?:^|,)block_size="(\d+)"')


def parse_num_gpu_blocks(metrics_body: bytes) -> int | None:
    """`num_gpu_blocks` (blocks of vLLM's KV cache) from the labels of `vllm:cache_config_info` in a
    Prometheus text exposition, or None when the gauge, the label or a positive number is
    missing."""
    info = _CACHE_CONFIG_INFO.search(metrics_body)
    blocks = _NUM_GPU_BLOCKS.search(info.group(1)) if info else None
    return int(blocks.group(1)) or None if blocks else None


def parse_block_size(metrics_body: bytes) -> int | None:
    """`block_size` (tokens per KV-cache block: 16 by default on a GPU, 128 on vLLM's CPU build)
    from the labels of `vllm:cache_config_info`, or None when missing."""
    info = _CACHE_CONFIG_INFO.search(metrics_body)
    size = _BLOCK_SIZE.search(info.group(1)) if info else None
    return int(size.group(1)) or None if size else None


async def http_get(
    host: str, port: int, path: str, timeout_s: float, max_bytes: int = MAX_RESPONSE_BYTES
) -> tuple[int, bytes]:
    """One HTTP/1.1 GET with `Connection: close`; returns (status code, body bytes).

    Our own 20 lines rather than an HTTP client library: the bridge needs two loopback GETs and no
    other HTTP client features, and this keeps the image's dependencies to websockets and EMF.

    Raises:
        OSError: connection refused or reset.
        TimeoutError: no complete answer within `timeout_s` seconds.
        ValueError: the answer is not HTTP, or is larger than `max_bytes`.
    """
    async with asyncio.timeout(timeout_s):
        reader, writer = await asyncio.open_connection(host, port)
        try:
            writer.write(
                f"GET {path} HTTP/1.1\r\nHost: {host}:{port}\r\nConnection: close\r\n\r\n".encode(
                    "ascii"
                )
            )
            response = bytearray()  # grows in place: no copy of what came before at each chunk
            while chunk := await reader.read(MAX_RESPONSE_BYTES):
                response += chunk
                if len(response) > max_bytes:
                    raise ValueError(f"the answer to GET {path} is larger than {max_bytes} bytes")
        finally:
            writer.close()
            with contextlib.suppress(OSError):
                await writer.wait_closed()
    head, _, body = bytes(response).partition(b"\r\n\r\n")
    status_line = head.split(b"\r\n", 1)[0].split()
    if (
        len(status_line) < 2
        or not status_line[0].startswith(b"HTTP/")
        or not status_line[1].isdigit()
    ):
        raise ValueError(f"not an HTTP response: {head[:80]!r}")
    if b"transfer-encoding: chunked" in head.lower():
        body = _unchunk(body)
    return int(status_line[1]), body


def _unchunk(body: bytes) -> bytes:
    out = bytearray()
    while body:
        size_line, _, rest = body.partition(b"\r\n")
        size = int(size_line.split(b";")[0], 16)
        if size == 0:
            break
        out += rest[:size]
        body = rest[size + 2 :]
    return bytes(out)


class HealthProbe:
    """Background probe of vLLM's `/health`; `healthy` is the cached answer (False until the first
    200).

    `healthy` turns True on the first 200 and False after `FAILURES_BEFORE_UNHEALTHY` failed probes
    in a row (about 1.5 s with a refused connection, 4.5 s with a hanging vLLM), or at once on
    `mark_unhealthy`.

    Args:
        host, port: where vLLM listens.
        served_model: the model name from the settings; when None, the probe learns it from vLLM's
            `/v1/models` after the first healthy answer (`served_model` then holds it).
    """

    def __init__(
        self,
        host: str,
        port: int,
        served_model: str | None = None,
        on_kv_cache: Callable[[int], None] | None = None,
    ) -> None:
        self.host = host
        self.port = port
        self.served_model = served_model
        #: Called once with vLLM's `num_gpu_blocks` when it is first read (None: not read at all).
        self.on_kv_cache = on_kv_cache
        self.num_gpu_blocks: int | None = None
        #: vLLM's `block_size` beside `num_gpu_blocks` (None: not reported), read before
        #: `on_kv_cache` is called.
        self.block_size: int | None = None
        self.healthy = False
        self.failures = 0  # failed probes in a row
        self._task: asyncio.Task[None] | None = None
        self._wake = asyncio.Event()
        #: Reads of `/metrics` made so far (successful or not).
        self.metrics_reads = 0
        self._kv_first: asyncio.Future[None] | None = None
        self._kv_retries: asyncio.Task[None] | None = None

    def start(self) -> None:
        """Start probing in the background (call from the running event loop)."""
        self._task = asyncio.create_task(self._run(), name="vllm-health-probe")

    async def stop(self) -> None:
        """Stop probing (and reading `/metrics`)."""
        for task in (self._task, self._kv_first, self._kv_retries):
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        self._task = self._kv_retries = None

    def mark_unhealthy(self) -> None:
        """Record that vLLM just failed (a refused or dropped session) and re-probe at once."""
        self.healthy = False
        self._wake.set()

    async def probe_once(self) -> bool:
        """Ask vLLM's `/health` once, update `healthy` (see the class docstring) and return this
        probe's answer."""
        try:
            status, _ = await http_get(self.host, self.port, VLLM_HEALTH_PATH, PROBE_TIMEOUT_S)
            healthy = status == 200
        except (OSError, TimeoutError, ValueError):
            healthy = False
        self.failures = 0 if healthy else self.failures + 1
        if healthy and not self.healthy:
            log.info("vLLM is ready")
            self.healthy = True
        elif self.healthy and self.failures >= FAILURES_BEFORE_UNHEALTHY:
            log.info("vLLM is not ready (%d failed probes in a row)", self.failures)
            self.healthy = False
        if healthy and self.served_model is None:
            await self._learn_served_model()
        if (
            healthy
            and self.on_kv_cache is not None
            and self.num_gpu_blocks is None
            and self._kv_retries is None
        ):
            if self._kv_first is None:  # one first read, however many probes await it
                self._kv_first = asyncio.ensure_future(self._first_kv_read())
            await asyncio.shield(self._kv_first)
        return healthy

    async def _first_kv_read(self) -> None:
        if await self._read_kv_cache() is not None:  # failed: retry in the background, backed off
            self._kv_retries = asyncio.create_task(self._retry_kv_cache(), name="vllm-metrics-read")

    async def _read_kv_cache(self) -> str | None:
        """Read vLLM's KV-cache size once; None when done (read, or not offered by this vLLM), else
        why it failed."""
        self.metrics_reads += 1
        try:
            status, body = await http_get(
                self.host, self.port, VLLM_METRICS_PATH, METRICS_TIMEOUT_S, MAX_METRICS_BYTES
            )
        except TimeoutError:
            return f"no complete answer within {METRICS_TIMEOUT_S:g} s"
        except (OSError, ValueError) as error:
            return str(error) or type(error).__name__
        if self.on_kv_cache is None:
            return None
        blocks = parse_num_gpu_blocks(body) if status == 200 else None
        if blocks is None:
            log.info(
                "vLLM's /metrics has no vllm:cache_config_info num_gpu_blocks (HTTP %d): stream "
                "cap unchecked",
                status,
            )
            self.on_kv_cache = None  # not offered by this vLLM: do not ask again
            return None
        self.num_gpu_blocks, self.block_size = blocks, parse_block_size(body)
        self.on_kv_cache(blocks)
        return None

    async def _retry_kv_cache(self) -> None:
        """Read `/metrics` again after each of `METRICS_RETRY_DELAYS_S`; give up with one warning
        after the last."""
        failure: str | None = "not read"
        for delay in METRICS_RETRY_DELAYS_S:
            await asyncio.sleep(delay)
            failure = await self._read_kv_cache()
            if failure is None:
                return
        log.warning(
            "gave up reading vLLM's KV-cache size from %s after %d attempts (last: %s): the "
            "stream cap stays MAX_STREAMS, unchecked against the KV cache",
            VLLM_METRICS_PATH,
            self.metrics_reads,
            failure,
        )
        self.on_kv_cache = None

    async def _learn_served_model(self) -> None:
        try:
            status, body = await http_get(self.host, self.port, VLLM_MODELS_PATH, PROBE_TIMEOUT_S)
        except (OSError, TimeoutError, ValueError):
            return
        if status == 200 and (model := parse_served_model(body)):
            self.served_model = model
            log.info("served model name from vLLM: %s", model)

    async def _run(self) -> None:
        while True:
            await self.probe_once()
            self._wake.clear()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(PROBE_INTERVAL_S):
                    await self._wake.wait()
