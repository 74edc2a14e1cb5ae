"""Typed, validated settings of the app, parsed once from CDK context.

Every setting is a flat dotted key in ``cdk.json`` ``context`` (``voxtral.instance_type``) and can be overridden on
the command line with ``-c key=value``, where the value arrives as a string. :func:`load_settings` reads them all,
converts them, checks every rule and raises one :class:`SettingsError` that lists every problem (key, value, what is
allowed) before any construct is built. Constructs receive the frozen dataclasses below, never raw context.

The defaults live here, in the dataclasses; ``cdk.json`` repeats them so users can see every setting in one place
(a test keeps the two in step).
"""

from __future__ import annotations

import dataclasses
import difflib
import json
import re
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

from config import instance_types

# --- Facts with sources -------------------------------------------------------------------------------------------

#: Cartesia Sonic 3.6 model package per region (AWS Marketplace listing). Other regions need ``sonic.model_package_arn``.
SONIC_MODEL_PACKAGES: dict[str, str] = {
    "us-east-1": "arn:aws:sagemaker:us-east-1:865070037744:model-package/"
    "sonic36-sagemaker-v0-c6e9cacffcdf31178d1bd7c98c587480",
}

#: Real-time instance types the Sonic 3.6 model package supports (its Marketplace listing): every size of G6e, G7e
#: and G7 (their smallest sizes, ml.g6e.xlarge, ml.g7e.2xlarge and ml.g7.2xlarge, are the listed minimums), and two
#: P5 sizes.
SONIC_INSTANCE_FAMILIES = ("g6e", "g7e", "g7")
SONIC_EXTRA_INSTANCE_TYPES = ("ml.p5.48xlarge", "ml.p5en.48xlarge")

#: ProductionVariant.InferenceAmiVersion values (CreateEndpointConfig API reference; botocore's SageMaker model).
#: al2023-ami-sagemaker-inference-gpu-4-1 ships NVIDIA driver 580 / CUDA 13.0, the only one whose driver is new
#: enough (>= 575) for the CUDA 12.9 (cu129) vLLM deep-learning container the bridge image is built on; the older
#: ones (driver 535 / 550) would rely on CUDA forward compatibility, which their container toolkit does not mount.
INFERENCE_AMI_VERSIONS = (
    "al2-ami-sagemaker-inference-gpu-2",
    "al2-ami-sagemaker-inference-gpu-2-1",
    "al2-ami-sagemaker-inference-gpu-3-1",
    "al2023-ami-sagemaker-inference-gpu-4-1",
)
VOXTRAL_DEFAULT_AMI = "al2023-ami-sagemaker-inference-gpu-4-1"

#: A commit of mistralai/Voxtral-Mini-4B-Realtime-2602 with the Mistral-format files (params.json, tekken.json,
#: consolidated.safetensors); public client code pins its weight downloads to it. Check the repository's history
#: on the model hub before changing it.
VOXTRAL_DEFAULT_REVISION = "b45b4dc60caf4ad824163aaa0a72adc0ad7beeaf"

#: CloudWatch Logs RetentionInDays values accepted by AWS::Logs::LogGroup.
LOG_RETENTION_DAYS = (1, 3, 5, 7, 14, 30, 60, 90, 120, 150, 180, 365, 400, 545, 731, 1096, 1827, 2192, 2557, 2922, 3288, 3653)

#: ModelDataDownloadTimeoutInSeconds and ContainerStartupHealthCheckTimeoutInSeconds: 60-3600 s (CreateEndpointConfig).
TIMEOUT_RANGE_S = (60, 3600)

# GPU memory estimate for Voxtral-Mini-4B-Realtime-2602 (bf16), used to reject an instance that cannot hold the model
# with max_model_len x max_num_seqs tokens of KV cache. Sources: the model card (consolidated.safetensors, ~8.9 GB)
# and params.json of the language-model decoder (26 layers, 8 KV heads, head_dim 128).
VOXTRAL_WEIGHTS_BYTES = 8.9e9
#: 2 (K and V) x 26 layers x 8 KV heads x 128 head_dim x 2 bytes (bf16) per token.
VOXTRAL_KV_BYTES_PER_TOKEN = 2 * 26 * 8 * 128 * 2
#: CUDA context, activations, CUDA graphs and the audio encoder's buffers: a measured-order-of-magnitude allowance.
VOXTRAL_RUNTIME_OVERHEAD_BYTES = 2 * 2**30

