"""Facts about the model files and the staging defaults, each with its source.

Pure constants (no AWS or CDK imports): the staging build runs them alone, and ``voicectl``
imports them from here, so each fact is written once. The model's identity and revision rules, and
the manifest's name, are the contracts' (:mod:`contracts.model`, :mod:`contracts.weights`): the
settings, the bridge and the clients share them.
"""

from __future__ import annotations

from typing import Final

# The files vLLM needs to serve the model, and nothing else (README, .gitattributes and any
# Transformers-format copies stay out of the prefix, because SageMaker copies the whole prefix to
# /opt/ml/model).
#
# The repository publishes the model in Mistral's native format: params.json, tekken.json and
# consolidated.safetensors (the repository's first commit holds exactly these three files plus
# README.md and .gitattributes; the model card serves it with vLLM). vLLM loads that format with
#   --config-format mistral: reads params.json
#       (vllm/transformers_utils/config.py, MistralConfigParser)
#   --tokenizer-mode mistral: reads tekken.json
#       (vllm/tokenizers/mistral.py, mistral_common Tekkenizer)
#   --load-format mistral: reads consolidated*.safetensors, and consolidated.safetensors.index.json
#       when the weights are sharded (vllm/model_executor/model_loader/default_loader.py,
#       allow_patterns=["consolidated*.safetensors"])
# vLLM's own test for this model uses the same three settings (tests/models/multimodal/generation/
# test_voxtral_realtime.py: config_format, load_format and tokenizer_mode all "mistral").
#: Configuration file (Mistral format).
CONFIG_FILE: Final = "params.json"
#: Tokenizer file (Tekken, mistral_common).
TOKENIZER_FILE: Final = "tekken.json"
#: Weight files (glob, fnmatch syntax).
WEIGHTS_PATTERN: Final = "consolidated*.safetensors"
#: Index naming the shard of every tensor, present only when the weights are sharded.
WEIGHTS_INDEX_FILE: Final = "consolidated.safetensors.index.json"
#: The allow-list given to huggingface_hub.snapshot_download and applied to --from-dir.
MODEL_FILE_PATTERNS: Final[tuple[str, ...]] = (
    CONFIG_FILE,
    TOKENIZER_FILE,
    WEIGHTS_PATTERN,
    WEIGHTS_INDEX_FILE,
)
#: Files that must be present whatever the sharding.
REQUIRED_FILES: Final[tuple[str, ...]] = (CONFIG_FILE, TOKENIZER_FILE)

#: Names that look like model files of some format (weights, Transformers configuration and
#: tokenizer files). ``stage-model --delete-extra`` deletes an object that is not part of the model
#: only when it sits directly in the prefix and matches MODEL_FILE_PATTERNS or one of these (or was
#: listed by the prefix's previous manifest); anything else under the prefix is left for the user to
#: remove.
DELETABLE_EXTRA_PATTERNS: Final[tuple[str, ...]] = (
    *MODEL_FILE_PATTERNS,
    "*.safetensors",
    "*.safetensors.index.json",
    "*.bin",
    "*.bin.index.json",
    "*.pt",
    "*.pth",
    "*.gguf",
    "config.json",
    "generation_config.json",
    "preprocessor_config.json",
    "processor_config.json",
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
)

#: Environment variable huggingface_hub reads the access token from
#: (https://huggingface.co/docs/huggingface_hub/package_reference/environment_variables#hftoken).
HF_TOKEN_ENV: Final = "HF_TOKEN"

#: Object metadata key (x-amz-meta-sha256) holding the hex SHA-256 of the whole file, set when it is
#: uploaded.
SHA256_METADATA_KEY: Final = "sha256"

MIB: Final = 1024 * 1024
#: Default multipart part size, bytes. 64 MiB keeps an 8.3 GB file at ~130 parts (S3 allows 10,000
#: parts of 5 MiB to 5 GiB each: https://docs.aws.amazon.com/AmazonS3/latest/userguide/qfacts.html)
#: and bounds the memory of the resume path (max_concurrency x part size).
DEFAULT_PART_SIZE: Final = 64 * MIB
#: S3's smallest part size except the last one, bytes (same page).
MIN_PART_SIZE: Final = 5 * MIB
#: Default number of parts in flight.
DEFAULT_MAX_CONCURRENCY: Final = 10

# CloudFormation output keys the stage-model command reads when given --stack instead of --s3-uri.
# The stack that owns the model prefix defines them (CfnOutput ids at the stack's top level become
# these keys).
#: Output holding the model prefix, s3://bucket/prefix/.
OUTPUT_MODEL_S3_URI: Final = "ModelS3Uri"
#: Output holding the Hub repository id.
OUTPUT_MODEL_REPOSITORY_ID: Final = "ModelRepositoryId"
#: Output holding the pinned revision.
OUTPUT_MODEL_REVISION: Final = "ModelRevision"
