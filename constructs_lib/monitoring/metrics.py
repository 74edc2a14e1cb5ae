"""Metric factories: how to read each metric of an endpoint (namespace, name, dimensions, statistic,
period, unit).

"What the metric is" lives here; "what we alarm on" lives in
:mod:`constructs_lib.monitoring.alarms`, and the dashboard draws the same
:class:`aws_cdk.aws_cloudwatch.Metric` objects, so a namespace or dimension is spelled once.

Three sources, all with the dimensions ``EndpointName`` and ``VariantName``:

* ``AWS/SageMaker``: invocation metrics SageMaker publishes per variant every minute (SageMaker
  developer guide, "Metrics for monitoring Amazon SageMaker AI with Amazon CloudWatch", endpoint
  invocation metrics). ``ModelLatency`` and ``OverheadLatency`` are in **microseconds**.
* ``/aws/sagemaker/Endpoints``: instance metrics, one datapoint per instance per minute (same page,
  "endpoint instance metrics"). ``CPUUtilization`` runs from 0 to 100 x vCPUs, ``GPUUtilization``
  and ``GPUMemoryUtilization`` from 0 to 100 x GPUs; ``MemoryUtilization`` and ``DiskUtilization``
  from 0 to 100.
* The bridge's embedded-metric-format metrics (services/bridge/metrics.py), in the namespace the
  settings give, flushed once per minute per instance: ActiveStreams, StreamsStarted,
  StreamsRejected, UpstreamErrors (Count), TimeToFirstDelta (Milliseconds), StreamSeconds (Seconds).

Units are recorded in :data:`UNITS` for labels and documentation, but not set on the Metric objects:
a unit on an alarm's metric filters the datapoints, and a mismatch leaves the alarm in
INSUFFICIENT_DATA (PutMetricAlarm API reference, ``Unit``).
"""

from __future__ import annotations

from aws_cdk import Duration, aws_cloudwatch as cloudwatch

from constructs_lib.sagemaker_endpoint.props import VARIANT_NAME

#: Namespace of SageMaker's invocation metrics.
SAGEMAKER_NAMESPACE = "AWS/SageMaker"
#: Namespace of SageMaker's per-instance utilisation metrics of real-time endpoints.
ENDPOINT_INSTANCE_NAMESPACE = "/aws/sagemaker/Endpoints"
#: SageMaker publishes invocation and instance metrics at a 1-minute frequency; the bridge flushes
#: every 60 s (METRICS_INTERVAL_S). One minute is therefore the finest period that has a datapoint
#: in every window.
ONE_MINUTE = Duration.minutes(1)
#: ModelLatency and OverheadLatency are reported in microseconds; thresholds are set in
#: milliseconds.
MICROSECONDS_PER_MILLISECOND = 1000

#: CloudWatch unit of every metric this module reads (for labels and README; see the module
#: docstring).
UNITS: dict[str, str] = {
    "Invocations": "Count",
    "Invocation5XXErrors": "Count",
    "Invocation4XXErrors": "Count",
    "InvocationsPerInstance": "Count",
    "ModelLatency": "Microseconds",
    "OverheadLatency": "Microseconds",
    "CPUUtilization": "Percent",
    "MemoryUtilization": "Percent",
    "DiskUtilization": "Percent",
    "GPUUtilization": "Percent",
    "GPUMemoryUtilization": "Percent",
    "ActiveStreams": "Count",
    "StreamCapUsed": "Percent",
    "StreamsStarted": "Count",
    "StreamsRejected": "Count",
    "UpstreamErrors": "Count",
    "Unauthorized": "Count",
    "TaskProtected": "Count",
    "TaskProtectionErrors": "Count",
    "TimeToFirstDelta": "Milliseconds",
    "StreamSeconds": "Seconds",
}


def milliseconds_to_microseconds(milliseconds: float) -> float:
    """Convert a threshold in ms to the µs SageMaker reports ModelLatency and OverheadLatency in
    (500 -> 500000)."""
    return milliseconds * MICROSECONDS_PER_MILLISECOND


def _metric(
    namespace: str, name: str, dimensions: dict[str, str], statistic: str, period: Duration
) -> cloudwatch.Metric:
    # No label here: a labelled metric makes an alarm use the metric-math form (Metrics) instead of
    # the plain one.
    return cloudwatch.Metric(
        namespace=namespace,
        metric_name=name,
        dimensions_map=dict(dimensions),
        statistic=statistic,
        period=period,
    )


def default_label(metric: cloudwatch.Metric) -> str:
    """A graph label naming the metric, its statistic and its unit: ``ModelLatency (p90,
    Microseconds)``. A SampleCount is a number of datapoints whatever the metric's unit:
    ``CPUUtilization (SampleCount, Count)``."""
    unit = "Count" if metric.statistic == "SampleCount" else UNITS.get(metric.metric_name, "None")
    return f"{metric.metric_name} ({metric.statistic}, {unit})"


