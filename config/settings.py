"""Typed, validated settings of the app, parsed once from CDK context.

Every setting is a flat dotted key in ``cdk.json`` ``context`` (``voxtral.instance_type``) and can
be overridden on the command line with ``-c key=value``. :func:`load_settings` reads them all,
converts each to its field's type (:mod:`config.context`), checks every rule and raises one
:class:`SettingsError` that lists every problem (key, value, what is allowed) before any construct
is built. Constructs receive props built from these sections, never raw context.

Each section lists its fields and, right below them, how they map to the props of ``constructs_lib``
(``PROPS``) and what else is checked (``problems``). The rules that concern a construct's props are
the construct's own checks, run here with the problems named after the settings' keys; this module
adds only the rules of this app (Voxtral's GPU memory, Sonic's Marketplace package, the bridge's
drain time).

The defaults live here, in the dataclasses; ``cdk.json`` repeats them so users can see every setting
in one place (a test keeps the two in step).
"""

from __future__ import annotations

import dataclasses
import difflib
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Literal, TypeVar

from config import context as ctx
from config.models import (
    BRIDGE_CONTAINER_DIR,
    BRIDGE_DRAIN_S,
    SONIC_EXTRA_INSTANCE_TYPES,
    SONIC_INSTANCE_FAMILIES,
    SONIC_MODEL_PACKAGES,
    SONIC_SCALING_METRICS,
    VOXTRAL_DEFAULT_AMI,
    VOXTRAL_DEFAULT_REVISION,
    VOXTRAL_TRANSCRIPTION_DELAYS_MS,
    bridge_base_image,
    first_delta_floor_ms,
)
from constructs_lib.agent.props import AgentSizing, check_llm_model_id, check_llm_url
from constructs_lib.connect.props import (
    INSTANCE_ARN_PATTERN,
    KVS_ENDPOINT_REGIONS,
    ConnectTranscriptionProps,
)
from constructs_lib.ecs_service.props import (
    GpuCapacity,
    LoadBalancing,
    check_certificate_arn,
    check_container_port,
    check_gpu_instance_type,
    check_health_path,
    check_root_volume_gib,
    gpu_spec as ecs_gpu_spec,
)
from constructs_lib.facts import capacity, cuda_compat, instance_types
from constructs_lib.facts.names import (
    ECR_IMAGE_RE,
    REGION_RE,
    check_ecr_image_uri,
    check_email,
    check_endpoint_name,
    check_hub_token_key,
    check_kms_key_arn,
    check_model_package_arn,
    check_regional_arn,
    check_repository_id,
    check_revision,
    check_secret_arn,
)
from constructs_lib.monitoring.thresholds import BridgeAlarmThresholds, EndpointAlarmThresholds
from constructs_lib.network.props import DEFAULT_VPC_CIDR, ExistingVpc, PrivateNetworkProps
from constructs_lib.sagemaker_endpoint.props import (
    INFERENCE_AMI_VERSIONS,
    ProductionVariant,
    RollingUpdate,
    check_log_retention_days,
    check_model_data_s3_uri,
)
from constructs_lib.sagemaker_endpoint.scaling_props import (
    check_capacity,
    check_cooldown_s,
    check_target_value,
)
from constructs_lib.validation import Problems, show
from contracts.bridge_env import DEFAULT_METRICS_NAMESPACE
from contracts.model import DEFAULT_REPO_ID

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

Props = TypeVar("Props", bound="DataclassInstance")

#: The agent's default LLM: Claude Haiku 4.5 through the US system inference profile (Bedrock user
#: guide, "Supported foundation models": anthropic.claude-haiku-4-5-20251001-v1:0, streaming; it is
#: served through inference profiles). Another geography: agent.llm_model_id=eu.<model id> etc.
DEFAULT_LLM_MODEL_ID = "us.anthropic.claude-haiku-4-5-20251001-v1:0"
DEFAULT_SYSTEM_PROMPT = (
    "You are a helpful voice assistant. Answer in short, plain spoken sentences."
)
#: The Cartesia voice Cartesia's own API examples use (docs/deploy.md).
DEFAULT_VOICE = "6ccbfb76-1fc6-48f7-b71d-91ac6298247b"
#: Language codes Sonic accepts (the same list as voicectl.clients.sonic.SONIC_LANGUAGES).
SONIC_LANGUAGE_CODES = frozenset(
    [
        "ar",
        "bg",
        "bn",
        "cs",
        "da",
        "de",
        "el",
        "en",
        "es",
        "fi",
        "fr",
        "gu",
        "he",
        "hi",
        "hr",
        "hu",
        "id",
        "it",
        "ja",
        "ka",
        "kn",
        "ko",
        "ml",
        "mr",
        "ms",
        "nl",
        "no",
        "pa",
        "pl",
        "pt",
        "ro",
        "ru",
        "sk",
        "sv",
        "ta",
        "te",
        "th",
        "tl",
        "tr",
        "uk",
        "vi",
        "zh",
        "en-US",
        "de-DE",
        "es-MX",
        "fr-FR",
        "hi-IN",
        "it-IT",
        "ja-JP",
        "nl-NL",
        "pt-BR",
    ]
)


class SettingsError(ValueError):
    """One or more settings are invalid. ``problems`` lists one message per problem."""

    def __init__(self, problems: list[str]):
        self.problems = problems
        super().__init__(
            "Invalid settings (cdk.json context or -c key=value):\n"
            + "\n".join(f"  - {p}" for p in problems)
        )


