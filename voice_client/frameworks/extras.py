"""The frameworks are optional dependencies: an adapter imported without its framework says which
extra to install, not only which module is missing."""

from __future__ import annotations


def framework_missing(error: ModuleNotFoundError, extra: str) -> ModuleNotFoundError:
    """``error`` with how to install ``extra`` when the missing module is the framework's: each
    extra is named after the top-level module it installs (pyproject.toml
    [project.optional-dependencies]: ``pipecat`` installs pipecat-ai, ``livekit`` livekit-agents).
    A framework installed without one of its own dependencies is left as it is."""
    if (error.name or "").split(".")[0] != extra:
        return error
    return ModuleNotFoundError(
        f"{error.msg}: the {extra} services need the '{extra}' extra: pip install "
        f"'sagemaker-realtime-voice[{extra}]', or `make agents-deps` in the repository",
        name=error.name,
        path=error.path,
    )