class EndpointMetrics:
    """SageMaker's own metrics of one endpoint variant (``AWS/SageMaker`` and
    ``/aws/sagemaker/Endpoints``): how to read each one, so that alarms, scaling policies and
    dashboards never spell a namespace or dimension by hand.

    :class:`~constructs_lib.sagemaker_endpoint.endpoint.RealtimeEndpoint` (and an imported endpoint)
    inherits these ``metric_*`` methods; use this class directly to read the metrics of an endpoint
    by name (a dashboard in another stack).

    Args:
        endpoint_name: the EndpointName dimension.
        variant_name: the VariantName dimension (default ``AllTraffic``).

    Every method returns a new :class:`aws_cdk.aws_cloudwatch.Metric`; ``period`` defaults to one
    minute.
    """

    def __init__(self, endpoint_name: str, variant_name: str = VARIANT_NAME) -> None:
        self.endpoint_name = endpoint_name
        self.variant_name = variant_name

    @property
    def metric_dimensions(self) -> dict[str, str]:
        """``{"EndpointName": ..., "VariantName": ...}``: the dimensions of every metric of the
        variant."""
        return {"EndpointName": self.endpoint_name, "VariantName": self.variant_name}

    def metric(
        self,
        metric_name: str,
        *,
        namespace: str = SAGEMAKER_NAMESPACE,
        statistic: str = "Sum",
        period: Duration = ONE_MINUTE,
    ) -> cloudwatch.Metric:
        """Any metric of this variant, by name and namespace, with the EndpointName and VariantName
        dimensions."""
        return _metric(namespace, metric_name, self.metric_dimensions, statistic, period)

    def _invocation(self, name: str, statistic: str, period: Duration) -> cloudwatch.Metric:
        return _metric(SAGEMAKER_NAMESPACE, name, self.metric_dimensions, statistic, period)

    def _instance(self, name: str, statistic: str, period: Duration) -> cloudwatch.Metric:
        return _metric(ENDPOINT_INSTANCE_NAMESPACE, name, self.metric_dimensions, statistic, period)

    # --- AWS/SageMaker ---------------------------------------------------------------------------

    def metric_invocations(self, period: Duration = ONE_MINUTE) -> cloudwatch.Metric:
        """Requests (for a bidirectional stream: sessions) sent to the variant; Sum, Count."""
        return self._invocation("Invocations", "Sum", period)

    def metric_invocations_per_instance(self, period: Duration = ONE_MINUTE) -> cloudwatch.Metric:
        """Invocations divided by the instance count; Sum, Count (the predefined scaling metric's
        source)."""
        return self._invocation("InvocationsPerInstance", "Sum", period)

    def metric_invocation_5xx_errors(self, period: Duration = ONE_MINUTE) -> cloudwatch.Metric:
        """Requests the model (or SageMaker) answered with a 5xx status; Sum, Count."""
        return self._invocation("Invocation5XXErrors", "Sum", period)

    def metric_invocation_5xx_error_rate(self, period: Duration = ONE_MINUTE) -> cloudwatch.Metric:
        """Fraction of requests answered with a 5xx status, 0 to 1: the Average of
        Invocation5XXErrors, since SageMaker sends 1 for each 5xx response and 0 otherwise
        (SageMaker developer guide, endpoint invocation metrics; the deployment-guardrails alarm
        examples use this Average as the error rate)."""
        return self._invocation("Invocation5XXErrors", "Average", period)

    def metric_invocation_4xx_errors(self, period: Duration = ONE_MINUTE) -> cloudwatch.Metric:
        """Requests answered with a 4xx status (bad request, throttling, ...); Sum, Count."""
        return self._invocation("Invocation4XXErrors", "Sum", period)

    def metric_model_latency(
        self, statistic: str = "p90", period: Duration = ONE_MINUTE
    ) -> cloudwatch.Metric:
        """Time the model container took to respond, seen from SageMaker; **microseconds**."""
        return self._invocation("ModelLatency", statistic, period)

    def metric_overhead_latency(
        self, statistic: str = "p90", period: Duration = ONE_MINUTE
    ) -> cloudwatch.Metric:
        """Time SageMaker added around the model's (authentication, routing, ...);
        **microseconds**."""
        return self._invocation("OverheadLatency", statistic, period)

    # --- /aws/sagemaker/Endpoints ----------------------------------------------------------------

    def metric_cpu_utilization(
        self, statistic: str = "Average", period: Duration = ONE_MINUTE
    ) -> cloudwatch.Metric:
        """CPU use of the containers: 0 to 100 x vCPUs of the instance; Percent."""
        return self._instance("CPUUtilization", statistic, period)

    def metric_memory_utilization(
        self, statistic: str = "Average", period: Duration = ONE_MINUTE
    ) -> cloudwatch.Metric:
        """Host memory used by the containers: 0 to 100; Percent."""
        return self._instance("MemoryUtilization", statistic, period)

    def metric_disk_utilization(
        self, statistic: str = "Average", period: Duration = ONE_MINUTE
    ) -> cloudwatch.Metric:
        """Disk space used by the containers: 0 to 100; Percent."""
        return self._instance("DiskUtilization", statistic, period)

    def metric_gpu_utilization(
        self, statistic: str = "Average", period: Duration = ONE_MINUTE
    ) -> cloudwatch.Metric:
        """GPU use of the containers: 0 to 100 x GPUs of the instance; Percent."""
        return self._instance("GPUUtilization", statistic, period)

    def metric_gpu_memory_utilization(
        self, statistic: str = "Average", period: Duration = ONE_MINUTE
    ) -> cloudwatch.Metric:
        """GPU memory used by the containers: 0 to 100 x GPUs of the instance; Percent."""
        return self._instance("GPUMemoryUtilization", statistic, period)

    def metric_instances_reporting(self, period: Duration = ONE_MINUTE) -> cloudwatch.Metric:
        """Running instances: the SampleCount of CPUUtilization per minute, since each instance
        sends one datapoint a minute. SageMaker publishes no instance-count metric for a real-time
        variant; no datapoint at all means no instance is running."""
        return self._instance("CPUUtilization", "SampleCount", period)