@dataclass(frozen=True)
class EndpointSettings:
    """What every endpoint of the app has: switch, instance counts and timeouts, scaling range,
    alarm thresholds.

    Subclasses add their own keys and may give a field another default by declaring it again.
    """

    #: Deploy this service (voxtral.enabled also deploys the Artifacts stack: repository and model
    #: bucket).
    enabled: bool = True
    #: Where the service runs: a SageMaker real-time endpoint, or an ECS service on EC2 GPU
    #: instances behind a load balancer (docs/ecs.md).
    target: Literal["sagemaker", "ecs"] = "sagemaker"
    # Each endpoint's section gives its own name and instance type; these only complete the base
    # class.
    #: Stable SageMaker EndpointName.
    endpoint_name: str = "endpoint"
    #: Instance type of the endpoint's ProductionVariant.
    instance_type: str = "ml.g6.xlarge"
    #: Capacity fallback: up to 5 instance types in priority order, the first being instance_type
    #: (empty = instance_type only). Synthesized as the variant's InstancePools (no InstanceType
    #: then): when a type has no capacity (InsufficientCapacity) at creation, update or scale-out,
    #: SageMaker tries the next. Each type must pass every check of instance_type; GPU and CPU
    #: alarms scale by the fewest GPUs and vCPUs among them.
    instance_pools: list[str] = field(default_factory=list)
    #: VariantInstanceProvisionTimeoutInSeconds (300-3600): with instance_pools, seconds SageMaker
    #: may spend getting capacity across them (None = 1800 s with pools, SageMaker's default
    #: without); a rolling update's time limit adds it.
    instance_provision_timeout_s: int | None = None
    #: Instances at creation; must lie between min_instances and max_instances.
    initial_instance_count: int = 1
    #: ModelDataDownloadTimeoutInSeconds (60-3600).
    model_data_download_timeout_s: int = 1200
    #: ContainerStartupHealthCheckTimeoutInSeconds (60-3600); Voxtral's vLLM loads ~9 GB and
    #: captures CUDA graphs.
    container_startup_timeout_s: int = 1200
    #: KMS key of the ML storage volume; applied on EBS-backed instance types only (not on local
    #: NVMe types, where SageMaker refuses a KmsKeyId: docs/private-deployment.md, ML storage
    #: volumes).
    volume_kms_key_arn: str | None = None
    # Operations (docs/operations.md): autoscaling range and alarm thresholds.
    #: Autoscaling minimum (at least 1); min = max means a fixed size, no scalable target.
    min_instances: int = 1
    #: Autoscaling maximum.
    max_instances: int = 2
    #: Seconds between two scale-ins (Voxtral's must exceed the bridge's drain time, 25 s).
    scale_in_cooldown_s: int = 600
    #: Alarm (pages) above this many 5xx errors in 5 minutes.
    alarm_5xx_errors: int = 0
    #: Alarm above this many 4xx errors in 5 minutes.
    alarm_4xx_errors: int = 10
    #: ModelLatency p90 alarm threshold, ms (the alarm compares microseconds: x 1000).
    alarm_model_latency_p90_ms: float = 500.0
    #: OverheadLatency p90 alarm threshold, ms (x 1000 in the alarm).
    alarm_overhead_latency_p90_ms: float = 100.0
    #: GPU utilization alarm, percent of capacity, more than 0 and less than 100 (x GPUs in the
    #: alarm).
    alarm_gpu_utilization_percent: float = 90.0
    #: GPU memory alarm, percent of capacity (x GPUs in the alarm).
    alarm_gpu_memory_percent: float = 95.0
    #: CPU utilization alarm, percent of capacity, more than 0 and less than 100 (x vCPUs in the
    #: alarm).
    alarm_cpu_utilization_percent: float = 90.0
    #: Memory alarm, percent, more than 0 and less than 100 (the metric runs 0-100).
    alarm_memory_percent: float = 90.0
    #: Disk alarm, percent, more than 0 and less than 100 (the metric runs 0-100).
    alarm_disk_percent: float = 85.0

    #: Prop of ``constructs_lib`` -> the setting that gives it: builds the props (:meth:`props`) and
    #: names their problems after the keys. Props without an entry keep their default.
    PROPS: ClassVar[dict[str, str]] = {
        "endpoint_name": "endpoint_name",
        "instance_type": "instance_type",
        "instance_pools": "instance_pools",
        "provision_timeout_s": "instance_provision_timeout_s",
        "initial_instance_count": "initial_instance_count",
        "model_data_download_timeout_s": "model_data_download_timeout_s",
        "container_startup_timeout_s": "container_startup_timeout_s",
        "volume_kms_key_arn": "volume_kms_key_arn",
        "min_capacity": "min_instances",
        "max_capacity": "max_instances",
        "scale_in_cooldown_s": "scale_in_cooldown_s",
        "errors_5xx": "alarm_5xx_errors",
        "errors_4xx": "alarm_4xx_errors",
        "model_latency_p90_ms": "alarm_model_latency_p90_ms",
        "overhead_latency_p90_ms": "alarm_overhead_latency_p90_ms",
        "gpu_utilization_percent": "alarm_gpu_utilization_percent",
        "gpu_memory_percent": "alarm_gpu_memory_percent",
        "cpu_utilization_percent": "alarm_cpu_utilization_percent",
        "memory_percent": "alarm_memory_percent",
        "disk_percent": "alarm_disk_percent",
    }
    #: The scale-in cooldown must be longer than this many seconds, and why (see VoxtralSettings).
    SCALE_IN_FLOOR: ClassVar[tuple[int, str]] = (0, "")

    def props(self, cls: type[Props], **extra: Any) -> Props:
        """An instance of the props class ``cls`` from this section's settings (through
        :attr:`PROPS`), plus ``extra``."""
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(
            **{prop: self.value(key) for prop, key in self.PROPS.items() if prop in names}, **extra
        )

    def value(self, key: str) -> Any:
        """The value a prop gets from setting ``key``: the setting itself, or (subclasses) its
        resolved value."""
        return getattr(self, key)

    def variant(self) -> ProductionVariant:
        return self.props(ProductionVariant)

    def thresholds(self) -> EndpointAlarmThresholds:
        return self.props(EndpointAlarmThresholds)

    @property
    def autoscaled(self) -> bool:
        """min < max instances; min = max means a fixed size (also the way to change the instance
        type)."""
        return self.min_instances < self.max_instances

    def problems(self, section: str, region: str) -> list[str]:
        """Every problem of this section's settings, named ``<section>.<key>``."""
        p = Problems(name=lambda prop: f"{section}.{self.PROPS.get(prop, prop)}")
        check_endpoint_name(p, "endpoint_name", self.endpoint_name)
        self.variant().problems(p)
        if self.volume_kms_key_arn is not None:
            check_kms_key_arn(p, "volume_kms_key_arn", self.volume_kms_key_arn, region, alias=True)
        # initial_instance_count is SageMaker's; an ECS service starts with its minimum task count.
        initial = self.initial_instance_count if self.target == "sagemaker" else None
        check_capacity(p, self.min_instances, self.max_instances, initial)
        floor_s, reason = self.SCALE_IN_FLOOR
        check_cooldown_s(p, "scale_in_cooldown_s", self.scale_in_cooldown_s, floor_s, reason)
        self.thresholds().problems(p)
        self.app_problems(p, region)
        return list(p)

    def instance_specs(self, p: Problems) -> list[tuple[str, instance_types.InstanceSpec]]:
        """``(key, facts)`` of every instance type the endpoint may run: ``instance_type``, or each
        of ``instance_pools`` (named after that key in problems), so every rule sized by the
        instance holds for each. A type the catalogue lacks is left out with a problem recorded; one
        that is not a SageMaker type is left out silently (the variant's check reports it)."""
        key = "instance_pools" if self.instance_pools else "instance_type"
        specs = []
        for name in dict.fromkeys(
            self.variant().instance_types
        ):  # a duplicate is the variant's problem, once
            if instance_types.is_instance_type(name):
                spec = instance_types.check_catalogued(p, key, name)
                if spec is not None:
                    specs.append((key, spec))
        return specs

    def app_problems(self, p: Problems, region: str) -> None:
        """The rules of this app for the section (subclasses)."""


