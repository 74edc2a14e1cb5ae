"""Bridge metrics as CloudWatch Embedded Metric Format (EMF) lines on stdout.

SageMaker sends a container's stdout to CloudWatch Logs (log group
`/aws/sagemaker/Endpoints/<name>`), where EMF lines become metrics
(https://docs.aws.amazon.com/AmazonCloudWatch/latest/monitoring/CloudWatch_Embedded_Metric_Format_Specification.html).
The lines are written by AWS's `aws-embedded-metrics` library with its stdout sink.

Values are aggregated in memory and written once per interval (one line, not one per stream):
counters as one sum, per-stream samples (TimeToFirstDelta, StreamSeconds) as value lists,
ActiveStreams as the highest count seen in the interval. Dimensions: EndpointName, VariantName.

| Metric | Unit | Meaning |
|------------------|--------------|--------------------------------------------------------------------|
| ActiveStreams | Count | most streams open at once during the interval | | StreamsStarted | Count |
streams relayed to vLLM | | StreamsRejected | Count | streams refused: MAX_STREAMS reached
(`server_busy`) | | TimeToFirstDelta | Milliseconds | from the stream's start to the first
`transcription.delta` | | StreamSeconds | Seconds | how long each stream lasted | | UpstreamErrors |
Count | vLLM refused a session, or closed/dropped one mid-stream | | KvCacheStreams | Count | live
streams vLLM's KV cache holds (its num_gpu_blocks // KV_BLOCKS_PER_STREAM), once known | |
StreamCapUsed | Percent | ActiveStreams as a share of this instance's stream cap (MAX_STREAMS, as
lowered): instances of different GPUs with different caps report on one scale | | Unauthorized |
Count | stream requests refused 401 for a missing or wrong bearer token (only with BRIDGE_TOKEN) | |
TaskProtected | Count | 1 if ECS task scale-in protection was on at any time in the interval, else 0
(only on ECS) | | TaskProtectionErrors | Count | requests to the ECS agent's task-protection
endpoint that failed (only on ECS) |
"""

from __future__ import annotations

from aws_embedded_metrics.environment.local_environment import LocalEnvironment
from aws_embedded_metrics.logger.metrics_logger import MetricsLogger


class BridgeMetrics:
    """In-memory counters flushed as EMF lines by `flush()`.

    Args:
        namespace: CloudWatch namespace (the CDK stack passes it; the execution role allows it).
        endpoint_name, variant_name: dimension values.
    """

    def __init__(self, namespace: str, endpoint_name: str, variant_name: str) -> None:
        self.namespace = namespace
        self.dimensions = {"EndpointName": endpoint_name, "VariantName": variant_name}
        self.active_streams = 0
        #: Live streams vLLM's KV cache holds, once read from vLLM (None before, or without
        #: KV_BLOCKS_PER_STREAM).
        self.kv_cache_streams: int | None = None
        #: The stream cap in force (MAX_STREAMS, lowered to what vLLM's KV cache holds); set by the
        #: server.
        self.stream_cap: int | None = None
        #: Whether the bridge checks a bearer token (Unauthorized is written) / manages ECS task
        #: scale-in protection (TaskProtected, TaskProtectionErrors are written); set by the server.
        self.checks_token = False
        self.manages_protection = False
        #: Whether ECS task scale-in protection is on now (set by `task_protection`).
        self.task_protected = False
        self._reset()
        self._environment = LocalEnvironment()  # stdout sink; no probing of EC2/Lambda metadata

    def _reset(self) -> None:
        self.max_active = self.active_streams
        self.started = 0
        self.rejected = 0
        self.upstream_errors = 0
        self.unauthorized_count = 0
        self.protection_errors = 0
        self.was_protected = self.task_protected
        self.first_delta_ms: list[float] = []
        self.stream_seconds: list[float] = []

    # Recording is plain attribute arithmetic: it runs on the relay's hot path.
    def stream_opened(self) -> None:
        """A stream was admitted and is being relayed."""
        self.started += 1
        self.active_streams += 1
        if self.active_streams > self.max_active:
            self.max_active = self.active_streams

    def stream_closed(self, seconds: float, first_delta_ms: float | None) -> None:
        """A relayed stream ended after `seconds`; `first_delta_ms` is its time to first delta, if
        any."""
        self.active_streams -= 1
        self.stream_seconds.append(seconds)
        if first_delta_ms is not None:
            self.first_delta_ms.append(first_delta_ms)

    def stream_rejected(self) -> None:
        """A stream was refused (MAX_STREAMS reached)."""
        self.rejected += 1

    def upstream_error(self) -> None:
        """vLLM refused a session or ended one mid-stream."""
        self.upstream_errors += 1

    def unauthorized(self) -> None:
        """A stream request was refused 401 (bearer token missing, malformed or wrong)."""
        self.unauthorized_count += 1

    def protection_changed(self, enabled: bool) -> None:
        """ECS task scale-in protection was turned on (True) or off (False)."""
        self.task_protected = enabled
        self.was_protected = self.was_protected or enabled

    def protection_error(self) -> None:
        """A request to the ECS agent's task-protection endpoint failed."""
        self.protection_errors += 1

    async def _resolve_environment(self) -> LocalEnvironment:
        return self._environment

    def flush(self) -> None:
        """Write the interval's metrics as EMF line(s) on stdout and start a new interval."""
        logger = MetricsLogger(self._resolve_environment)
        logger.set_namespace(self.namespace)
        logger.set_dimensions(self.dimensions, use_default=False)
        logger.put_metric("ActiveStreams", self.max_active, "Count")
        if self.stream_cap:
            cap_used = round(100 * self.max_active / self.stream_cap, 1)
            logger.put_metric("StreamCapUsed", cap_used, "Percent")
        logger.put_metric("StreamsStarted", self.started, "Count")
        logger.put_metric("StreamsRejected", self.rejected, "Count")
        logger.put_metric("UpstreamErrors", self.upstream_errors, "Count")
        if self.kv_cache_streams is not None:
            logger.put_metric("KvCacheStreams", self.kv_cache_streams, "Count")
        if self.checks_token:
            logger.put_metric("Unauthorized", self.unauthorized_count, "Count")
        if self.manages_protection:
            logger.put_metric("TaskProtected", int(self.was_protected), "Count")
            logger.put_metric("TaskProtectionErrors", self.protection_errors, "Count")
        for value in self.first_delta_ms:
            logger.put_metric("TimeToFirstDelta", round(value, 1), "Milliseconds")
        for value in self.stream_seconds:
            logger.put_metric("StreamSeconds", round(value, 3), "Seconds")
        # the library splits lists over 100 values (EMF's limit) into several lines
        logger.flush_sync()
        self._reset()