NAME_PATTERN = re.compile(r"^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}$")  # SageMaker EndpointName
S3_URI_PATTERN = re.compile(r"^s3://([a-z0-9][a-z0-9.-]{1,61}[a-z0-9])/(.+)$")
ECR_IMAGE_PATTERN = re.compile(
    r"^(?P<account>\d{12})\.dkr\.ecr\.(?P<region>[a-z0-9-]+)\.amazonaws\.com(\.cn)?/"
    r"(?P<repository>[a-z0-9][a-z0-9._/-]*)(:(?P<tag>[A-Za-z0-9_][A-Za-z0-9._-]{0,127})|@sha256:[0-9a-f]{64})$"
)
MODEL_PACKAGE_ARN_PATTERN = re.compile(
    r"^arn:(?P<partition>aws[a-z-]*):sagemaker:(?P<region>[a-z0-9-]+):(?P<account>\d{12}):model-package/.+$"
)
#: KmsKeyId of an EndpointConfig: a key (single- or multi-Region) or an alias, as an ARN in the stack's Region.
KMS_KEY_ARN_PATTERN = re.compile(
    r"^arn:aws[a-z-]*:kms:(?P<region>[a-z0-9-]+):\d{12}:(key/(mrk-[0-9a-f]{32}|[0-9a-f-]{36})|alias/[A-Za-z0-9/_-]+)$"
)
REGION_PATTERN = re.compile(r"^[a-z]{2}(-gov)?-[a-z]+-\d$")
MODEL_ID_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._-]*$")
METRICS_NAMESPACE_PATTERN = re.compile(r"^[A-Za-z0-9./_#:-]{1,255}$")
REVISION_PATTERN = re.compile(r"^[0-9a-f]{40}$")
#: A KMS key ARN (no alias): IAM statements need the key itself.
KMS_KEY_ONLY_PATTERN = re.compile(r"^arn:aws[a-z-]*:kms:(?P<region>[a-z0-9-]+):\d{12}:key/(mrk-[0-9a-f]{32}|[0-9a-f-]{36})$")
#: A complete secret ARN: Secrets Manager appends "-" and 6 random characters to the name; IAM grants need them.
SECRET_ARN_PATTERN = re.compile(
    r"^arn:aws[a-z-]*:secretsmanager:(?P<region>[a-z0-9-]+):\d{12}:secret:[A-Za-z0-9/_+=.@-]+-[A-Za-z0-9]{6}$"
)
#: An e-mail address for the alarm topic's subscription (one address; SNS asks it to confirm).
EMAIL_PATTERN = re.compile(r"^[^@\s]+@[^@\s]+\.[^@\s]+$")

# --- Operations: scaling and rollout facts ----------------------------------------------------------------------------

#: Seconds the bridge lets open streams run after SIGTERM (its DRAIN_S; container/bridge/settings.py). SageMaker sends
#: SIGKILL 30 s after SIGTERM (SageMaker container contract), so the drain must stay below 30 s. The Voxtral stack
#: passes it to the container; a scale-in cooldown must be longer so that one drain ends before the next scale-in.
BRIDGE_DRAIN_S = 25
#: RollingUpdatePolicy.MaximumBatchSize: 5-50 % of the variant's instance count (RollingUpdatePolicy API reference).
ROLLOUT_BATCH_PERCENT_RANGE = (5, 50)
#: RollingUpdatePolicy.WaitIntervalInSeconds: 0-3600 (RollingUpdatePolicy API reference).
ROLLOUT_WAIT_RANGE_S = (0, 3600)
#: Alarm thresholds in percent -> what the percent is of (GPU and CPU ones are scaled by the instance's GPUs or
#: vCPUs in the alarm).
PERCENT_THRESHOLDS = {
    "alarm_gpu_utilization_percent": "each GPU's capacity",
    "alarm_gpu_memory_percent": "each GPU's memory",
    "alarm_cpu_utilization_percent": "each vCPU's capacity",
    "alarm_memory_percent": "the instance's memory",
    "alarm_disk_percent": "the instance's disk",
}
#: Application Auto Scaling cooldowns are seconds; a day is far beyond any useful value and catches unit mistakes.
COOLDOWN_MAX_S = 86400
#: Sonic target-tracking metrics: predefined Application Auto Scaling metrics for SageMaker variants (SageMaker
#: developer guide, "Define a scaling policy"). ``invocations_per_instance`` is requests per instance per minute;
#: ``concurrent_requests`` is requests in flight per model (high-resolution metric).
SONIC_SCALING_METRICS = ("invocations_per_instance", "concurrent_requests")


class SettingsError(ValueError):
    """One or more settings are invalid. ``problems`` lists one message per problem."""

    def __init__(self, problems: list[str]):
        self.problems = problems
        super().__init__(
            "Invalid settings (cdk.json context or -c key=value):\n" + "\n".join(f"  - {p}" for p in problems)
        )


