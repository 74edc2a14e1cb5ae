"""The bridge container's environment from the settings, on either target, and its check: what the
container would refuse (``contracts.bridge_env``) is a settings problem under the ``voxtral.*`` key
the value came from, found before any construct is built.

A ``voxtral.*`` setting reaches the bridge by its declaration alone: a field of
:class:`~config.voxtral.VoxtralSettings` declared with ``setting(default, bridge="<field>")``, the
:class:`~contracts.bridge_env.BridgeEnvironment` field that carries its value
(docs/architecture.md, "Adding a bridge setting"). :func:`bridge_environment` passes each such value
on, and its problems are named by its key (:data:`SETTING_OF_FIELD`).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Final

from config import context as ctx
from config.models import BRIDGE_DRAIN_S
from config.voxtral import VoxtralSettings
from constructs_lib.sagemaker_endpoint.props import VARIANT_NAME
from contracts.bridge_env import BridgeEnvError, BridgeEnvironment

if TYPE_CHECKING:
    from config.settings import Settings

#: vLLM's compilation config for Voxtral Realtime (model card's serving command): piecewise CUDA
#: graphs.
COMPILATION_CONFIG: Final = {"cudagraph_mode": "PIECEWISE"}
#: vLLM --mm-processor-cache-gb, GiB. vLLM 0.31.0's default is 4, held once by the API server
#: process and once by the engine core (vllm/config/multimodal.py: "duplicated for each API process
#: and engine core process"): up to 8 GiB of host memory on the default ml.g6.xlarge, which has 16
#: GiB. A live stream's audio is new at every append, so the cache saves little here; 1 GiB each
#: bounds it. Unconfirmed on a GPU until bench/capacity_bench.py runs there.
MM_PROCESSOR_CACHE_GB: Final = 1
#: Where SageMaker puts the Model's weights in the container (ModelDataSource's S3DataSource).
SAGEMAKER_MODEL_DIR: Final = "/opt/ml/model"


def declared_bridge_settings(section: type) -> dict[str, str]:
    """``{BridgeEnvironment field: section field}`` of ``section``'s fields declared with
    ``setting(..., bridge=...)``.

    Raises:
        TypeError: a declaration names no field of BridgeEnvironment, or a field another one names
            too (a misspelt or doubled declaration: said when the settings load, naming the
            settings field, not as a TypeError from BridgeEnvironment at every synth).
    """
    environment = {item.name for item in dataclasses.fields(BridgeEnvironment)}
    declared: dict[str, str] = {}
    wrong: list[str] = []
    for item in dataclasses.fields(section):
        field = item.metadata.get(ctx.BRIDGE)
        if field is None:
            continue
        if field not in environment or field in declared:
            wrong.append(f"{section.__name__}.{item.name}: bridge={field!r}")
        declared[field] = item.name
    if wrong:
        raise TypeError(
            f"{', '.join(wrong)}: must name a field of contracts.bridge_env.BridgeEnvironment that "
            "no other setting names"
        )
    return declared


#: ``{BridgeEnvironment field: VoxtralSettings field}`` of the settings declared with ``bridge=``:
#: :func:`bridge_environment` passes their values on as they are, or as the app resolves them (the
#: stream cap, which the capacity plan works out from ``auto``; the KV-cache type, left unset at
#: ``auto``).
BRIDGE_SETTINGS: Final[Mapping[str, str]] = declared_bridge_settings(VoxtralSettings)
#: ``{BridgeEnvironment field: VoxtralSettings field}`` of every field a setting's value reaches, so
#: that a value the bridge refuses is named by its key: :data:`BRIDGE_SETTINGS`, the bridge's
#: MAX_MODEL_LEN and MAX_STREAMS (which default to vLLM's flags), and the SageMaker Model's
#: endpoint name (on ECS the service sets its own). Every other field the app sets is in
#: :data:`APP_FIELDS`.
SETTING_OF_FIELD: Final[Mapping[str, str]] = {
    **BRIDGE_SETTINGS,
    "max_model_len": BRIDGE_SETTINGS["vllm_max_model_len"],
    "max_streams": BRIDGE_SETTINGS["vllm_max_num_seqs"],
    "endpoint_name": "endpoint_name",
}
#: The fields the app sets from no setting: its constants, the capacity model's KV-cache blocks and
#: the SageMaker variant's name and drain.
APP_FIELDS: Final = frozenset(
    {
        "vllm_model",
        "vllm_compilation_config",
        "vllm_mm_processor_cache_gb",
        "vllm_tokenizer_mode",
        "vllm_config_format",
        "vllm_load_format",
        "offline",
        "kv_blocks_per_stream",
        "variant_name",
        "drain_s",
    }
)


def bridge_environment(settings: Settings, instance_type: str | None = None) -> BridgeEnvironment:
    """The bridge container's environment on ``instance_type`` (default: the first type the
    service may run), on either target: the values of the settings declared with ``bridge=``
    (:data:`BRIDGE_SETTINGS`), vLLM's other flags, the offline switch and the KV-cache check. Where
    the container runs adds the rest (:func:`container_environment` on SageMaker; on ECS the
    service construct).

    ``SM_VLLM_<NAME>`` becomes the vLLM flag ``--<name-with-dashes>`` (the container's
    entrypoint); the rest configures the bridge (services/bridge/README.md). No secrets. The stream
    cap (vLLM ``--max-num-seqs``, the bridge's MAX_STREAMS by default) is that instance type's own.
    """
    voxtral = settings.voxtral
    planned = (
        settings.capacity_plan.of(instance_type)
        if instance_type is not None
        else settings.capacity_plan.first
    )
    fitted = planned.capacity
    given = BridgeEnvironment(
        **{field: getattr(voxtral, name) for field, name in BRIDGE_SETTINGS.items()}
    )
    return dataclasses.replace(
        given,
        # The settings' values the app resolves: the type's stream cap (``auto``: the capacity
        # plan's), and vLLM --kv-cache-dtype left out at "auto" (vLLM's default), so the default
        # Model is unchanged.
        vllm_max_num_seqs=planned.stream_cap,
        vllm_kv_cache_dtype=voxtral.kv_cache_dtype if voxtral.kv_cache_dtype != "auto" else None,
        vllm_model=SAGEMAKER_MODEL_DIR,
        vllm_compilation_config=json.dumps(COMPILATION_CONFIG),
        vllm_mm_processor_cache_gb=MM_PROCESSOR_CACHE_GB,
        # The checkpoint is in Mistral's format (params.json, tekken.json,
        # consolidated.safetensors).
        vllm_tokenizer_mode="mistral",
        vllm_config_format="mistral",
        vllm_load_format="mistral",
        # The Model runs with network isolation: nothing in the image may try the internet. The
        # weights are local (/opt/ml/model), so the Hugging Face libraries stay offline, and vLLM's
        # usage statistics are off (contracts.bridge_env.OFFLINE_ENVIRONMENT). The bridge's metrics
        # need no network: EMF lines on stdout, which SageMaker ships to the endpoint's log group.
        offline=True,
        # KV-cache blocks one live stream holds (constructs_lib/facts/capacity.py): the bridge
        # divides vLLM's reported num_gpu_blocks by it and lowers its stream cap when vLLM holds
        # fewer streams than MAX_STREAMS.
        kv_blocks_per_stream=fitted.stream_blocks if fitted is not None else None,
    )


def sagemaker_bridge_environment(
    settings: Settings, instance_type: str | None = None
) -> BridgeEnvironment:
    """:func:`bridge_environment` as the SageMaker Model's container gets it: with the endpoint and
    variant its metrics are named by, and its drain after SIGTERM (the scale-in cooldown is
    longer)."""
    return dataclasses.replace(
        bridge_environment(settings, instance_type),
        endpoint_name=settings.voxtral.endpoint_name,
        variant_name=VARIANT_NAME,
        drain_s=BRIDGE_DRAIN_S,
    )


def container_environment(settings: Settings, instance_type: str | None = None) -> dict[str, str]:
    """Environment of the SageMaker Model's bridge container on ``instance_type``
    (:func:`sagemaker_bridge_environment`, as variables)."""
    return sagemaker_bridge_environment(settings, instance_type).to_env()


def pool_environment(settings: Settings) -> dict[str, dict[str, str]]:
    """``{instance type: the variables that differ}`` for each instance pool after the first whose
    container environment differs from the first pool's (its stream cap in the capacity plan): those
    pools run a Model of their own (InstancePool ModelNameOverride), so every GPU runs at its own
    cap."""
    pools = list(dict.fromkeys(settings.voxtral.instance_pools))
    if not pools:
        return {}
    first = container_environment(settings, pools[0])
    result = {}
    for instance_type in pools[1:]:
        env = container_environment(settings, instance_type)
        changed = {key: value for key, value in env.items() if first.get(key) != value}
        if changed:
            result[instance_type] = changed
    return result


def bridge_problems(settings: Settings) -> list[str]:
    """What the bridge container would refuse in the environment the settings give it, on each
    instance type the Voxtral service may run, as problems under the ``voxtral.*`` key each value
    came from (empty when it would start). For settings whose own checks passed: the environment
    is built from them."""
    on_sagemaker = settings.voxtral.target == "sagemaker"
    build = sagemaker_bridge_environment if on_sagemaker else bridge_environment
    problems: list[str] = []
    for planned in settings.capacity_plan.types:
        try:
            build(settings, planned.instance_type).to_env()
        except BridgeEnvError as error:
            problem = _named(settings.voxtral, error)
            if problem not in problems:
                problems.append(problem)
    return problems


def _named(voxtral: VoxtralSettings, error: BridgeEnvError) -> str:
    """``error`` under the key its variable's value came from."""
    fields = {BridgeEnvironment.variable(name): name for name in SETTING_OF_FIELD}
    setting = SETTING_OF_FIELD.get(fields.get(error.variable or "", ""))
    if setting is None:  # a value of the app's own: a defect of the app, still said, never a crash
        return f"the bridge container would refuse its environment: {error}"
    p = VoxtralSettings.problems_named("voxtral.")
    p.add(
        setting,
        getattr(voxtral, setting),
        f"{error.rule} (the bridge container's {error.variable})",
    )
    return next(iter(p))
