"""What is monitored and how, per endpoint, from the settings: used by the endpoint stacks (alarms, scaling) and by
the operations stack (dashboard), so both read the same thresholds."""

from __future__ import annotations

from config.settings import Settings, SonicSettings, VoxtralSettings
from constructs_lib.monitoring import BridgeAlarmThresholds, EndpointAlarmThresholds, MonitoredEndpoint
from constructs_lib.realtime_endpoint import VARIANT_NAME


def _thresholds(endpoint: VoxtralSettings | SonicSettings) -> EndpointAlarmThresholds:
    # Only Voxtral has rolling updates (Marketplace containers are excluded), hence a rollback alarm.
    rollback = endpoint.rollback_5xx_error_percent if isinstance(endpoint, VoxtralSettings) else None
    return EndpointAlarmThresholds(
        errors_5xx=endpoint.alarm_5xx_errors,
        errors_4xx=endpoint.alarm_4xx_errors,
        model_latency_p90_ms=endpoint.alarm_model_latency_p90_ms,
        overhead_latency_p90_ms=endpoint.alarm_overhead_latency_p90_ms,
        gpu_utilization_percent=endpoint.alarm_gpu_utilization_percent,
        gpu_memory_percent=endpoint.alarm_gpu_memory_percent,
        cpu_utilization_percent=endpoint.alarm_cpu_utilization_percent,
        memory_percent=endpoint.alarm_memory_percent,
        disk_percent=endpoint.alarm_disk_percent,
        rollback_5xx_error_percent=rollback,
    )


def voxtral_monitoring(settings: Settings) -> MonitoredEndpoint:
    """The Voxtral endpoint: SageMaker's metrics plus the bridge's (stream cap = vLLM max_num_seqs = MAX_STREAMS)."""
    v = settings.voxtral
    return MonitoredEndpoint(
        title="Voxtral speech to text",
        endpoint_name=v.endpoint_name,
        variant_name=VARIANT_NAME,
        instance_type=v.instance_type,
        thresholds=_thresholds(v),
        bridge=BridgeAlarmThresholds(
            namespace=v.metrics_namespace,
            stream_cap=v.max_num_seqs,
            time_to_first_delta_p90_ms=v.alarm_time_to_first_delta_p90_ms,
            active_streams_fraction=v.alarm_active_streams_fraction,
        ),
        min_instances=v.min_instances,
        max_instances=v.max_instances,
    )


def voxtral_streams_target(settings: Settings) -> float:
    """Live streams per instance autoscaling keeps Voxtral at: a fraction of the stream cap."""
    return settings.voxtral.scaling_target_fraction * settings.voxtral.max_num_seqs


def sonic_monitoring(settings: Settings) -> MonitoredEndpoint:
    """The Sonic endpoint: SageMaker's metrics only (the Marketplace container emits none of ours)."""
    s = settings.sonic
    return MonitoredEndpoint(
        title="Sonic text to speech",
        endpoint_name=s.endpoint_name,
        variant_name=VARIANT_NAME,
        instance_type=s.instance_type,
        thresholds=_thresholds(s),
        bridge=None,
        min_instances=s.min_instances,
        max_instances=s.max_instances,
    )