@dataclass(frozen=True)
class EndpointSettings:
    """What every endpoint of the app has: switch, instance counts and timeouts, scaling range, alarm thresholds.

    Subclasses add their own keys and may give a field another default by declaring it again.
    """

    enabled: bool = True
    initial_instance_count: int = 1
    model_data_download_timeout_s: int = 1200
    container_startup_timeout_s: int = 1200
    volume_kms_key_arn: str | None = None
    # Operations (README "Operations"): autoscaling range and alarm thresholds.
    min_instances: int = 1
    max_instances: int = 2
    scale_in_cooldown_s: int = 600
    alarm_5xx_errors: int = 0
    alarm_4xx_errors: int = 10
    alarm_model_latency_p90_ms: float = 500.0
    alarm_overhead_latency_p90_ms: float = 100.0
    alarm_gpu_utilization_percent: float = 90.0
    alarm_gpu_memory_percent: float = 95.0
    alarm_cpu_utilization_percent: float = 90.0
    alarm_memory_percent: float = 90.0
    alarm_disk_percent: float = 85.0


@dataclass(frozen=True)
class VoxtralSettings(EndpointSettings):
    """Speech to text: Voxtral on vLLM behind the bridge, on a SageMaker real-time endpoint."""

    endpoint_name: str = "voxtral-realtime"
    instance_type: str = "ml.g6.4xlarge"
    model_id: str = "mistralai/Voxtral-Mini-4B-Realtime-2602"
    #: ``s3://bucket/prefix/`` holding the uncompressed weights; None = a prefix in the stack's model bucket.
    model_s3_uri: str | None = None
    #: A prebuilt bridge image in ECR; None = build ``container/`` as an asset and copy it into the stack's repository.
    image_uri: str | None = None
    max_model_len: int = 45000
    max_num_seqs: int = 2
    gpu_memory_utilization: float = 0.9
    inference_ami_version: str = VOXTRAL_DEFAULT_AMI
    #: CloudWatch namespace of the bridge's embedded-metric-format metrics.
    metrics_namespace: str = "RealtimeVoice/Bridge"
    #: Model hub commit the weights are staged from (40 hex digits; a branch or tag can move).
    model_revision: str = VOXTRAL_DEFAULT_REVISION
    #: Stage the weights during deploy (CodeBuild); None = on exactly when model_s3_uri is unset.
    stage_model: bool | None = None
    #: Secrets Manager secret (plain SecretString) holding the model hub access token, for gated repositories.
    hf_token_secret_arn: str | None = None
    #: Customer managed KMS key the hub-token secret is encrypted with (None = the aws/secretsmanager key).
    hf_token_secret_kms_key_arn: str | None = None
    max_instances: int = 4
    #: Target of live streams per instance as a fraction of the stream cap (max_num_seqs).
    scaling_target_fraction: float = 0.7
    #: Rolling update: instances replaced per step, percent of the variant's instance count (5-50).
    rollout_batch_percent: int = 25
    #: Rolling update: baking period per step during which the rollback alarms are watched, seconds.
    rollout_wait_s: int = 600
    #: Rolling update: roll back when more than this percent of requests get a 5xx in 3 of 5 minutes.
    rollback_5xx_error_percent: float = 5.0
    #: Above vLLM's up-front reservation (gpu_memory_utilization): vLLM holds that much from the start.
    alarm_gpu_memory_percent: float = 97.0
    alarm_time_to_first_delta_p90_ms: float = 2000.0
    #: Alarm when live streams per instance reach this fraction of the stream cap.
    alarm_active_streams_fraction: float = 0.9

    def model_prefix_key(self) -> str:
        """Key prefix of the weights inside the stack's model bucket (no leading, one trailing ``/``). The revision
        is part of it, so a new revision is staged beside the old one and a running endpoint keeps its files."""
        return f"models/{self.model_id}/{self.model_revision}/"

    @property
    def stages_model(self) -> bool:
        """Whether the deploy stages the weights (``stage_model``, defaulting to "no model_s3_uri given")."""
        return self.model_s3_uri is None if self.stage_model is None else self.stage_model


@dataclass(frozen=True)
class SonicSettings(EndpointSettings):
    """Text to speech: Cartesia Sonic 3.6 from its AWS Marketplace model package. No rollout keys: Marketplace
    containers are excluded from SageMaker's deployment guardrails ("Exclusions" in the SageMaker developer guide)."""

    endpoint_name: str = "sonic-tts"
    instance_type: str = "ml.g6e.2xlarge"
    #: None = the package of the stack's region from SONIC_MODEL_PACKAGES.
    model_package_arn: str | None = None
    container_startup_timeout_s: int = 900
    #: One of SONIC_SCALING_METRICS.
    scaling_metric: str = "invocations_per_instance"
    #: Target per instance: invocations per minute, or concurrent requests, depending on scaling_metric.
    scaling_target: float = 60.0
    alarm_model_latency_p90_ms: float = 3000.0