@dataclass(frozen=True)
class VoxtralSettings(EndpointSettings):
    """Speech to text: Voxtral on vLLM behind the bridge, on a SageMaker real-time endpoint."""

    endpoint_name: str = "voxtral-realtime"
    #: GPU instance type (default: one NVIDIA L4, 24 GiB, the cheapest per hour that serves the
    #: model); one GPU: a type with several fails synth (the endpoint runs one vLLM on one GPU).
    instance_type: str = "ml.g6.xlarge"
    #: Where the bridge image runs: a SageMaker real-time endpoint, or an ECS service on EC2 GPU
    #: instances behind a load balancer (the ``ecs.*`` settings; docs/ecs.md, "Choosing a target").
    target: Literal["sagemaker", "ecs"] = "sagemaker"
    #: Served model name (SM_VLLM_SERVED_MODEL_NAME); names the default weights prefix.
    model_id: str = DEFAULT_REPO_ID
    #: ``s3://bucket/prefix/`` holding the uncompressed weights; None = the prefix
    #: ``s3://<model bucket>/models/<model id>/<revision>/`` in the stack's model bucket.
    model_s3_uri: str | None = None
    #: A prebuilt bridge image in ECR (same Region); None = build ``container/`` as an asset (needs
    #: Docker at deploy) and copy it into the stack's repository.
    image_uri: str | None = None
    #: vLLM --max-model-len, tokens per session (12.5 tokens per second of audio: 45000 = 1 h).
    max_model_len: int = 45000
    #: Live streams per instance (vLLM --max-num-seqs and the bridge's MAX_STREAMS); ``auto`` = what
    #: the capacity model says one GPU of the instance type serves at max_model_len
    #: (constructs_lib/facts/capacity.py), for each type of instance_pools its own (each pool type
    #: whose cap differs runs a Model of its own: InstancePool ModelNameOverride); a number above
    #: what fits fails synth.
    max_num_seqs: int | Literal["auto"] = "auto"
    #: vLLM --gpu-memory-utilization: the share of GPU memory vLLM reserves at start.
    gpu_memory_utilization: float = 0.9
    #: vLLM --kv-cache-dtype: ``auto`` (the model's BF16) or ``fp8`` (half the KV bytes: twice the
    #: streams where the KV cache bounds them; refused on GPUs where vLLM 0.31.0 cannot run it for
    #: this model, every GPU but Hopper: constructs_lib/facts/capacity.py).
    kv_cache_dtype: Literal["auto", "fp8"] = "auto"
    #: Transcription delay, ms: how far the text runs behind the audio, a floor under the time to
    #: final transcript (longer is more accurate). A multiple of 80 from 80 to 1200, or 2400 (the
    #: model card's values; 480 recommended); None = the checkpoint's own (its tekken.json: 480).
    #: alarm_time_to_first_delta_p90_ms must be above it plus 82.5 ms. vLLM takes no flag for it:
    #: the bridge serves vLLM a copy of tekken.json with ``audio.transcription_delay_ms`` replaced
    #: (TRANSCRIPTION_DELAY_MS; docs/settings.md, "Transcription delay").
    transcription_delay_ms: int | None = None
    #: InferenceAmiVersion (NVIDIA driver and CUDA of the instances); checked at synth against the
    #: image's CUDA (constructs_lib/facts/cuda_compat.py): a driver that cannot run it is a settings
    #: error, an image whose tag names no CUDA a synth warning.
    inference_ami_version: Literal[INFERENCE_AMI_VERSIONS] = VOXTRAL_DEFAULT_AMI  # pyright: ignore[reportInvalidTypeForm] (built at run time for get_type_hints)
    #: CloudWatch namespace of the bridge's embedded-metric-format metrics.
    metrics_namespace: str = DEFAULT_METRICS_NAMESPACE
    #: Model hub commit the weights are staged from (40 hex digits; a branch or tag can move).
    model_revision: str = VOXTRAL_DEFAULT_REVISION
    #: Stage the weights during deploy (CodeBuild); None = on exactly when model_s3_uri is unset.
    stage_model: bool | None = None
    #: Secrets Manager secret (plain SecretString) holding the model hub access token, for gated
    #: repositories (the complete ARN, with its 6-character suffix).
    hf_token_secret_arn: str | None = None
    #: Customer managed KMS key the hub-token secret is encrypted with (None = the
    #: aws/secretsmanager key); the staging build may decrypt with it only through Secrets Manager.
    hf_token_secret_kms_key_arn: str | None = None
    max_instances: int = 4
    #: Target of live streams per instance as a fraction of the stream cap (max_num_seqs): 0.7 x 4 =
    #: 2.8 on one L4.
    scaling_target_fraction: float = 0.7
    #: Rolling update: instances replaced per step, percent of the variant's instance count (5-50);
    #: unset: one instance per step (RollingUpdatePolicy MaximumBatchSize INSTANCE_COUNT 1; how
    #: SageMaker rounds a percent below one instance is not documented).
    rollout_batch_percent: int | None = None
    #: Rolling update: baking period per step during which the rollback alarms are watched, seconds.
    rollout_wait_s: int = 600
    #: Rolling update: roll back when more than this percent of requests get a 5xx in 3 of 5
    #: minutes.
    rollback_5xx_error_percent: float = 5.0
    #: Above vLLM's up-front reservation (gpu_memory_utilization): vLLM holds that much from the
    #: start.
    alarm_gpu_memory_percent: float = 97.0
    #: The bridge's TimeToFirstDelta p90 alarm threshold, ms.
    alarm_time_to_first_delta_p90_ms: float = 2000.0
    #: Alarm when live streams per instance reach this fraction of the stream cap.
    alarm_active_streams_fraction: float = 0.9
    #: Not a setting: with target=ecs, the EC2 type the tasks run on (ecs.instance_type), filled in
    #: by load_settings, so that max_num_seqs=auto is sized by that GPU rather than by
    #: instance_type's.
    ecs_instance_type: str | None = field(default=None, metadata=ctx.DERIVED)

    PROPS: ClassVar[dict[str, str]] = {
        **EndpointSettings.PROPS,
        "inference_ami_version": "inference_ami_version",
        "rollback_5xx_error_percent": "rollback_5xx_error_percent",
        "batch_percent": "rollout_batch_percent",
        "wait_s": "rollout_wait_s",
        "namespace": "metrics_namespace",
        "stream_cap": "max_num_seqs",
        "time_to_first_delta_p90_ms": "alarm_time_to_first_delta_p90_ms",
        "active_streams_fraction": "alarm_active_streams_fraction",
    }
    #: The bridge drains open streams for DRAIN_S after SIGTERM: one drain must end before the next
    #: scale-in.
    SCALE_IN_FLOOR: ClassVar[tuple[int, str]] = (
        BRIDGE_DRAIN_S,
        f" (longer than the bridge's drain time, DRAIN_S={BRIDGE_DRAIN_S} s)",
    )

    def model_prefix_key(self) -> str:
        """Key prefix of the weights inside the stack's model bucket (no leading, one trailing
        ``/``). The revision is part of it, so a new revision is staged beside the old one and a
        running endpoint keeps its files."""
        return f"models/{self.model_id}/{self.model_revision}/"

    @property
    def stages_model(self) -> bool:
        """Whether the deploy stages the weights (``stage_model``, defaulting to "no model_s3_uri
        given")."""
        return self.model_s3_uri is None if self.stage_model is None else self.stage_model

    @property
    def sizing_instance_types(self) -> list[str]:
        """The instance types (SageMaker spelling) whose GPU sizes the stream cap: with
        ``target=ecs`` the ECS instance type (``ecs.instance_type``, as ``ml.<type>``: the same
        hardware), else ``instance_type`` or each of ``instance_pools``."""
        if self.target == "ecs" and self.ecs_instance_type:
            return [f"ml.{self.ecs_instance_type}"]
        return self.instance_pools or [self.instance_type]

    def capacity_of(self, instance_type: str) -> capacity.Capacity | None:
        """The capacity model's answer for one instance type (SageMaker spelling) at these settings,
        or None when the type is not a GPU type of the catalogue or max_model_len,
        gpu_memory_utilization or kv_cache_dtype is invalid (their own problems say why)."""
        if (
            self.max_model_len < 1
            or not 0.1 <= self.gpu_memory_utilization <= 0.98
            or self.kv_cache_dtype not in capacity.KV_CACHE_DTYPE_BYTES
        ):
            return None
        spec = instance_types.lookup(instance_type)
        if spec is None or not spec.gpus:
            return None
        return capacity.fit(
            spec,
            self.max_model_len,
            self.gpu_memory_utilization,
            kv_cache_dtype=self.kv_cache_dtype,
        )

    def capacity(self) -> capacity.Capacity | None:
        """The capacity model's answer for the instance type the service may run that serves the
        fewest streams (:attr:`sizing_instance_types`), or None when none is valid (their own
        problems say why)."""
        fits = [c for c in map(self.capacity_of, self.sizing_instance_types) if c is not None]
        return min(fits, key=lambda c: c.streams, default=None)

    def stream_cap_of(self, instance_type: str) -> int:
        """The stream cap of an instance of ``instance_type``: ``max_num_seqs``, or what ``auto``
        resolves to for that GPU (at least 1; a GPU that holds no stream is a settings problem of
        its own). With instance pools each pool type gets its own Model with its own cap
        (InstancePool ModelNameOverride)."""
        if self.max_num_seqs != "auto":
            return self.max_num_seqs
        fitted = self.capacity_of(instance_type)
        return max(1, fitted.streams) if fitted is not None else 1

    @property
    def stream_caps(self) -> dict[str, int]:
        """``{instance type: stream cap}`` for every type the service may run
        (:attr:`sizing_instance_types`), in priority order."""
        return {
            name: self.stream_cap_of(name) for name in dict.fromkeys(self.sizing_instance_types)
        }

    @property
    def streams_per_instance(self) -> int:
        """The smallest stream cap among the types the service may run (:attr:`stream_caps`): the
        cap of the one type, and with instance pools what the autoscaling target and the
        ActiveStreams alarm are sized by when they count streams (each pool's vLLM has its own
        cap)."""
        return min(self.stream_caps.values(), default=1)

    @property
    def caps_differ(self) -> bool:
        """Whether the types the service may run have different stream caps (instance pools of
        different GPUs)."""
        return len(set(self.stream_caps.values())) > 1

    def value(self, key: str) -> Any:
        return self.streams_per_instance if key == "max_num_seqs" else super().value(key)

    def stream_cap_warning(self) -> str | None:
        """A warning when an explicit ``max_num_seqs`` is above the compute cap of the GPU that
        sizes it (the KV cache holds the streams, but one GPU likely cannot decode that many in real
        time: every stream then falls behind), or None. Not an error: the compute cap is an estimate
        (constructs_lib/facts/capacity.py; measure with bench/capacity_bench.py). The Voxtral stacks
        print it as a CDK warning at synth."""
        fitted = self.capacity()
        if self.max_num_seqs == "auto" or fitted is None or fitted.compute_cap is None:
            return None
        if self.max_num_seqs <= fitted.compute_cap:
            return None
        on_ecs = self.target == "ecs" and self.ecs_instance_type
        where = (
            f"ecs.instance_type={show(self.ecs_instance_type)}"
            if on_ecs
            else f"instance type {show(fitted.instance_type)}"
        )
        return (
            f"voxtral.max_num_seqs={self.max_num_seqs} is above the compute cap of one "
            f"{fitted.gpu.name} ({where}): the capacity model estimates it decodes at most "
            f"{fitted.compute_cap} live stream(s) of max_model_len={self.max_model_len} in real "
            "time, so streams may fall behind under full load; set voxtral.max_num_seqs=auto, "
            "or measure with bench/capacity_bench.py (README 'Capacity')"
        )

    @property
    def streams_target(self) -> float:
        """Live streams per instance autoscaling keeps: a fraction of the stream cap (with caps that
        differ among the instance pools, of the smallest; the autoscaling then tracks
        :attr:`stream_cap_used_target` instead)."""
        return self.scaling_target_fraction * self.streams_per_instance

    @property
    def stream_cap_used_target(self) -> float:
        """Percent of each instance's own stream cap autoscaling keeps (the bridge's StreamCapUsed):
        what it tracks when the instance pools' caps differ, so every GPU is filled to the same
        share of what it serves."""
        return round(self.scaling_target_fraction * 100, 6)

    def bridge_thresholds(self) -> BridgeAlarmThresholds:
        return self.props(BridgeAlarmThresholds, caps_differ=self.caps_differ)

    def image_compatibility(
        self, container_dir: Path = BRIDGE_CONTAINER_DIR
    ) -> cuda_compat.Compatibility:
        """Whether the image's CUDA runs on ``inference_ami_version``'s driver
        (constructs_lib/facts/cuda_compat.py): the image is ``image_uri`` when set, else the base
        image of ``container_dir/Dockerfile`` (the asset built at synth). INCOMPATIBLE is a settings
        problem; UNKNOWN (a tag that names no CUDA) and the compatibility modes are warnings of the
        Voxtral stack."""
        if self.image_uri is not None:
            image, source = self.image_uri, "voxtral.image_uri"
        else:
            image, source = (
                bridge_base_image(container_dir),
                f"the base image of {container_dir.name}/Dockerfile",
            )
        return cuda_compat.check_image(
            image, source, self.inference_ami_version, self.instance_type
        )

    def rolling_update(self) -> RollingUpdate:
        return self.props(RollingUpdate)

    def app_problems(self, p: Problems, region: str) -> None:
        self._model_problems(p, region)
        self._operations_problems(p)

    def _model_problems(self, p: Problems, region: str) -> None:
        """The model, its weights and image, and whether one GPU of the instance holds it."""
        start = len(p)
        specs = self.instance_specs(p)
        for key, spec in specs:
            if spec.gpus == 0:
                p.add(
                    key,
                    spec.name,
                    f"has no GPU; vLLM needs one (GPU types: {instance_types.gpu_families()})",
                )
            elif spec.gpus > 1 and self.target != "ecs":
                # The container starts one vLLM without tensor parallelism: it uses one GPU. The GPU
                # alarms scale by the instance's GPUs (instance_types.alarm_capacity), so they would
                # also never fire.
                single = [
                    name
                    for name, other in instance_types.CATALOGUE.items()
                    if other.gpu_model == spec.gpu_model and other.gpus == 1
                ]
                choice = f"a one-GPU type ({', '.join(single)})" if single else "a one-GPU type"
                p.add(
                    key,
                    spec.name,
                    f"has {spec.gpus} GPUs; the endpoint runs one vLLM on one GPU, so "
                    f"{spec.gpus - 1} would idle (billed, and the GPU alarms, scaled by "
                    f"{spec.gpus} GPUs, could never fire): choose {choice}, ranked by voicectl "
                    "capacity --compare, or voxtral.target=ecs, which runs one task per GPU",
                )
        check_repository_id(p, "model_id", self.model_id)
        if self.model_s3_uri is not None:
            check_model_data_s3_uri(p, "model_s3_uri", self.model_s3_uri)
        if self.image_uri is not None:
            check_ecr_image_uri(p, "image_uri", self.image_uri, region)
        compatibility = self.image_compatibility()
        if compatibility.verdict is cuda_compat.Verdict.INCOMPATIBLE:
            p.add("inference_ami_version", self.inference_ami_version, compatibility.reason)
        if self.max_model_len < 1:
            p.add(
                "max_model_len",
                self.max_model_len,
                "must be a positive whole number (tokens; 12.5 per second of audio)",
            )
        if not 0.1 <= self.gpu_memory_utilization <= 0.98:
            p.add(
                "gpu_memory_utilization",
                self.gpu_memory_utilization,
                "must be between 0.1 and 0.98",
            )
        check_revision(p, "model_revision", self.model_revision)
        if self.stage_model and self.model_s3_uri is not None:
            p.note(
                f"{p.ref('stage_model', True)} with {p.ref('model_s3_uri', self.model_s3_uri)}: "
                "staging writes into the stack's model bucket; unset voxtral.model_s3_uri or "
                "set voxtral.stage_model=false"
            )
        if self.hf_token_secret_arn is not None:
            check_secret_arn(p, "hf_token_secret_arn", self.hf_token_secret_arn, region)
        if self.hf_token_secret_kms_key_arn is not None:
            check_hub_token_key(
                p,
                "hf_token_secret_kms_key_arn",
                self.hf_token_secret_kms_key_arn,
                "hf_token_secret_arn",
                self.hf_token_secret_arn is not None,
                region,
            )
        self.bridge_thresholds().problems(p)
        self._delay_problems(p)
        if self.kv_cache_dtype not in capacity.KV_CACHE_DTYPE_BYTES:
            p.add(
                "kv_cache_dtype",
                self.kv_cache_dtype,
                "must be 'auto' (the model's BF16) or 'fp8' (vLLM --kv-cache-dtype)",
            )
        elif self.kv_cache_dtype == "fp8" and self.target != "ecs":
            # Every type the service may run: the ECS type with target=ecs (EcsSettings names it),
            # else each pool.
            for key, spec in specs:
                self._fp8_problem(p, key, spec.name, spec.gpu_model)
        # The capacity model only when every value it depends on passed its checks; for each type
        # the endpoint may run, at that type's own stream cap (with pools, each pool type's Model
        # has its own). With target=ecs the ECS instance type is what the tasks run on; EcsSettings
        # checks it instead.
        for key, spec in specs if len(p) == start and self.target != "ecs" else ():
            if not spec.gpus:
                continue
            fitted = self.capacity_of(spec.name)
            if fitted is None or fitted.fit >= self.stream_cap_of(spec.name):
                continue
            asked = self.max_num_seqs
            advice = (
                "lower max_num_seqs or max_model_len, choose a GPU with more memory, or set "
                "voxtral.max_num_seqs=auto"
                if asked != "auto"
                else "raise gpu_memory_utilization, lower max_model_len, or choose a GPU with "
                "more memory"
            )
            p.note(
                f"{p.ref(key, spec.name)} with {p.ref('max_model_len', self.max_model_len)} and "
                f"{p.ref('stream_cap', asked)}: one {spec.gpu_model} "
                f"({fitted.gpu.memory_bytes / 2**30:.1f} GiB, {self.gpu_memory_utilization:g} of "
                f"it for vLLM: {fitted.budget_bytes / 2**30:.1f} GiB) holds the weights "
                f"({fitted.weight_bytes / 2**30:.1f} GiB), activations and CUDA graphs "
                f"({fitted.overhead_bytes / 2**30:.1f} GiB) and KV cache "
                f"({fitted.kv_bytes / 2**30:.1f} GiB) for at most {fitted.fit} live stream(s) of "
                f"that length ({fitted.stream_kv_bytes / 2**30:.2f} GiB of KV each); {advice} "
                "(capacity model: constructs_lib/facts/capacity.py, README 'Capacity')"
            )

    def _delay_problems(self, p: Problems) -> None:
        """A transcription delay the model was not trained for, or one whose first delta comes
        later than the TimeToFirstDelta alarm allows (the alarm would fire on every stream)."""
        delay = self.transcription_delay_ms
        if delay is None:
            return
        if delay not in VOXTRAL_TRANSCRIPTION_DELAYS_MS:
            p.add(
                "transcription_delay_ms",
                delay,
                "must be a multiple of 80 from 80 to 1200, or 2400 (ms: the delays the Voxtral "
                "Realtime model card allows, 480 recommended), or null for the checkpoint's own",
            )
            return
        floor_ms = first_delta_floor_ms(delay)
        threshold = self.alarm_time_to_first_delta_p90_ms
        if threshold <= floor_ms:
            p.note(
                f"{p.ref('time_to_first_delta_p90_ms', threshold)} with "
                f"{p.ref('transcription_delay_ms', delay)}: vLLM sends a stream's first "
                f"delta only after {floor_ms:g} ms of audio (the delay, one 80 ms token and "
                "the 2.5 ms look-ahead), so the alarm would fire on every stream; raise the "
                f"threshold above {floor_ms:g} ms, leaving room for the prefill and the "
                "callers' chunks, or choose a shorter delay"
            )

    def _fp8_problem(self, p: Problems, key: str, name: str, gpu_model: str) -> None:
        """``kv_cache_dtype=fp8`` on a GPU where vLLM 0.31.0 cannot run it for this model (the
        reason names the vLLM files: constructs_lib/facts/capacity.py ``fp8_kv_cache_problem``)."""
        reason = capacity.fp8_kv_cache_problem(gpu_model)
        if reason is not None:
            p.note(
                f"{p.ref('kv_cache_dtype', 'fp8')} with {p.ref(key, name)}: {reason}; set "
                "voxtral.kv_cache_dtype=auto, or choose a one-GPU Hopper type (ml.p5.4xlarge)"
            )

    def _operations_problems(self, p: Problems) -> None:
        """Rolling updates, the scaling target and the alarms that depend on vLLM's settings."""
        self.rolling_update().problems(p)
        if not 0 < self.scaling_target_fraction <= 1:
            p.add(
                "scaling_target_fraction",
                self.scaling_target_fraction,
                "must be more than 0 and at most 1 (live "
                f"streams per instance as a fraction of {p.name('stream_cap')})",
            )
        elif (
            0 < self.alarm_active_streams_fraction <= 1
            and self.alarm_active_streams_fraction <= self.scaling_target_fraction
        ):
            p.add(
                "active_streams_fraction",
                self.alarm_active_streams_fraction,
                "must be more than "
                f"{p.ref('scaling_target_fraction', self.scaling_target_fraction)} and at most "
                "1, or the alarm fires whenever autoscaling holds its target",
            )
        reserved = self.gpu_memory_utilization * 100
        if 0 < self.alarm_gpu_memory_percent < 100 and self.alarm_gpu_memory_percent <= reserved:
            p.add(
                "gpu_memory_percent",
                self.alarm_gpu_memory_percent,
                f"must be above {p.name('gpu_memory_utilization')} x 100 = {reserved:g}: vLLM "
                "reserves that much GPU memory at start, so the alarm would always fire",
            )