class BridgeMetrics:
    """The bridge's metrics of one endpoint variant (EMF, flushed once a minute per instance; values
    include zeros).

    Args:
        namespace: the CloudWatch namespace the container was given (METRICS_NAMESPACE).
        endpoint_name: the EndpointName dimension (ENDPOINT_NAME).
        variant_name: the VariantName dimension (VARIANT_NAME; default ``AllTraffic``).
    """

    def __init__(
        self, namespace: str, endpoint_name: str, variant_name: str = VARIANT_NAME
    ) -> None:
        self.namespace = namespace
        self.dimensions = {"EndpointName": endpoint_name, "VariantName": variant_name}

    def _bridge(self, name: str, statistic: str, period: Duration) -> cloudwatch.Metric:
        return _metric(self.namespace, name, self.dimensions, statistic, period)

    def metric_active_streams_per_instance(
        self, period: Duration = ONE_MINUTE
    ) -> cloudwatch.Metric:
        """Live streams per instance: the Average of ActiveStreams (each instance sends its highest
        count of the minute, zeros included, so the average over datapoints is the average over
        instances); Count."""
        return self._bridge("ActiveStreams", "Average", period)

    def metric_stream_cap_used_per_instance(
        self, period: Duration = ONE_MINUTE
    ) -> cloudwatch.Metric:
        """Live streams as a share of each instance's own stream cap, averaged over instances: the
        Average of StreamCapUsed; Percent. One scale for instances with different caps (instance
        pools of different GPUs)."""
        return self._bridge("StreamCapUsed", "Average", period)

    def metric_active_streams_busiest_instance(
        self, period: Duration = ONE_MINUTE
    ) -> cloudwatch.Metric:
        """Live streams on the busiest instance: the Maximum of ActiveStreams; Count."""
        return self._bridge("ActiveStreams", "Maximum", period)

    def metric_streams_started(self, period: Duration = ONE_MINUTE) -> cloudwatch.Metric:
        """Streams relayed to vLLM; Sum, Count."""
        return self._bridge("StreamsStarted", "Sum", period)

    def metric_streams_rejected(self, period: Duration = ONE_MINUTE) -> cloudwatch.Metric:
        """Streams refused because the instance was at its stream cap (``server_busy``); Sum,
        Count."""
        return self._bridge("StreamsRejected", "Sum", period)

    def metric_upstream_errors(self, period: Duration = ONE_MINUTE) -> cloudwatch.Metric:
        """vLLM refused a session, or closed or dropped one mid-stream; Sum, Count."""
        return self._bridge("UpstreamErrors", "Sum", period)

    def metric_unauthorized(self, period: Duration = ONE_MINUTE) -> cloudwatch.Metric:
        """Stream requests refused with HTTP 401 for a missing or wrong bearer token (written only
        when the bridge is given ``BRIDGE_TOKEN``: the ECS target); Sum, Count."""
        return self._bridge("Unauthorized", "Sum", period)

    def metric_task_protection_errors(self, period: Duration = ONE_MINUTE) -> cloudwatch.Metric:
        """Requests to the ECS agent's task-protection endpoint that failed (written only on ECS);
        Sum, Count."""
        return self._bridge("TaskProtectionErrors", "Sum", period)

    def metric_time_to_first_delta(
        self, statistic: str = "p90", period: Duration = ONE_MINUTE
    ) -> cloudwatch.Metric:
        """From a stream's start to its first ``transcription.delta``; **milliseconds**."""
        return self._bridge("TimeToFirstDelta", statistic, period)

    def metric_stream_seconds(
        self, statistic: str = "p90", period: Duration = ONE_MINUTE
    ) -> cloudwatch.Metric:
        """How long each stream lasted; seconds."""
        return self._bridge("StreamSeconds", statistic, period)
