"""BridgeImage in a bare stack: a build context or an image in the stack's region."""

from __future__ import annotations

import pytest

from constructs_lib.artifacts.bridge_image import BridgeImage, BridgeImageProps
from constructs_lib.sagemaker_endpoint.scaling_props import (
    INVOCATIONS_PER_INSTANCE,
    InstanceScaling,
    TargetTracking,
)
from constructs_lib.validation import PropsError
from tests.unit.constructs_lib.construct_kit import ACCOUNT, bare_stack

SCALING = InstanceScaling(
    1, 3, TargetTracking(target_value=60, predefined_metric=INVOCATIONS_PER_INSTANCE)
)


def test_bridge_image_needs_a_build_context_or_an_image_in_the_stack_region(tmp_path):
    stack = bare_stack()
    with pytest.raises(PropsError, match="container_dir or prebuilt_image_uri: give one"):
        BridgeImage(stack, "None", BridgeImageProps())
    with pytest.raises(PropsError, match=r"container_dir='.*': must be a folder with a Dockerfile"):
        BridgeImage(stack, "Empty", BridgeImageProps(container_dir=tmp_path))
    with pytest.raises(
        PropsError, match="the image is in eu-west-1 but the stack deploys to us-east-1"
    ):
        BridgeImage(
            stack,
            "Elsewhere",
            BridgeImageProps(
                prebuilt_image_uri=f"{ACCOUNT}.dkr.ecr.eu-west-1.amazonaws.com/bridge:1"
            ),
        )
    image = BridgeImage(
        stack,
        "Prebuilt",
        BridgeImageProps(prebuilt_image_uri=f"{ACCOUNT}.dkr.ecr.us-east-1.amazonaws.com/bridge:1"),
    )
    assert (image.image_uri, image.copy, image.tag) == (
        f"{ACCOUNT}.dkr.ecr.us-east-1.amazonaws.com/bridge:1",
        None,
        None,
    )


def test_bytecode_beside_the_sources_leaves_the_image_and_its_tag_unchanged(tmp_path):
    """Running the bridge or its tests writes __pycache__ into the build context; the tag (the asset
    hash) must not follow it, or a deploy after `make test` would build a new image and update the
    endpoint for nothing."""
    (tmp_path / "Dockerfile").write_text("FROM scratch\nCOPY bridge /bridge\n")
    (tmp_path / "bridge").mkdir()
    (tmp_path / "bridge" / "server.py").write_text("ANSWER = 42\n")
    clean = BridgeImage(bare_stack(), "Image", BridgeImageProps(container_dir=tmp_path)).tag
    (tmp_path / "bridge" / "__pycache__").mkdir()
    (tmp_path / "bridge" / "__pycache__" / "server.cpython-312.pyc").write_bytes(b"\x00bytecode")
    (tmp_path / "bridge" / "stray.pyc").write_bytes(b"\x00bytecode")
    assert BridgeImage(bare_stack(), "Image", BridgeImageProps(container_dir=tmp_path)).tag == clean
    (tmp_path / "bridge" / "server.py").write_text(
        "ANSWER = 43\n"
    )  # a source change still makes a new image
    assert BridgeImage(bare_stack(), "Image", BridgeImageProps(container_dir=tmp_path)).tag != clean