@dataclass(frozen=True)
class SonicSettings(EndpointSettings):
    """Text to speech: Cartesia Sonic 3.6 from its AWS Marketplace model package. No rollout keys:
    Marketplace containers are excluded from SageMaker's deployment guardrails ("Exclusions" in the
    SageMaker developer guide)."""

    endpoint_name: str = "sonic-tts"
    #: An instance type the Marketplace package supports: ml.g6e.xlarge or larger, ml.g7e.2xlarge or
    #: larger, ml.g7.2xlarge or larger, ml.p5.48xlarge, ml.p5en.48xlarge.
    instance_type: str = "ml.g6e.2xlarge"
    #: The Sonic model package (in the stack's Region); None = the package of the stack's Region
    #: from SONIC_MODEL_PACKAGES (us-east-1 only: required in any other Region).
    model_package_arn: str | None = None
    container_startup_timeout_s: int = 900
    #: What target tracking holds per instance: invocations per minute, or requests in flight (the
    #: high-resolution ConcurrentRequestsPerModel).
    scaling_metric: Literal[tuple(SONIC_SCALING_METRICS)] = "invocations_per_instance"  # pyright: ignore[reportInvalidTypeForm] (built at run time for get_type_hints)
    #: Target per instance: invocations per minute, or concurrent requests, depending on
    #: scaling_metric.
    scaling_target: float = 60.0
    alarm_model_latency_p90_ms: float = 3000.0
    #: Where Sonic runs: a SageMaker endpoint from the Marketplace model package, or an ECS service
    #: of the container a Cartesia licence provides (sonic.image_uri; docs/ecs.md, "Sonic on ECS").
    target: Literal["sagemaker", "ecs"] = "sagemaker"
    #: With target=ecs (required then): the licensed Sonic container in ECR (it is not public).
    image_uri: str | None = None
    #: With target=ecs: the port the container serves on (1-65535).
    container_port: int = 8080
    #: With target=ecs: the readiness path (200 = can serve): starts with /, no query.
    health_path: str = "/ping"
    #: With target=ecs: EC2 instance type with an NVIDIA GPU (no ``ml.``); one task per GPU. The
    #: task range is min_instances-max_instances; Spot, placement, root volume and certificate are
    #: the ecs.* settings.
    ecs_instance_type: str = "g6e.xlarge"

    def app_problems(self, p: Problems, region: str) -> None:
        if self.target == "ecs":
            self._ecs_problems(p, region)
            return
        for key, spec in self.instance_specs(p):
            if not (
                spec.family in SONIC_INSTANCE_FAMILIES or spec.name in SONIC_EXTRA_INSTANCE_TYPES
            ):
                p.add(
                    key,
                    spec.name,
                    "the Sonic 3.6 model package supports ml.g6e.xlarge or larger, "
                    "ml.g7e.2xlarge or larger, ml.g7.2xlarge or larger, ml.p5.48xlarge and "
                    "ml.p5en.48xlarge",
                )
        if self.model_package_arn is None:
            if region not in SONIC_MODEL_PACKAGES:
                p.note(
                    f"{p.ref('model_package_arn', None)} with region={show(region)}: the Sonic "
                    f"model package ARN is known only for {', '.join(SONIC_MODEL_PACKAGES)}; set "
                    "sonic.model_package_arn to the ARN from the Marketplace listing for your "
                    "region, or set sonic.enabled=false"
                )
        else:
            check_model_package_arn(p, "model_package_arn", self.model_package_arn, region)
        check_target_value(
            p,
            "scaling_target",
            self.scaling_target,
            "per instance: invocations per minute, or concurrent requests",
        )

    def _ecs_problems(self, p: Problems, region: str) -> None:
        """Sonic on ECS: the licensed image, its port and health path, a GPU instance type,
        requests-based scaling. The Marketplace package and its instance families do not apply."""
        if self.image_uri is None:
            p.add(
                "image_uri",
                None,
                "must be set with sonic.target='ecs': the Sonic container your Cartesia licence "
                "provides, in ECR (it is not public; README 'Sonic on ECS')",
            )
        else:
            check_regional_arn(
                p,
                "image_uri",
                self.image_uri,
                ECR_IMAGE_RE,
                "a private ECR image "
                "'<account>.dkr.ecr.<region>.amazonaws.com/<repository>:<tag>' or "
                "'...@sha256:<digest>' (copy the licensed image into your account's ECR)",
                region,
                "image",
                "; the tasks pull it through the Region's ECR endpoints",
            )
        check_container_port(p, "container_port", self.container_port)
        check_health_path(p, "health_path", self.health_path)
        check_gpu_instance_type(p, "ecs_instance_type", self.ecs_instance_type)
        if self.scaling_metric != "invocations_per_instance":
            p.add(
                "scaling_metric",
                self.scaling_metric,
                "must be 'invocations_per_instance' with sonic.target='ecs' (the load balancer's "
                "requests per task per minute; it has no count of requests in flight)",
            )
        check_target_value(p, "scaling_target", self.scaling_target, "requests per task per minute")

    def ecs_capacity(self, ecs: EcsSettings) -> GpuCapacity:
        """The GPU capacity of Sonic's ECS service: its own instance type and task range, the shared
        ecs.* rest."""
        return GpuCapacity(
            instance_type=self.ecs_instance_type,
            spot=ecs.capacity == "spot",
            min_tasks=self.min_instances,
            max_tasks=self.max_instances,
            single_az=ecs.placement == "single_az",
            root_volume_gib=ecs.root_volume_gib,
        )

    def ecs_load_balancing(self, ecs: EcsSettings) -> LoadBalancing:
        """Always internal, with ecs.certificate_arn for HTTPS: the bearer token is checked by our
        bridge, which Sonic's container does not have, so its load balancer takes callers from the
        caller CIDRs only."""
        return LoadBalancing(
            internet_facing=False, certificate_arn=ecs.certificate_arn, require_token=False
        )