@dataclass(frozen=True)
class Settings:
    """All settings of the app. Built only by :func:`load_settings`."""

    region: str = "us-east-1"
    #: Stack names are ``<stack_name_prefix>-Artifacts``, ``-Voxtral`` and ``-Sonic``.
    stack_name_prefix: str = "RealtimeVoice"
    #: Keep the model bucket, the ECR repository and the log groups (and their contents) on ``cdk destroy``.
    retain_data: bool = False
    log_retention_days: int = 30
    #: Subscribe this address to the alarm topic (SNS e-mails a confirmation link first); None = no subscription.
    alarm_email: str | None = None
    voxtral: VoxtralSettings = field(default_factory=VoxtralSettings)
    sonic: SonicSettings = field(default_factory=SonicSettings)

    @property
    def sonic_model_package_arn(self) -> str:
        """The Sonic model package for ``region`` (validated: present whenever Sonic is enabled)."""
        return self.sonic.model_package_arn or SONIC_MODEL_PACKAGES.get(self.region, "")


# --- Parsing --------------------------------------------------------------------------------------------------------

SECTIONS: dict[str, type] = {"": Settings, "voxtral.": VoxtralSettings, "sonic.": SonicSettings}


def _known_keys() -> dict[str, dataclasses.Field]:
    keys: dict[str, dataclasses.Field] = {}
    for prefix, cls in SECTIONS.items():
        for f in dataclasses.fields(cls):
            if f.name in ("voxtral", "sonic"):
                continue
            keys[prefix + f.name] = f
    return keys


KNOWN_KEYS = _known_keys()


def default_context() -> dict[str, Any]:
    """Every setting with its default, as flat dotted keys (what ``cdk.json`` lists)."""
    out: dict[str, Any] = {}
    for prefix, cls in SECTIONS.items():
        instance = cls()
        for f in dataclasses.fields(cls):
            if f.name not in ("voxtral", "sonic"):
                out[prefix + f.name] = getattr(instance, f.name)
    return out


def _is_cdk_key(key: str) -> bool:
    """CDK's own context keys (feature flags ``@aws-cdk/...``, ``aws:cdk:...``, lookups ``x:y``) are not ours."""
    return key.startswith("@") or ":" in key or key in {"acknowledged-issue-numbers", "cli-telemetry"}


_TRUE = {"true", "1", "yes", "on"}
_FALSE = {"false", "0", "no", "off"}
_NONE = {"", "null", "none"}


def _convert(key: str, raw: Any, annotation: str) -> Any:
    """Convert one context value to the field's type; raise ValueError with the allowed form."""
    optional = "None" in annotation
    if optional and (raw is None or (isinstance(raw, str) and raw.strip().lower() in _NONE)):
        return None
    if annotation.startswith("bool"):
        if isinstance(raw, bool):
            return raw
        if isinstance(raw, str) and raw.strip().lower() in _TRUE | _FALSE:
            return raw.strip().lower() in _TRUE
        raise ValueError("must be true or false")
    if annotation.startswith("int"):
        if isinstance(raw, bool):
            raise ValueError("must be a whole number")
        if isinstance(raw, int):
            return raw
        if isinstance(raw, str) and re.fullmatch(r"[+-]?\d+", raw.strip()):
            return int(raw.strip())
        raise ValueError("must be a whole number")
    if annotation.startswith("float"):
        if isinstance(raw, bool):
            raise ValueError("must be a number")
        if isinstance(raw, (int, float)):
            return float(raw)
        try:
            return float(str(raw).strip())
        except ValueError:
            raise ValueError("must be a number") from None
    if not isinstance(raw, str):
        raise ValueError("must be a string" + (" or null" if optional else ""))
    if not optional and raw.strip().lower() in _NONE:
        raise ValueError("must be set: this setting has no 'unset' value (null is allowed for optional settings only)")
    return raw.strip()


def _show(value: Any) -> str:
    return json.dumps(value) if not isinstance(value, str) else repr(value)


