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
        r"context is their parent\), or give context_dir: the folder that holds both",
    ):
        BridgeImage(stack, "NoContracts", BridgeImageProps(container_dir=tmp_path / "container"))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    with pytest.raises(
        PropsError,
        match=rf"container_dir='.*/container': must be inside context_dir '{elsewhere}' "
        r"\(the build context\)",
    ):
        BridgeImage(
            stack,
            "Outside",
            BridgeImageProps(container_dir=tmp_path / "container", context_dir=elsewhere),
        )
    with pytest.raises(
        PropsError, match=r"container_dir='.*': must be a folder inside context_dir, not"
    ):
        BridgeImage(
            stack,
            "Itself",
            BridgeImageProps(
                container_dir=tmp_path / "container", context_dir=tmp_path / "container"
            ),
        )
    with pytest.raises(
        PropsError,
        match=rf"context_dir='{tmp_path}': must hold contracts/, which the bridge imports",
    ):
        BridgeImage(
            stack,
            "ContextWithoutContracts",
            BridgeImageProps(container_dir=tmp_path / "container", context_dir=tmp_path),
        )
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


@pytest.mark.parametrize("nested", [False, True], ids=["beside", "nested"])
def test_bytecode_beside_the_sources_leaves_the_image_and_its_tag_unchanged(tmp_path, nested):
    """Running the bridge or its tests writes __pycache__ into the build context; the tag (the asset
    hash) must not follow it, or a deploy after `make test` would build a new image and update the
    endpoint for nothing. Nor may anything else of the repository beside the bridge's folder and
    the contracts; a change in either makes a new image. Both layouts: the bridge's folder beside
    the contracts (the default context, its parent), and deeper in the context (this project's
    services/bridge, with context_dir), where the rest of services/ stays out too."""
    contracts = tmp_path / "contracts"
    container = tmp_path / "services" / "bridge" if nested else tmp_path / "container"
    container.mkdir(parents=True)
    contracts.mkdir()
    (container / "Dockerfile").write_text(
        "FROM scratch\nCOPY services/bridge/*.py /bridge/\nCOPY contracts /contracts\n"
    )
    (container / "server.py").write_text("ANSWER = 42\n")
    (contracts / "realtime.py").write_text("PORT = 8080\n")
    context = {"context_dir": tmp_path} if nested else {}

    def tag() -> str:
        props = BridgeImageProps(container_dir=container, **context)
        return BridgeImage(bare_stack(), "Image", props).tag

    clean = tag()
    for folder in (container, contracts):
        (folder / "__pycache__").mkdir()
        (folder / "__pycache__" / "module.cpython-312.pyc").write_bytes(b"\x00bytecode")
        (folder / "stray.pyc").write_bytes(b"\x00bytecode")
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_other.py").write_text("ANSWER = 1\n")  # the rest of the repository
    (tmp_path / "README.md").write_text("words\n")
    (tmp_path / "services" / "other").mkdir(parents=True)  # another service beside the bridge
    (tmp_path / "services" / "other" / "main.py").write_text("ANSWER = 2\n")
    (container / "README.md").write_text("how the bridge works\n")  # documentation: no new image
    assert tag() == clean
    (contracts / "realtime.py").write_text("PORT = 8081\n")  # a change in the contracts: new image
    assert tag() not in (clean, None)
    changed = tag()
    (container / "server.py").write_text("ANSWER = 43\n")  # and in the bridge's sources
    assert tag() not in (clean, changed)


def test_the_build_context_is_the_bridge_and_the_contracts(tmp_path):
    """The staged context of the project's own image (what `docker build` receives, staged when the
    construct is made, with the app's folders: config/models.py) holds services/bridge/ and
    contracts/ and nothing else, without bytecode (tests/bridge/test_dockerfile.py: the Dockerfile
    copies from both)."""
    from config.models import BRIDGE_CONTAINER_DIR, BRIDGE_CONTEXT_DIR
    from tests.conftest import ROOT
    from tests.unit.constructs_lib.construct_kit import unit_app

    assert (BRIDGE_CONTAINER_DIR, BRIDGE_CONTEXT_DIR) == (ROOT / "services" / "bridge", ROOT)
    stack = Stack(
        unit_app(outdir=str(tmp_path)), "Image", env={"account": ACCOUNT, "region": "us-east-1"}
    )
    props = BridgeImageProps(container_dir=BRIDGE_CONTAINER_DIR, context_dir=BRIDGE_CONTEXT_DIR)
    image = BridgeImage(stack, "Bridge", props)
    staged = tmp_path / f"asset.{image.tag}"
    files = {str(p.relative_to(staged)) for p in staged.rglob("*") if p.is_file()}
    expected = {
        str(p.relative_to(ROOT))
        for folder in ("services/bridge", "contracts")
        for p in (ROOT / folder).rglob("*")
        if p.is_file() and "__pycache__" not in p.parts and p.suffix not in (".pyc", ".md")
    }
    assert files == expected
    assert "services/bridge/README.md" not in files
    assert {
        "services/bridge/Dockerfile",
        "services/bridge/server.py",
        "contracts/bridge_env.py",
    } <= files
    assert not any(path.startswith("services/connect_consumer/") for path in files)