@dataclass(frozen=True)
class EcsSettings:
    """The self-managed GPU target (``voxtral.target=ecs``): an ECS service on EC2 GPU instances
    behind an Application Load Balancer. Used only by a section whose target is ``ecs``."""

    #: EC2 instance type with an NVIDIA GPU (no ``ml.``): g6.xlarge ... g6e.*; one task per GPU.
    instance_type: str = "g6.xlarge"
    #: On-Demand or Spot instances.
    capacity: Literal["on_demand", "spot"] = "on_demand"
    #: Service task range; at least two by default, so one task serves while another is replaced.
    min_tasks: int = 2
    #: Service task maximum (at least min_tasks).
    max_tasks: int = 4
    #: ``multi_az`` spreads instances over the VPC's zones; ``single_az`` puts them in one zone in a
    #: cluster placement group (shortest network path, no zone redundancy).
    placement: Literal["multi_az", "single_az"] = "multi_az"
    #: Encrypted gp3 root volume of each instance, GiB (the image and the weights' host copy).
    root_volume_gib: int = 200
    #: ``internet_facing`` needs certificate_arn and require_token=true, and public network mode.
    load_balancer: Literal["internal", "internet_facing"] = "internal"
    #: ACM certificate for an HTTPS listener; required for an internet-facing load balancer.
    certificate_arn: str | None = None
    #: Callers send a bearer token (a Secrets Manager secret the stack creates); required when
    #: internet-facing.
    require_token: bool = True

    #: Prop -> the setting that gives it (booleans of the props are spelled as choices here).
    PROPS: ClassVar[dict[str, str]] = {
        "instance_type": "instance_type",
        "spot": "capacity",
        "min_tasks": "min_tasks",
        "max_tasks": "max_tasks",
        "single_az": "placement",
        "root_volume_gib": "root_volume_gib",
        "internet_facing": "load_balancer",
        "certificate_arn": "certificate_arn",
        "require_token": "require_token",
    }

    def capacity_props(self) -> GpuCapacity:
        return GpuCapacity(
            instance_type=self.instance_type,
            spot=self.capacity == "spot",
            min_tasks=self.min_tasks,
            max_tasks=self.max_tasks,
            single_az=self.placement == "single_az",
            root_volume_gib=self.root_volume_gib,
        )

    def load_balancing(self) -> LoadBalancing:
        return LoadBalancing(
            internet_facing=self.load_balancer == "internet_facing",
            certificate_arn=self.certificate_arn,
            require_token=self.require_token,
        )

    def problems(self, region: str, voxtral: VoxtralSettings) -> list[str]:
        """Every problem of the ECS settings, named ``ecs.<key>``; choices are shown as the settings
        spell them."""
        spelled = {
            "internet_facing": ("load_balancer", "internet_facing"),
            "spot": ("capacity", "spot"),
            "single_az": ("placement", "single_az"),
        }

        class EcsProblems(Problems):
            def ref(self, prop: str, value: Any) -> str:
                key, choice = spelled.get(prop, (None, None))
                return (
                    f"ecs.{key}={show(choice)}"
                    if key and value is True
                    else super().ref(prop, value)
                )

        p = EcsProblems(name=lambda prop: f"ecs.{self.PROPS.get(prop, prop)}")
        self.capacity_props().problems(p)
        self.load_balancing().problems(p, region)
        spec = ecs_gpu_spec(self.instance_type)
        if spec is not None and voxtral.kv_cache_dtype == "fp8":
            reason = capacity.fp8_kv_cache_problem(spec.gpu_model)
            if reason is not None:
                p.note(
                    "voxtral.kv_cache_dtype='fp8' with "
                    f"ecs.instance_type={show(self.instance_type)}: {reason}; set "
                    "voxtral.kv_cache_dtype=auto, or choose a Hopper GPU (p5.*)"
                )
        if (
            spec is not None
            and len(p) == 0
            and voxtral.kv_cache_dtype in capacity.KV_CACHE_DTYPE_BYTES
        ):
            fits = capacity.fit(
                spec,
                voxtral.max_model_len,
                voxtral.gpu_memory_utilization,
                kv_cache_dtype=voxtral.kv_cache_dtype,
            ).fit
            if fits < voxtral.streams_per_instance:
                p.note(
                    f"ecs.instance_type={show(self.instance_type)} with "
                    f"voxtral.max_model_len={voxtral.max_model_len} and "
                    f"voxtral.max_num_seqs={voxtral.streams_per_instance}: one {spec.gpu_model} "
                    f"({spec.gpu_memory_gib:g} GiB) holds the weights and KV cache for at most "
                    f"{fits} sequence(s) of that length; lower max_num_seqs or max_model_len, or "
                    "choose a GPU with more memory"
                )
        return list(p)


