"""``voxtral.*``: speech to text, Voxtral on vLLM behind the bridge. The keys, and the rules of this
app for them: the model, its weights and image, whether one GPU holds the streams asked for (the
capacity plan, :mod:`config.capacity_plan`), the transcription delay, and the operations keys that
depend on vLLM's settings.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar, Literal

from config.capacity_plan import CapacityPlan
from config.context import setting
from config.endpoint import EndpointSettings
from config.models import (
    BRIDGE_CONTAINER_DIR,
    BRIDGE_DRAIN_S,
    VOXTRAL_DEFAULT_AMI,
    VOXTRAL_DEFAULT_REVISION,
    VOXTRAL_MAX_MODEL_LEN,
    VOXTRAL_TRANSCRIPTION_DELAYS_MS,
    bridge_base_image,
    first_delta_floor_ms,
    shown_dockerfile,
)
from constructs_lib.facts import capacity, cuda_compat, instance_types
from constructs_lib.facts.names import (
    check_ecr_image_uri,
    check_hub_token_key,
    check_repository_id,
    check_revision,
    check_secret_arn,
)
from constructs_lib.monitoring.thresholds import BridgeAlarmThresholds
from constructs_lib.sagemaker_endpoint.props import (
    INFERENCE_AMI_VERSIONS,
    RollingUpdate,
    check_model_data_s3_uri,
)
from constructs_lib.validation import Problems
from contracts.bridge_env import DEFAULT_METRICS_NAMESPACE
from contracts.model import DEFAULT_REPO_ID

if TYPE_CHECKING:
    from config.settings import Settings

#: ``(key, facts)`` of each instance type the endpoint may run
#: (:meth:`EndpointSettings.instance_specs`).
Specs = list[tuple[str, instance_types.InstanceSpec]]


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
    model_id: str = setting(DEFAULT_REPO_ID, bridge="vllm_served_model_name")
    #: ``s3://bucket/prefix/`` holding the uncompressed weights; None = the prefix
    #: ``s3://<model bucket>/models/<model id>/<revision>/`` in the stack's model bucket.
    model_s3_uri: str | None = None
    #: A prebuilt bridge image in ECR (same Region); None = build ``services/bridge/`` as an asset
    #: (needs Docker at deploy) and copy it into the stack's repository.
    image_uri: str | None = None
    #: vLLM --max-model-len, tokens per session (12.5 tokens per second of audio: 45000 = 1 h); at
    #: most 131072 for the default model (its context).
    max_model_len: int = setting(45000, bridge="vllm_max_model_len")
    #: Live streams per instance (vLLM --max-num-seqs and the bridge's MAX_STREAMS); ``auto`` = what
    #: the capacity model says one GPU of the instance type serves at max_model_len
    #: (constructs_lib/facts/capacity.py), for each type of instance_pools its own (each pool type
    #: whose cap differs runs a Model of its own: InstancePool ModelNameOverride); a number above
    #: what fits fails synth.
    stream_cap: int | Literal["auto"] = setting(
        "auto", key="max_num_seqs", bridge="vllm_max_num_seqs"
    )
    #: vLLM --gpu-memory-utilization: the share of GPU memory vLLM reserves at start.
    gpu_memory_utilization: float = setting(0.9, bridge="vllm_gpu_memory_utilization")
    #: vLLM --kv-cache-dtype: ``auto`` (the model's BF16) or ``fp8`` (half the KV bytes: twice the
    #: streams where the KV cache bounds them; refused on GPUs where vLLM 0.31.0 cannot run it for
    #: this model, every GPU but Hopper: constructs_lib/facts/capacity.py).
    kv_cache_dtype: Literal["auto", "fp8"] = setting("auto", bridge="vllm_kv_cache_dtype")
    #: Transcription delay, ms: how far the text runs behind the audio, a floor under the time to
    #: final transcript (longer is more accurate). A multiple of 80 from 80 to 1200, or 2400 (the
    #: model card's values; 480 recommended); None = the checkpoint's own (its tekken.json: 480).
    #: alarm_time_to_first_delta_p90_ms must be above it plus 82.5 ms. vLLM takes no flag for it:
    #: the bridge serves vLLM a copy of tekken.json with ``audio.transcription_delay_ms`` replaced
    #: (TRANSCRIPTION_DELAY_MS; docs/settings.md, "Transcription delay").
    transcription_delay_ms: int | None = setting(None, bridge="transcription_delay_ms")
    #: InferenceAmiVersion (NVIDIA driver and CUDA of the instances); checked at synth against the
    #: image's CUDA (constructs_lib/facts/cuda_compat.py): a driver that cannot run it is a settings
    #: error, an image whose tag names no CUDA a synth warning.
    inference_ami_version: Literal[INFERENCE_AMI_VERSIONS] = VOXTRAL_DEFAULT_AMI  # pyright: ignore[reportInvalidTypeForm] (the parser reads the choices from it)
    #: CloudWatch namespace of the bridge's embedded-metric-format metrics.
    namespace: str = setting(
        DEFAULT_METRICS_NAMESPACE, key="metrics_namespace", bridge="metrics_namespace"
    )
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
    max_capacity: int = 4
    #: Target of live streams per instance as a fraction of the stream cap (max_num_seqs): 0.7 x 4 =
    #: 2.8 on one L4.
    scaling_target_fraction: float = 0.7
    #: Rolling update: instances replaced per step, percent of the variant's instance count (5-50);
    #: unset: one instance per step (RollingUpdatePolicy MaximumBatchSize INSTANCE_COUNT 1; how
    #: SageMaker rounds a percent below one instance is not documented).
    batch_percent: int | None = setting(key="rollout_batch_percent", default_from=RollingUpdate)
    #: Rolling update: baking period per step during which the rollback alarms are watched, seconds.
    wait_s: int = setting(key="rollout_wait_s", default_from=RollingUpdate)
    #: Rolling update: roll back when more than this percent of requests get a 5xx in 3 of 5
    #: minutes.
    rollback_5xx_error_percent: float = 5.0
    #: Above vLLM's up-front reservation (gpu_memory_utilization): vLLM holds that much from the
    #: start.
    gpu_memory_percent: float = 97.0
    #: The bridge's TimeToFirstDelta p90 alarm threshold, ms.
    time_to_first_delta_p90_ms: float = setting(
        key="alarm_time_to_first_delta_p90_ms", default_from=BridgeAlarmThresholds
    )
    #: Alarm when live streams per instance reach this fraction of the stream cap.
    active_streams_fraction: float = setting(
        key="alarm_active_streams_fraction", default_from=BridgeAlarmThresholds
    )

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

    def bridge_thresholds(self, plan: CapacityPlan) -> BridgeAlarmThresholds:
        """The bridge's alarm thresholds, at the plan's stream cap (the smallest, with pools)."""
        return self.props(
            BridgeAlarmThresholds,
            stream_cap=plan.streams_per_instance,
            caps_differ=plan.caps_differ,
        )

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
            image = bridge_base_image(container_dir)
            source = f"the base image of {shown_dockerfile(container_dir)}"
        return cuda_compat.check_image(
            image, source, self.inference_ami_version, self.instance_type
        )

    def rolling_update(self) -> RollingUpdate:
        return self.props(RollingUpdate)

    def app_problems(self, p: Problems, settings: Settings) -> None:
        start = len(p)
        specs = self.instance_specs(p)
        self._gpu_problems(p, specs)
        self._model_problems(p, settings.region)
        self.bridge_thresholds(settings.capacity_plan).problems(p)
        self._delay_problems(p)
        self._kv_cache_problems(p, specs)
        # The capacity model only when every value it depends on passed its checks; with target=ecs
        # the ECS instance type is what the tasks run on, and EcsSettings checks it instead.
        if len(p) == start and self.target != "ecs":
            self._fit_problems(p, specs, settings.capacity_plan)
        self._operations_problems(p)

    def _gpu_problems(self, p: Problems, specs: Specs) -> None:
        """Each instance type the endpoint may run has one GPU (several with target=ecs, one task
        each)."""
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
                    f"{spec.gpus} GPUs, could never fire): choose {choice}, ranked by "
                    "voicectl capacity --compare, or voxtral.target=ecs, which runs one task per "
                    "GPU",
                )

    def _model_problems(self, p: Problems, region: str) -> None:
        """The model, its weights and image, vLLM's sizes, the hub token."""
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
        elif self.model_id == DEFAULT_REPO_ID and self.max_model_len > VOXTRAL_MAX_MODEL_LEN:
            p.add(
                "max_model_len",
                self.max_model_len,
                f"must be at most {VOXTRAL_MAX_MODEL_LEN}: the model's context "
                "(max_position_embeddings); vLLM refuses a longer one at start",
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

    def _kv_cache_problems(self, p: Problems, specs: Specs) -> None:
        """An unknown KV-cache type; FP8 on a GPU that cannot run it (each type the endpoint may
        run: with target=ecs the ECS type, which EcsSettings names)."""
        if self.kv_cache_dtype not in capacity.KV_CACHE_DTYPE_BYTES:
            p.add(
                "kv_cache_dtype",
                self.kv_cache_dtype,
                "must be 'auto' (the model's BF16) or 'fp8' (vLLM --kv-cache-dtype)",
            )
        elif self.kv_cache_dtype == "fp8" and self.target != "ecs":
            for key, spec in specs:
                reason = capacity.fp8_kv_cache_problem(spec.gpu_model)
                if reason is not None:
                    p.note(
                        f"{p.ref('kv_cache_dtype', 'fp8')} with {p.ref(key, spec.name)}: "
                        f"{reason}; set voxtral.kv_cache_dtype=auto, or choose a one-GPU Hopper "
                        "type (ml.p5.4xlarge)"
                    )

    def _fit_problems(self, p: Problems, specs: Specs, plan: CapacityPlan) -> None:
        """For each type the endpoint may run, at that type's own stream cap (with pools, each pool
        type's Model has its own): one GPU holds the weights and that many streams' KV cache."""
        for key, spec in specs:
            planned = plan.of(spec.name)
            fitted = planned.capacity
            if not spec.gpus or fitted is None or fitted.fit >= planned.stream_cap:
                continue
            asked = self.stream_cap
            advice = (
                "lower max_num_seqs or max_model_len, choose a GPU with more memory, or set "
                "voxtral.max_num_seqs=auto"
                if asked != "auto"
                else "raise gpu_memory_utilization, lower max_model_len, or choose a GPU with "
                "more memory"
            )
            gib = 2**30
            p.note(
                f"{p.ref(key, spec.name)} with {p.ref('max_model_len', self.max_model_len)} "
                f"and {p.ref('stream_cap', asked)}: one {spec.gpu_model} "
                f"({fitted.gpu.memory_bytes / gib:.1f} GiB, {self.gpu_memory_utilization:g} of it "
                f"for vLLM: {fitted.budget_bytes / gib:.1f} GiB) holds the weights "
                f"({fitted.weight_bytes / gib:.1f} GiB), activations and CUDA graphs "
                f"({fitted.overhead_bytes / gib:.1f} GiB) and KV cache "
                f"({fitted.kv_bytes / gib:.1f} GiB) for at most {fitted.fit} live stream(s) of "
                f"that length ({fitted.stream_kv_bytes / gib:.2f} GiB of KV each); {advice} "
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
        threshold = self.time_to_first_delta_p90_ms
        if threshold <= floor_ms:
            p.note(
                f"{p.ref('time_to_first_delta_p90_ms', threshold)} with "
                f"{p.ref('transcription_delay_ms', delay)}: vLLM sends a stream's first "
                f"delta only after {floor_ms:g} ms of audio (the delay, one 80 ms token and "
                "the 2.5 ms look-ahead), so the alarm would fire on every stream; raise the "
                f"threshold above {floor_ms:g} ms, leaving room for the prefill and the "
                "callers' chunks, or choose a shorter delay"
            )

    def _operations_problems(self, p: Problems) -> None:
        """Rolling updates, the scaling target and the alarms that depend on vLLM's settings."""
        self.rolling_update().problems(p)
        fraction, alarm = self.scaling_target_fraction, self.active_streams_fraction
        if not 0 < fraction <= 1:
            p.add(
                "scaling_target_fraction",
                fraction,
                "must be more than 0 and at most 1 (live "
                f"streams per instance as a fraction of {p.name('stream_cap')})",
            )
        elif 0 < alarm <= 1 and alarm <= fraction:
            p.add(
                "active_streams_fraction",
                alarm,
                f"must be more than {p.ref('scaling_target_fraction', fraction)} and at most 1, "
                "or the alarm fires whenever autoscaling holds its target",
            )
        reserved = self.gpu_memory_utilization * 100
        if 0 < self.gpu_memory_percent < 100 and self.gpu_memory_percent <= reserved:
            p.add(
                "gpu_memory_percent",
                self.gpu_memory_percent,
                f"must be above {p.name('gpu_memory_utilization')} x 100 = {reserved:g}: vLLM "
                "reserves that much GPU memory at start, so the alarm would always fire",
            )
