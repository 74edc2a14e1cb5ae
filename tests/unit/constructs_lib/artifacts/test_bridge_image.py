"""BridgeImage in a bare stack: a build context or an image in the stack's region."""

from __future__ import annotations

import pytest
from aws_cdk import Stack

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
    (tmp_path / "container").mkdir()
    (tmp_path / "container" / "Dockerfile").write_text("FROM scratch\n")
    with pytest.raises(
        PropsError,
        match=r"container_dir='.*/container': must sit beside "
        r"contracts/, which the bridge imports \(the build "
        r"context is their parent\)",
    ):
        BridgeImage(stack, "NoContracts", BridgeImageProps(container_dir=tmp_path / "container"))
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
    endpoint for nothing. Nor may anything else of the repository beside the bridge's folder and
    the contracts; a change in either makes a new image."""
    container, contracts = tmp_path / "container", tmp_path / "contracts"
    (container / "bridge").mkdir(parents=True)
    contracts.mkdir()
    (container / "Dockerfile").write_text(
        "FROM scratch\nCOPY container/bridge /bridge\nCOPY contracts /contracts\n"
    )
    (container / "bridge" / "server.py").write_text("ANSWER = 42\n")
    (contracts / "realtime.py").write_text("PORT = 8080\n")

    def tag() -> str:
        return BridgeImage(bare_stack(), "Image", BridgeImageProps(container_dir=container)).tag

    clean = tag()
    for folder in (container / "bridge", contracts):
        (folder / "__pycache__").mkdir()
        (folder / "__pycache__" / "module.cpython-312.pyc").write_bytes(b"\x00bytecode")
        (folder / "stray.pyc").write_bytes(b"\x00bytecode")
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_other.py").write_text("ANSWER = 1\n")  # the rest of the repository
    (tmp_path / "README.md").write_text("words\n")
    assert tag() == clean
    (contracts / "realtime.py").write_text("PORT = 8081\n")  # a change in the contracts: new image
    assert tag() not in (clean, None)
    changed = tag()
    (container / "bridge" / "server.py").write_text("ANSWER = 43\n")  # and in the bridge's sources
    assert tag() not in (clean, changed)


def test_the_build_context_is_the_bridge_and_the_contracts(tmp_path):
    """The staged context of the project's own image (what `docker build` receives, staged when the
    construct is made) holds container/ and contracts/ and nothing else, without bytecode
    (tests/bridge/test_dockerfile.py: the Dockerfile copies both)."""
    from tests.conftest import ROOT
    from tests.unit.constructs_lib.construct_kit import unit_app

    stack = Stack(
        unit_app(outdir=str(tmp_path)), "Image", env={"account": ACCOUNT, "region": "us-east-1"}
    )
    image = BridgeImage(stack, "Bridge", BridgeImageProps(container_dir=ROOT / "container"))
    staged = tmp_path / f"asset.{image.tag}"
    files = {str(p.relative_to(staged)) for p in staged.rglob("*") if p.is_file()}
    expected = {
        str(p.relative_to(ROOT))
        for folder in ("container", "contracts")
        for p in (ROOT / folder).rglob("*")
        if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc"
    }
    assert files == expected
    assert {
        "container/Dockerfile",
        "container/bridge/server.py",
        "contracts/bridge_env.py",
    } <= files