@dataclass(frozen=True)
class NetworkSettings:
    """Where the endpoints run (docs/private-deployment.md): ``public`` is SageMaker-managed
    networking; ``vpc`` puts both Models in private subnets with no internet access, a new VPC
    unless ``vpc_id`` is given."""

    #: ``public`` (SageMaker-managed networking) or ``vpc`` (private subnets, no internet access);
    #: the other network.* keys are allowed only with ``vpc``.
    mode: Literal["public", "vpc"] = "public"
    #: An existing VPC (with subnet_ids, availability_zones and vpc_cidr); None = the stack makes
    #: one.
    vpc_id: str | None = None
    #: With vpc_id: the VPC's private subnets (at least two Availability Zones).
    subnet_ids: list[str] = field(default_factory=list)
    #: The Availability Zone of each subnet, in the order of subnet_ids (no lookups at synth).
    availability_zones: list[str] = field(default_factory=list)
    #: The route table of each subnet (the S3 gateway endpoint is added to them); with
    #: create_endpoints only.
    route_table_ids: list[str] = field(default_factory=list)
    #: Security groups for the Models instead of the one the stack makes.
    security_group_ids: list[str] = field(default_factory=list)
    #: CIDR block of the new VPC (None = 10.80.0.0/16), or of the existing one (required with
    #: vpc_id).
    vpc_cidr: str | None = None
    #: Availability Zones of a new VPC.
    max_azs: int = 2
    #: Make the S3, ECR and SageMaker runtime VPC endpoints, with the ECS target ECS's, with
    #: connect.enabled the Connect consumers' (SQS, EventBridge, CloudWatch Logs, a DynamoDB
    #: gateway); off when the VPC has them already (a second interface endpoint with private DNS for
    #: one service in a VPC is refused).
    create_endpoints: bool = True
    #: Who may reach the SageMaker runtime endpoint on 443/8443 (None/empty = the VPC's CIDR block).
    caller_cidrs: list[str] = field(default_factory=list)
    #: The caller policies allow invoking only through the runtime VPC endpoint made here
    #: (aws:SourceVpce).
    require_source_vpce: bool = False

    @property
    def private(self) -> bool:
        return self.mode == "vpc"

    def network_props(
        self,
        kms_key_arn: str | None = None,
        *,
        ecs: bool = False,
        connect: bool = False,
        agent: bool = False,
    ) -> PrivateNetworkProps:
        """The private network's props; ``ecs``: a service runs on the ECS target, so the network
        also gets the endpoints ECS instances and tasks need (when it makes endpoints at all);
        ``connect``: likewise for the Amazon Connect transcription consumers."""
        existing = None
        if self.vpc_id is not None:
            existing = ExistingVpc(
                vpc_id=self.vpc_id,
                subnet_ids=self.subnet_ids,
                availability_zones=self.availability_zones,
                cidr=self.vpc_cidr or "",
                route_table_ids=self.route_table_ids,
            )
        return PrivateNetworkProps(
            existing_vpc=existing,
            vpc_cidr=self.vpc_cidr or DEFAULT_VPC_CIDR,
            max_azs=self.max_azs,
            security_group_ids=self.security_group_ids,
            create_endpoints=self.create_endpoints,
            caller_cidrs=self.caller_cidrs,
            kms_key_arn=kms_key_arn,
            ecs_endpoints=ecs and self.create_endpoints,
            connect_endpoints=connect and self.create_endpoints,
            agent_endpoints=agent and self.create_endpoints,
        )

    def problems(self, region: str) -> list[str]:
        p = Problems(name=lambda prop: f"network.{prop}")
        defaults = NetworkSettings()
        if not self.private:
            for name in ctx.section_fields(NetworkSettings):
                if name != "mode" and getattr(self, name) != getattr(defaults, name):
                    p.add(
                        name,
                        getattr(self, name),
                        "set only with network.mode=vpc (public mode uses "
                        "SageMaker-managed networking)",
                    )
            return list(p)
        existing_keys = {
            "subnet_ids": self.subnet_ids,
            "availability_zones": self.availability_zones,
            "route_table_ids": self.route_table_ids,
        }
        if self.vpc_id is None:
            for name, value in existing_keys.items():
                if value:
                    p.add(name, value, "set only together with network.vpc_id (an existing VPC)")
        elif self.vpc_cidr is None:
            p.add(
                "vpc_cidr",
                None,
                "must be the CIDR block of the VPC network.vpc_id (what its endpoints let in)",
            )
        elif not self.subnet_ids:
            p.add(
                "subnet_ids",
                [],
                "must list the VPC's private subnets (at least two Availability Zones)",
            )
        if self.vpc_id is None or (self.vpc_cidr is not None and self.subnet_ids):
            self.network_props().problems(p, region)
        if self.require_source_vpce and not self.create_endpoints:
            p.add(
                "require_source_vpce",
                True,
                "needs network.create_endpoints=true (the runtime endpoint made here)",
            )
        return list(p)


@dataclass(frozen=True)
class EncryptionSettings:
    """The customer managed key of the deployment's data (docs/private-deployment.md)."""

    #: A key made elsewhere (a key ARN in the stack's Region; its key policy must let CloudWatch
    #: Logs and CloudWatch use it, docs/private-deployment.md). None = the stack makes one when
    #: create_key says so.
    kms_key_arn: str | None = None
    #: Make a key (rotated yearly). None = yes in network.mode=vpc, no in public mode (today's
    #: encryption).
    create_key: bool | None = None
    #: Encrypt the ECR repository with the key. Changing it REPLACES the repository. None = yes in
    #: vpc mode only.
    repository: bool | None = None

    def problems(self, region: str) -> list[str]:
        p = Problems(name=lambda prop: f"encryption.{prop}")
        if self.kms_key_arn is not None:
            check_kms_key_arn(p, "kms_key_arn", self.kms_key_arn, region, alias=False)
            if self.create_key:
                p.add(
                    "create_key",
                    True,
                    "must be false or null with encryption.kms_key_arn (one key)",
                )
        return list(p)