def load_settings(context: Mapping[str, Any]) -> Settings:
    """Parse and validate ``context`` (CDK context: cdk.json plus ``-c`` overrides) into :class:`Settings`.

    Args:
        context: flat mapping of context keys to values; ``-c`` values are strings, cdk.json values JSON types.
            Keys owned by the CDK itself (``@aws-cdk/...`` feature flags, keys containing ``:``) are ignored.

    Returns:
        The frozen settings.

    Raises:
        SettingsError: listing every invalid or unknown key, with the value given and what is allowed.
    """
    problems: list[str] = []
    values: dict[str, dict[str, Any]] = {prefix: {} for prefix in SECTIONS}

    for key, raw in context.items():
        if _is_cdk_key(key):
            continue
        f = KNOWN_KEYS.get(key)
        if f is None:
            close = difflib.get_close_matches(key, KNOWN_KEYS, n=1, cutoff=0.6)
            hint = f"; did you mean '{close[0]}'?" if close else f"; known keys: {', '.join(sorted(KNOWN_KEYS))}"
            problems.append(f"unknown setting '{key}'{hint}")
            continue
        prefix = key[: len(key) - len(f.name)]
        try:
            values[prefix][f.name] = _convert(key, raw, str(f.type))
        except ValueError as error:
            problems.append(f"{key}={_show(raw)}: {error}")

    voxtral = VoxtralSettings(**values["voxtral."])
    sonic = SonicSettings(**values["sonic."])
    settings = Settings(**values[""], voxtral=voxtral, sonic=sonic)
    # Validate even when some keys failed to convert (they keep their defaults), so one run reports every problem.
    problems.extend(_validate(settings))
    if problems:
        raise SettingsError(problems)
    return settings


def _regional(add: Callable[[str], None], key: str, value: str, pattern: re.Pattern, form: str, region: str,
              noun: str, hint: str = "") -> re.Match | None:
    """Check that ``value`` matches ``pattern`` (which captures ``region``) and names the stack's region.

    Reports one problem through ``add``: "must be <form>", or "the <noun> is in X but the stack deploys to Y<hint>".
    Returns the match when both hold, else None.
    """
    match = pattern.match(value)
    if not match:
        add(f"{key}={_show(value)}: must be {form}")
    elif match["region"] != region:
        add(f"{key}={_show(value)}: the {noun} is in {match['region']} but the stack deploys to {region}{hint}")
    else:
        return match
    return None


def _validate(s: Settings) -> list[str]:
    """Return one message per rule broken by ``s`` (empty when valid)."""
    problems: list[str] = []
    add = problems.append

    if not REGION_PATTERN.match(s.region):
        add(f"region={_show(s.region)}: must be an AWS region code such as 'us-east-1'")
    if not re.fullmatch(r"[A-Za-z][A-Za-z0-9-]{0,63}", s.stack_name_prefix):
        add(f"stack_name_prefix={_show(s.stack_name_prefix)}: must start with a letter; letters, digits and '-' only")
    if s.log_retention_days not in LOG_RETENTION_DAYS:
        add(f"log_retention_days={s.log_retention_days}: must be one of {', '.join(map(str, LOG_RETENTION_DAYS))}")
    if not s.voxtral.enabled and not s.sonic.enabled:
        add("voxtral.enabled=false and sonic.enabled=false: at least one endpoint must be enabled")

    for section, endpoint in (("voxtral", s.voxtral), ("sonic", s.sonic)):
        if not endpoint.enabled:
            continue
        if not NAME_PATTERN.match(endpoint.endpoint_name) or len(endpoint.endpoint_name) > 63:
            add(
                f"{section}.endpoint_name={_show(endpoint.endpoint_name)}: must be 1-63 letters, digits or '-', "
                "starting and ending with a letter or digit (SageMaker EndpointName)"
            )
        if endpoint.initial_instance_count < 1:
            add(f"{section}.initial_instance_count={endpoint.initial_instance_count}: must be a positive whole number")
        for name in ("model_data_download_timeout_s", "container_startup_timeout_s"):
            value = getattr(endpoint, name)
            if not TIMEOUT_RANGE_S[0] <= value <= TIMEOUT_RANGE_S[1]:
                add(f"{section}.{name}={value}: must be between {TIMEOUT_RANGE_S[0]} and {TIMEOUT_RANGE_S[1]} seconds")
        if endpoint.volume_kms_key_arn is not None:
            _regional(add, f"{section}.volume_kms_key_arn", endpoint.volume_kms_key_arn, KMS_KEY_ARN_PATTERN,
                      "a KMS key or alias ARN (arn:aws:kms:<region>:<account>:key/<key id> or :alias/<name>)",
                      s.region, "key")

    if s.alarm_email is not None and not EMAIL_PATTERN.match(s.alarm_email):
        add(f"alarm_email={_show(s.alarm_email)}: must be one e-mail address such as 'oncall@example.com', or null")
    for section, endpoint in (("voxtral", s.voxtral), ("sonic", s.sonic)):
        if endpoint.enabled:
            problems.extend(_validate_operations(section, endpoint))

    if s.voxtral.enabled:
        problems.extend(_validate_voxtral(s.voxtral, s.region))
    if s.sonic.enabled:
        problems.extend(_validate_sonic(s))
    if s.voxtral.enabled and s.sonic.enabled and s.voxtral.endpoint_name.lower() == s.sonic.endpoint_name.lower():
        add(f"sonic.endpoint_name={_show(s.sonic.endpoint_name)}: must differ from voxtral.endpoint_name "
            "(endpoint names are unique per account and region, case-insensitively)")
    return problems


def _instance_problem(key: str, value: str) -> tuple[str | None, instance_types.InstanceSpec | None]:
    if not instance_types.INSTANCE_TYPE_PATTERN.match(value) or value not in instance_types.sagemaker_instance_types():
        return (f"{key}={_show(value)}: not a SageMaker real-time instance type (expected one of SageMaker's "
                "ProductionVariant types of the form 'ml.<family>.<size>', e.g. 'ml.g6.4xlarge')"), None
    spec = instance_types.lookup(value)
    if spec is None:
        return (f"{key}={_show(value)}: a SageMaker instance type this app has no vCPU and GPU facts for; add it to "
                f"config/instance_types.py or choose one of the GPU types {_gpu_families()}"), None
    return None, spec


def _gpu_families() -> str:
    return ", ".join(sorted({f"ml.{s.family}.*" for s in instance_types.CATALOGUE.values() if s.gpus}))


def max_num_seqs_that_fit(spec: instance_types.InstanceSpec, max_model_len: int, gpu_memory_utilization: float) -> int:
    """How many sequences of ``max_model_len`` tokens fit in the KV cache of one GPU of ``spec``.

    Estimate (documented in README, "GPU memory"): usable = GPU memory x gpu_memory_utilization; KV cache =
    usable - weights - runtime overhead; result = floor(KV cache / (KV bytes per token x max_model_len)).
    vLLM serves the model on one GPU (tensor parallel size 1), so only one GPU's memory counts.
    """
    usable = spec.gpu_memory_gib * 2**30 * gpu_memory_utilization
    kv_cache = usable - VOXTRAL_WEIGHTS_BYTES - VOXTRAL_RUNTIME_OVERHEAD_BYTES
    if kv_cache <= 0:
        return 0
    return int(kv_cache // (VOXTRAL_KV_BYTES_PER_TOKEN * max_model_len))


def _validate_voxtral(v: VoxtralSettings, region: str) -> list[str]:
    problems: list[str] = []
    add = problems.append
    message, spec = _instance_problem("voxtral.instance_type", v.instance_type)
    if message:
        add(message)
    elif spec is not None and spec.gpus == 0:
        add(f"voxtral.instance_type={_show(v.instance_type)}: has no GPU; vLLM needs one (GPU types: {_gpu_families()})")
    if not MODEL_ID_PATTERN.match(v.model_id):
        add(f"voxtral.model_id={_show(v.model_id)}: must be a model hub repository id '<owner>/<name>'")
    if v.model_s3_uri is not None:
        uri = S3_URI_PATTERN.match(v.model_s3_uri)
        if not uri or not uri[2].strip("/"):
            add(f"voxtral.model_s3_uri={_show(v.model_s3_uri)}: must be 's3://<bucket>/<prefix>' with a valid bucket "
                "name (3-63 lower-case letters, digits, '.' or '-') and a non-empty prefix")
        elif re.search(r"[*?\s]|//", uri[2]):
            add(f"voxtral.model_s3_uri={_show(v.model_s3_uri)}: the prefix must be a plain key prefix, without "
                "wildcards ('*', '?'), whitespace or '//'; SageMaker copies every object under it")
    if v.image_uri is not None:
        _regional(add, "voxtral.image_uri", v.image_uri, ECR_IMAGE_PATTERN,
                  "a private ECR image '<account>.dkr.ecr.<region>.amazonaws.com/<repository>:<tag>' or "
                  "'...@sha256:<digest>'", region, "image", "; SageMaker pulls images from the endpoint's region")
    if v.max_model_len < 1:
        add(f"voxtral.max_model_len={v.max_model_len}: must be a positive whole number (tokens; 12.5 per second of audio)")
    if v.max_num_seqs < 1:
        add(f"voxtral.max_num_seqs={v.max_num_seqs}: must be a positive whole number")
    if not 0.1 <= v.gpu_memory_utilization <= 0.98:
        add(f"voxtral.gpu_memory_utilization={v.gpu_memory_utilization}: must be between 0.1 and 0.98")
    if v.inference_ami_version not in INFERENCE_AMI_VERSIONS:
        add(f"voxtral.inference_ami_version={_show(v.inference_ami_version)}: must be one of {', '.join(INFERENCE_AMI_VERSIONS)}")
    if not METRICS_NAMESPACE_PATTERN.match(v.metrics_namespace) or v.metrics_namespace.startswith("AWS/"):
        add(f"voxtral.metrics_namespace={_show(v.metrics_namespace)}: must be 1-255 characters of letters, digits "
            "and . / _ # : - and must not start with 'AWS/'")
    if not REVISION_PATTERN.match(v.model_revision):
        add(f"voxtral.model_revision={_show(v.model_revision)}: must be a full 40-character commit hash of the model "
            "hub repository (a branch or tag such as 'main' can move)")
    if v.stage_model and v.model_s3_uri is not None:
        add(f"voxtral.stage_model=true with voxtral.model_s3_uri={_show(v.model_s3_uri)}: staging writes into the "
            "stack's model bucket; unset voxtral.model_s3_uri or set voxtral.stage_model=false")
    if v.hf_token_secret_arn is not None:
        _regional(add, "voxtral.hf_token_secret_arn", v.hf_token_secret_arn, SECRET_ARN_PATTERN,
                  "a Secrets Manager secret ARN with its 6-character suffix "
                  "(arn:aws:secretsmanager:<region>:<account>:secret:<name>-AbCdEf)", region, "secret")
    if v.hf_token_secret_kms_key_arn is not None:
        if v.hf_token_secret_arn is None:
            add(f"voxtral.hf_token_secret_kms_key_arn={_show(v.hf_token_secret_kms_key_arn)}: set only together with "
                "voxtral.hf_token_secret_arn (the key encrypts that secret)")
        else:
            _regional(add, "voxtral.hf_token_secret_kms_key_arn", v.hf_token_secret_kms_key_arn, KMS_KEY_ONLY_PATTERN,
                      "a KMS key ARN (arn:aws:kms:<region>:<account>:key/<key id>; not an alias, IAM grants need "
                      "the key)", region, "key")
    if spec is not None and spec.gpus and v.max_model_len >= 1 and v.max_num_seqs >= 1 and not problems:
        fits = max_num_seqs_that_fit(spec, v.max_model_len, v.gpu_memory_utilization)
        if fits < v.max_num_seqs:
            add(
                f"voxtral.instance_type={_show(v.instance_type)} with voxtral.max_model_len={v.max_model_len} and "
                f"voxtral.max_num_seqs={v.max_num_seqs}: one {spec.gpu_model} ({spec.gpu_memory_gib:g} GiB) holds "
                f"the weights and KV cache for at most {fits} sequence(s) of that length; lower max_num_seqs or "
                "max_model_len, or choose a GPU with more memory (estimate: README, 'GPU memory')"
            )
    return problems


def _validate_operations(section: str, e: VoxtralSettings | SonicSettings) -> list[str]:
    """Rules for the scaling, rollout and alarm keys of one endpoint (``section`` is ``voxtral`` or ``sonic``)."""
    problems: list[str] = []
    add = problems.append
    if e.min_instances < 1:
        add(f"{section}.min_instances={e.min_instances}: must be at least 1 (a real-time endpoint keeps one instance)")
    elif e.max_instances < e.min_instances:
        add(f"{section}.max_instances={e.max_instances}: must be at least {section}.min_instances={e.min_instances}")
    elif e.initial_instance_count >= 1 and not e.min_instances <= e.initial_instance_count <= e.max_instances:
        add(f"{section}.initial_instance_count={e.initial_instance_count}: must be between {section}.min_instances="
            f"{e.min_instances} and {section}.max_instances={e.max_instances}")
    floor_s = BRIDGE_DRAIN_S if isinstance(e, VoxtralSettings) else 0
    if not floor_s < e.scale_in_cooldown_s <= COOLDOWN_MAX_S:
        reason = f" (longer than the bridge's drain time, DRAIN_S={BRIDGE_DRAIN_S} s)" if floor_s else ""
        add(f"{section}.scale_in_cooldown_s={e.scale_in_cooldown_s}: must be more than {floor_s} and at most "
            f"{COOLDOWN_MAX_S} seconds{reason}")
    for name in ("alarm_5xx_errors", "alarm_4xx_errors"):
        if getattr(e, name) < 0:
            add(f"{section}.{name}={getattr(e, name)}: must be 0 or more (errors in 5 minutes above which the alarm fires)")
    for name in ("alarm_model_latency_p90_ms", "alarm_overhead_latency_p90_ms", "alarm_time_to_first_delta_p90_ms"):
        if hasattr(e, name) and not getattr(e, name) > 0:
            add(f"{section}.{name}={getattr(e, name)}: must be a positive number of milliseconds")
    # The alarms fire when the metric is above the threshold, and no utilisation exceeds 100 % of capacity (per GPU
    # or vCPU for the scaled ones): a threshold of 100 could never fire.
    for name, capacity in PERCENT_THRESHOLDS.items():
        if not 0 < getattr(e, name) < 100:
            add(f"{section}.{name}={getattr(e, name)}: must be a percent of {capacity}, more than 0 and less than 100 "
                "(the alarm fires above it, and use never exceeds 100 %)")
    if isinstance(e, VoxtralSettings):
        if not 0 < e.scaling_target_fraction <= 1:
            add(f"voxtral.scaling_target_fraction={e.scaling_target_fraction}: must be more than 0 and at most 1 "
                "(live streams per instance as a fraction of voxtral.max_num_seqs)")
        elif not e.scaling_target_fraction < e.alarm_active_streams_fraction <= 1:
            add(f"voxtral.alarm_active_streams_fraction={e.alarm_active_streams_fraction}: must be more than "
                f"voxtral.scaling_target_fraction={e.scaling_target_fraction} and at most 1, or the alarm fires "
                "whenever autoscaling holds its target")
        low, high = ROLLOUT_BATCH_PERCENT_RANGE
        if not low <= e.rollout_batch_percent <= high:
            add(f"voxtral.rollout_batch_percent={e.rollout_batch_percent}: must be between {low} and {high} "
                "(percent of the variant's instances; RollingUpdatePolicy MaximumBatchSize)")
        if not 0 < e.rollback_5xx_error_percent < 100:
            add(f"voxtral.rollback_5xx_error_percent={e.rollback_5xx_error_percent}: must be a percent of requests, "
                "more than 0 and less than 100 (the rollback alarm fires above it)")
        low, high = ROLLOUT_WAIT_RANGE_S
        if not low <= e.rollout_wait_s <= high:
            add(f"voxtral.rollout_wait_s={e.rollout_wait_s}: must be between {low} and {high} seconds "
                "(RollingUpdatePolicy WaitIntervalInSeconds)")
        reserved = e.gpu_memory_utilization * 100
        if 0 < e.alarm_gpu_memory_percent < 100 and e.alarm_gpu_memory_percent <= reserved:
            add(f"voxtral.alarm_gpu_memory_percent={e.alarm_gpu_memory_percent}: must be above "
                f"voxtral.gpu_memory_utilization x 100 = {reserved:g}: vLLM reserves that much GPU memory at start, "
                "so the alarm would always fire")
    else:
        if e.scaling_metric not in SONIC_SCALING_METRICS:
            add(f"sonic.scaling_metric={_show(e.scaling_metric)}: must be one of {', '.join(SONIC_SCALING_METRICS)}")
        if not e.scaling_target > 0:
            add(f"sonic.scaling_target={e.scaling_target}: must be a positive number (per instance: invocations per "
                "minute, or concurrent requests)")
    return problems


def _validate_sonic(s: Settings) -> list[str]:
    problems: list[str] = []
    add = problems.append
    message, spec = _instance_problem("sonic.instance_type", s.sonic.instance_type)
    if message:
        add(message)
    elif spec is not None and not (
        spec.family in SONIC_INSTANCE_FAMILIES or spec.name in SONIC_EXTRA_INSTANCE_TYPES
    ):
        add(f"sonic.instance_type={_show(s.sonic.instance_type)}: the Sonic 3.6 model package supports "
            "ml.g6e.xlarge or larger, ml.g7e.2xlarge or larger, ml.g7.2xlarge or larger, ml.p5.48xlarge and "
            "ml.p5en.48xlarge")
    arn = s.sonic.model_package_arn
    if arn is None:
        if s.region not in SONIC_MODEL_PACKAGES:
            add(f"sonic.model_package_arn=null with region={_show(s.region)}: the Sonic model package ARN is known "
                f"only for {', '.join(SONIC_MODEL_PACKAGES)}; set sonic.model_package_arn to the ARN from the "
                "Marketplace listing for your region, or set sonic.enabled=false")
    else:
        _regional(add, "sonic.model_package_arn", arn, MODEL_PACKAGE_ARN_PATTERN,
                  "'arn:aws:sagemaker:<region>:<account>:model-package/<name>'", s.region, "package",
                  f"; use the package ARN for {s.region}")
    return problems