@dataclass(frozen=True)
class ConnectSettings:
    """Live call transcription for Amazon Connect (docs/connect.md): the ``<prefix>-Connect``
    stack."""

    #: Deploy the <prefix>-Connect stack (needs voxtral.enabled and instance_arn).
    enabled: bool = False
    #: The Amazon Connect instance (arn:aws:connect:REGION:ACCOUNT:instance/ID), in this app's
    #: region.
    instance_arn: str | None = None
    #: The instance's media streams prefix (data storage, "Live media streaming"): the consumers may
    #: read only streams whose names begin with it (unconfirmed: Connect names streams
    #: <prefix>-...).
    stream_prefix: str = "voice-live"
    #: Make the instance's MEDIA_STREAMS storage config (an instance has one: leave false if it is
    #: set already).
    create_storage_config: bool = False
    #: Hours Kinesis Video Streams keeps call audio (the storage config; the consumer needs at least
    #: 1 to resume).
    retention_hours: int = 24
    #: The key Connect encrypts the streams with (the existing storage config's, or for the one made
    #: here); None = the data key (encryption.*).
    stream_kms_key_arn: str | None = None
    #: Associate the start function with the instance (so flows can invoke it).
    associate_function: bool = True
    #: Add an example contact flow (Start media streaming, invoke the function, transfer to queue).
    create_example_flow: bool = False
    #: The queue the example flow transfers calls to
    #: (arn:aws:connect:REGION:ACCOUNT:instance/ID/queue/QUEUE_ID, e.g. the instance's BasicQueue);
    #: required with create_example_flow.
    queue_arn: str | None = None
    #: Live calls one consumer task transcribes at once.
    calls_per_task: int = 50
    #: Consumer task minimum (these always run).
    min_tasks: int = 1
    #: Consumer task maximum.
    max_tasks: int = 10
    #: CPU units of a consumer task (1024 = 1 vCPU).
    cpu: int = 1024
    #: Memory of a consumer task, MiB.
    memory_mib: int = 2048
    #: Days a call's transcript is kept (the table's time to live).
    transcript_ttl_days: int = 7
    #: Alarm when the consumers read this many milliseconds behind the live call (MillisBehindNow,
    #: maximum).
    alarm_millis_behind: int = 10000
    #: A consumer image built elsewhere (voicectl/connect/Dockerfile); None = built from this
    #: repository at deploy.
    image_uri: str | None = None
    #: With network.mode=vpc: make the Kinesis Video Streams interface endpoint
    #: (com.amazonaws.REGION.kinesisvideo, private DNS on, which then serves every Kinesis Video
    #: Streams client in the VPC, and WebRTC fails there), so that call audio stays in the VPC.
    #: False: the VPC has one already, or runs WebRTC (audio then leaves by egress); an existing VPC
    #: (network.vpc_id) only, as the VPC the app makes has no egress. The consumers' other endpoints
    #: (SQS, EventBridge, CloudWatch Logs, DynamoDB) come with network.create_endpoints.
    kvs_vpc_endpoint: bool = True

    def problems(self, settings: Settings) -> list[str]:
        if not self.enabled:
            return []
        p = Problems(name=lambda prop: f"connect.{prop}")
        if self.instance_arn is None:
            p.add(
                "instance_arn",
                None,
                "must name the Amazon Connect instance when connect.enabled=true",
            )
        elif (match := INSTANCE_ARN_PATTERN.match(self.instance_arn)) and match.group(
            1
        ) != settings.region:
            p.add(
                "instance_arn",
                self.instance_arn,
                f"must be in the app's region {settings.region} (a contact "
                "flow invokes functions of its own region)",
            )
        if not settings.voxtral.enabled:
            p.note(
                "connect.enabled=true needs voxtral.enabled=true (the consumers stream to the "
                "Voxtral endpoint)"
            )
        # network.mode=vpc: the network makes the consumers' endpoints (SQS, EventBridge, CloudWatch
        # Logs, the DynamoDB gateway; constructs_lib/network/props.py CONNECT_*_ENDPOINTS) when it
        # makes endpoints at all; with network.create_endpoints=false an existing VPC's own
        # endpoints or NAT serve them.
        if (
            settings.network.private
            and settings.network.vpc_id is None
            and not settings.network.create_endpoints
        ):
            p.note(
                "connect.enabled=true with network.mode=vpc, no network.vpc_id and "
                "network.create_endpoints=false leaves the consumers no way to SQS, EventBridge, "
                "DynamoDB, CloudWatch Logs and ECR: the VPC this app makes has no route to the "
                "internet; keep network.create_endpoints=true"
            )
        if (
            settings.network.private
            and settings.network.vpc_id is None
            and not self.kvs_vpc_endpoint
        ):
            p.add(
                "kvs_vpc_endpoint",
                False,
                "must be true with network.mode=vpc and no network.vpc_id: the VPC this "
                "app makes has no route to the internet, so the Kinesis Video Streams "
                "interface endpoint is the consumers' only way to the call audio",
            )
        if (
            settings.network.private
            and self.kvs_vpc_endpoint
            and settings.region not in KVS_ENDPOINT_REGIONS
        ):
            remedy = (
                "set it false, and call audio reaches Kinesis Video Streams through the subnets' "
                "egress"
                if settings.network.vpc_id is not None
                else "name an existing VPC whose subnets have egress (network.vpc_id) and set it "
                "false: the VPC this app makes has none"
            )
            p.add(
                "kvs_vpc_endpoint",
                True,
                f"Kinesis Video Streams has no interface VPC endpoint in {settings.region}"
                f" (it has one in {', '.join(sorted(KVS_ENDPOINT_REGIONS))}): {remedy}",
            )
        if self.image_uri is not None:
            check_ecr_image_uri(p, "image_uri", self.image_uri, settings.region)
        if self.stream_kms_key_arn is not None:
            # Connect's EncryptionConfig KeyId is "the full ARN of the encryption key" and the
            # consumers' kms:Decrypt grant names it: a key ARN (no alias), in the app's region
            # (where Connect writes the streams).
            check_kms_key_arn(
                p, "stream_kms_key_arn", self.stream_kms_key_arn, settings.region, alias=False
            )
        if self.instance_arn is not None:
            made_key = "the data key this app makes" if settings.makes_key else None
            self.props(
                settings,
                image_directory=".",
                kms_key_arn=settings.encryption.kms_key_arn or made_key,
            ).problems(p)
        return list(p)

    def props(self, settings: Settings, **kwargs: Any) -> ConnectTranscriptionProps:
        voxtral = settings.voxtral
        on_ecs = voxtral.target == "ecs"
        values: dict[str, Any] = {
            "instance_arn": self.instance_arn or "",
            "stream_prefix": self.stream_prefix,
            "endpoint_name": None if on_ecs else voxtral.endpoint_name,
            "endpoint_url": "wss://ecs" if on_ecs else None,
            "create_storage_config": self.create_storage_config,
            "retention_hours": self.retention_hours,
            "stream_kms_key_arn": self.stream_kms_key_arn,
            "associate_function": self.associate_function,
            "create_example_flow": self.create_example_flow,
            "queue_arn": self.queue_arn,
            "calls_per_task": self.calls_per_task,
            "min_tasks": self.min_tasks,
            "max_tasks": self.max_tasks,
            "cpu": self.cpu,
            "memory_mib": self.memory_mib,
            "transcript_ttl_days": self.transcript_ttl_days,
            "alarm_millis_behind": self.alarm_millis_behind,
            "image_uri": self.image_uri,
            "kvs_vpc_endpoint": self.kvs_vpc_endpoint,
            "region": settings.region,
            "retain_data": settings.retain_data,
            "log_retention_days": settings.log_retention_days,
            "kms_key_arn": settings.encryption.kms_key_arn,
            "name_prefix": settings.stack_name_prefix,
        }
        values.update(kwargs)
        return ConnectTranscriptionProps(**values)


@dataclass(frozen=True)
class AgentSettings:
    """The voice agent (docs/agent.md): a Pipecat bot on ECS Fargate behind a load balancer, from
    Voxtral speech to text through an LLM to Sonic speech: the ``<prefix>-Agent`` stack."""

    #: Deploy the <prefix>-Agent stack (needs voxtral.enabled and sonic.enabled, Sonic on
    #: SageMaker).
    enabled: bool = False
    #: Bedrock model id or system inference profile id the bot calls with ConverseStream (Bedrock
    #: user guide, "Supported foundation models"; a 'us.' profile from us-* regions only, 'eu.' from
    #: eu-*, 'global.' from any); null with llm_url.
    llm_model_id: str | None = DEFAULT_LLM_MODEL_ID
    #: An OpenAI-compatible server's base URL instead of Bedrock (then llm_model_id must be null).
    llm_url: str | None = None
    #: The LLM's system prompt.
    system_prompt: str = DEFAULT_SYSTEM_PROMPT
    #: Cartesia voice id Sonic speaks with (docs/deploy.md, "Cartesia voice id").
    voice: str = DEFAULT_VOICE
    #: Language of the conversation (a Sonic language code such as en, de, fr-FR).
    language: str = "en"
    #: What the bot says when a session starts; empty = it waits for the caller.
    greeting: str = "Hello! How can I help you today?"
    #: Sessions one task takes at once; scaling holds 70 % of it per task.
    max_sessions_per_task: int = 10
    #: Longest session, seconds (60-14400); the task is protected from scale-in while one is live.
    max_session_s: int = 1800
    #: A session with no speech either way for this many seconds ends (the load balancer's idle
    #: timeout is 10 s longer).
    idle_s: int = 60
    #: ACM certificate for an HTTPS listener (wss://); required with internet_facing.
    certificate_arn: str | None = None
    #: An internet-facing load balancer (public mode only, needs certificate_arn); default internal.
    internet_facing: bool = False
    #: Fargate task CPU units (1024 = 1 vCPU).
    cpu: int = 1024
    #: Fargate task memory, MiB (a value Fargate pairs with cpu).
    memory_mib: int = 2048
    #: Task minimum (these always run).
    min_tasks: int = 1
    #: Task maximum.
    max_tasks: int = 4
    #: Alarm when the p95 of voice-to-voice latency (end of speech to first answer audio) is above
    #: this many milliseconds for 3 of 5 minutes.
    alarm_voice_to_voice_p95_ms: float = 1500.0

    SIZING: ClassVar[tuple[str, ...]] = (
        "cpu",
        "memory_mib",
        "min_tasks",
        "max_tasks",
        "max_sessions_per_task",
        "max_session_s",
        "idle_s",
    )

    def sizing(self) -> AgentSizing:
        return AgentSizing(**{name: getattr(self, name) for name in self.SIZING})

    def problems(self, settings: Settings) -> list[str]:
        if not self.enabled:
            return []
        p = Problems(name=lambda prop: f"agent.{prop}")
        if not settings.voxtral.enabled or not settings.sonic.enabled:
            off = [
                f"{name}.enabled=false"
                for name, section in (("voxtral", settings.voxtral), ("sonic", settings.sonic))
                if not section.enabled
            ]
            p.note(
                "agent.enabled=true needs voxtral.enabled=true and sonic.enabled=true (the bot "
                f"listens with Voxtral and speaks with Sonic); found {' and '.join(off)}"
            )
        if settings.sonic.enabled and settings.sonic.target != "sagemaker":
            p.note(
                "agent.enabled=true needs sonic.target='sagemaker': the bot streams speech from "
                "the Sonic endpoint (InvokeEndpointWithResponseStream); Sonic on ECS is not "
                "supported yet"
            )
        if (self.llm_model_id is None) == (self.llm_url is None):
            p.add(
                "llm_url",
                self.llm_url,
                "set exactly one of agent.llm_model_id (Bedrock) and agent.llm_url "
                "(OpenAI-compatible; then agent.llm_model_id=null)",
            )
        if self.llm_model_id is not None:
            check_llm_model_id(p, "llm_model_id", self.llm_model_id, settings.region)
        if self.llm_url is not None:
            check_llm_url(p, "llm_url", self.llm_url)
        for name in ("system_prompt", "voice", "language"):
            if not getattr(self, name).strip():
                p.add(name, getattr(self, name), "must not be empty")
        if self.language.strip() and self.language not in SONIC_LANGUAGE_CODES:
            p.add(
                "language",
                self.language,
                f"must be a language Sonic speaks: {', '.join(sorted(SONIC_LANGUAGE_CODES))}",
            )
        self.sizing().problems(p)
        if self.certificate_arn is not None:
            check_certificate_arn(p, "certificate_arn", self.certificate_arn, settings.region)
        if self.internet_facing and self.certificate_arn is None:
            p.add(
                "certificate_arn",
                None,
                "must be set with agent.internet_facing=true: an internet-facing load balancer "
                "listens on HTTPS only",
            )
        if self.internet_facing and settings.network.private:
            p.add(
                "internet_facing",
                True,
                "must be false with network.mode='vpc': the private network has no internet "
                "gateway",
            )
        network = settings.network
        if network.private and network.vpc_id is None and not network.create_endpoints:
            p.note(
                "agent.enabled=true with network.mode=vpc, no network.vpc_id and "
                "network.create_endpoints=false leaves the agent no way to Bedrock, CloudWatch "
                "Logs and ECR: the VPC this app makes has no route to the internet; keep "
                "network.create_endpoints=true"
            )
        if not self.alarm_voice_to_voice_p95_ms > 0:
            p.add(
                "alarm_voice_to_voice_p95_ms",
                self.alarm_voice_to_voice_p95_ms,
                "must be a positive number of milliseconds",
            )
        return list(p)


@dataclass(frozen=True)
class Settings:
    """All settings of the app. Built only by :func:`load_settings`."""

    #: Region of every stack.
    region: str = "us-east-1"
    #: Stack names are ``<stack_name_prefix>-Operations``, ``-Artifacts``, ``-Voxtral``, ``-Sonic``
    #: (and the optional ``-Foundation``, ``-VoxtralEcs``, ``-SonicEcs``, ``-Connect``).
    stack_name_prefix: str = "RealtimeVoice"
    #: Keep the buckets (and objects) and the ECR repository (and images) on ``cdk destroy``. The
    #: endpoints' log groups always go with their stack: they have the fixed names SageMaker writes
    #: to, so a retained group would make the next deploy fail ("already exists"); export logs you
    #: must keep first.
    retain_data: bool = False
    #: Retention of the endpoints' log groups, days (a CloudWatch Logs value).
    log_retention_days: int = 30
    #: Subscribe this address to the alarm topic (SNS e-mails a confirmation link first); None = no
    #: subscription.
    alarm_email: str | None = None
    voxtral: VoxtralSettings = field(default_factory=VoxtralSettings)
    sonic: SonicSettings = field(default_factory=SonicSettings)
    ecs: EcsSettings = field(default_factory=EcsSettings)
    network: NetworkSettings = field(default_factory=NetworkSettings)
    encryption: EncryptionSettings = field(default_factory=EncryptionSettings)
    connect: ConnectSettings = field(default_factory=ConnectSettings)
    agent: AgentSettings = field(default_factory=AgentSettings)

    @property
    def uses_ecs(self) -> bool:
        """Whether an enabled service runs on the ECS target (``voxtral.target`` or
        ``sonic.target``)."""
        return (self.voxtral.enabled and self.voxtral.target == "ecs") or self.sonic_on_ecs

    @property
    def sonic_on_ecs(self) -> bool:
        return self.sonic.enabled and self.sonic.target == "ecs"

    @property
    def makes_key(self) -> bool:
        """Whether the stacks make the data key (encryption.create_key, defaulting to
        network.mode=vpc)."""
        if self.encryption.kms_key_arn is not None:
            return False
        return (
            self.network.private
            if self.encryption.create_key is None
            else self.encryption.create_key
        )

    @property
    def uses_key(self) -> bool:
        """Whether the data is under a customer managed key (given or made)."""
        return self.makes_key or self.encryption.kms_key_arn is not None

    @property
    def encrypts_repository(self) -> bool:
        """Whether the ECR repository uses the key (replaces an existing repository:
        docs/private-deployment.md)."""
        wanted = (
            self.network.private
            if self.encryption.repository is None
            else self.encryption.repository
        )
        return self.uses_key and wanted

    @property
    def sonic_model_package_arn(self) -> str:
        """The Sonic model package for ``region`` (validated: present whenever Sonic is enabled)."""
        return self.sonic.model_package_arn or SONIC_MODEL_PACKAGES.get(self.region, "")

    def problems(self) -> list[str]:
        """Every problem of the settings (empty when valid)."""
        p = Problems()
        if not REGION_RE.fullmatch(self.region):
            p.add("region", self.region, "must be an AWS region code such as 'us-east-1'")
        if not re.fullmatch(r"[A-Za-z][A-Za-z0-9-]{0,63}", self.stack_name_prefix):
            p.add(
                "stack_name_prefix",
                self.stack_name_prefix,
                "must start with a letter; letters, digits and '-' only",
            )
        check_log_retention_days(p, "log_retention_days", self.log_retention_days)
        if self.alarm_email is not None:
            check_email(p, "alarm_email", self.alarm_email)
        if not self.voxtral.enabled and not self.sonic.enabled:
            p.note(
                "voxtral.enabled=false and sonic.enabled=false: at least one endpoint must be "
                "enabled"
            )
        problems = (
            list(p) + self.network.problems(self.region) + self.encryption.problems(self.region)
        )
        if self.encryption.repository and not self.uses_key:
            problems.append(
                "encryption.repository=true: needs a key (encryption.kms_key_arn or "
                "encryption.create_key)"
            )
        for section, endpoint in (("voxtral", self.voxtral), ("sonic", self.sonic)):
            if endpoint.enabled:
                problems += endpoint.problems(section, self.region)
        if self.voxtral.enabled and self.voxtral.target == "ecs":
            problems += self.ecs.problems(self.region, self.voxtral)
            if self.network.private and self.ecs.load_balancer == "internet_facing":
                problems.append(
                    "ecs.load_balancer='internet_facing' with network.mode='vpc': the private "
                    "network has no internet gateway; use ecs.load_balancer='internal' (callers "
                    "reach it from the VPC, peered networks or on premises), or "
                    "network.mode='public'"
                )
        elif self.sonic_on_ecs:
            # The ecs.* settings Sonic shares, checked here when Voxtral does not run on ECS (else
            # ecs.problems did).
            p = Problems(name=lambda prop: f"ecs.{prop}")
            check_root_volume_gib(p, "root_volume_gib", self.ecs.root_volume_gib)
            if self.ecs.certificate_arn is not None:
                check_certificate_arn(p, "certificate_arn", self.ecs.certificate_arn, self.region)
            problems += list(p)
        problems += self.connect.problems(self)
        problems += self.agent.problems(self)
        if (
            self.voxtral.enabled
            and self.sonic.enabled
            and self.voxtral.endpoint_name.lower() == self.sonic.endpoint_name.lower()
        ):
            problems.append(
                f"sonic.endpoint_name={show(self.sonic.endpoint_name)}: must differ from "
                "voxtral.endpoint_name (endpoint names are unique per account and region, "
                "case-insensitively)"
            )
        return problems


# --- Parsing ------------------------------------------------------------------------------------

SECTIONS: dict[str, type] = {
    "": Settings,
    "voxtral.": VoxtralSettings,
    "sonic.": SonicSettings,
    "ecs.": EcsSettings,
    "network.": NetworkSettings,
    "encryption.": EncryptionSettings,
    "connect.": ConnectSettings,
    "agent.": AgentSettings,
}
KNOWN_KEYS = ctx.known_keys(SECTIONS)


def default_context() -> dict[str, Any]:
    """Every setting with its default, as flat dotted keys (what ``cdk.json`` lists)."""
    return ctx.defaults(SECTIONS)


def load_settings(context: Mapping[str, Any]) -> Settings:
    """Parse and validate ``context`` (CDK context: cdk.json plus ``-c`` overrides) into
    :class:`Settings`.

    Args:
        context: flat mapping of context keys to values; ``-c`` values are strings, cdk.json values
            JSON types. Keys owned by the CDK itself (``@aws-cdk/...`` feature flags, keys
            containing ``:``) are ignored.

    Returns:
        The frozen settings.

    Raises:
        SettingsError: listing every invalid or unknown key, with the value given and what is
            allowed.
    """
    problems: list[str] = []
    values: dict[str, dict[str, Any]] = {prefix: {} for prefix in SECTIONS}
    for key, raw in context.items():
        if ctx.is_cdk_key(key):
            continue
        if key not in KNOWN_KEYS:
            close = difflib.get_close_matches(key, KNOWN_KEYS, n=1, cutoff=0.6)
            hint = (
                f"; did you mean '{close[0]}'?"
                if close
                else f"; known keys: {', '.join(sorted(KNOWN_KEYS))}"
            )
            problems.append(f"unknown setting '{key}'{hint}")
            continue
        prefix, name, hint = KNOWN_KEYS[key]
        try:
            values[prefix][name] = ctx.convert(raw, hint)
        except ValueError as error:
            problems.append(f"{key}={show(raw)}: {error}")

    ecs = EcsSettings(**values["ecs."])
    voxtral = VoxtralSettings(**values["voxtral."])
    if voxtral.target == "ecs":
        voxtral = dataclasses.replace(voxtral, ecs_instance_type=ecs.instance_type)
    settings = Settings(
        **values[""],
        voxtral=voxtral,
        sonic=SonicSettings(**values["sonic."]),
        ecs=ecs,
        network=NetworkSettings(**values["network."]),
        encryption=EncryptionSettings(**values["encryption."]),
        connect=ConnectSettings(**values["connect."]),
        agent=AgentSettings(**values["agent."]),
    )
    # Validate even when some keys failed to convert (they keep their defaults), so one run reports
    # every problem.
    problems.extend(settings.problems())
    if problems:
        raise SettingsError(problems)
    return settings
