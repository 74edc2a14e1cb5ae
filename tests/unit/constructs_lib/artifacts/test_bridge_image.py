"""BridgeImage in a bare stack: a build context or an image in the stack's region."""

from __future__ import annotations

import pytest

from constructs_lib.artifacts.bridge_image import BridgeImage, BridgeImageProps
from constructs_lib.monitoring.topic import AlarmTopic
from constructs_lib.sagemaker_endpoint.execution_role import SageMakerExecutionRole
from constructs_lib.sagemaker_endpoint.monitored_endpoint import MonitoredEndpoint
from constructs_lib.sagemaker_endpoint.scaling_props import INVOCATIONS_PER_INSTANCE, InstanceScaling, TargetTracking
from constructs_lib.validation import PropsError
from tests.unit.constructs_lib.construct_kit import ACCOUNT, bare_stack


SCALING = InstanceScaling(1, 3, TargetTracking(target_value=60, predefined_metric=INVOCATIONS_PER_INSTANCE))


def test_bridge_image_needs_a_build_context_or_an_image_in_the_stack_region(tmp_path):
    stack = bare_stack()
    with pytest.raises(PropsError, match="container_dir or prebuilt_image_uri: give one"):
        BridgeImage(stack, "None", BridgeImageProps())
    with pytest.raises(PropsError, match=r"container_dir='.*': must be a folder with a Dockerfile"):
        BridgeImage(stack, "Empty", BridgeImageProps(container_dir=tmp_path))
    with pytest.raises(PropsError, match="the image is in eu-west-1 but the stack deploys to us-east-1"):
        BridgeImage(stack, "Elsewhere", BridgeImageProps(
            prebuilt_image_uri=f"{ACCOUNT}.dkr.ecr.eu-west-1.amazonaws.com/bridge:1"))
    image = BridgeImage(stack, "Prebuilt", BridgeImageProps(
        prebuilt_image_uri=f"{ACCOUNT}.dkr.ecr.us-east-1.amazonaws.com/bridge:1"))
    assert (image.image_uri, image.copy, image.tag) == (f"{ACCOUNT}.dkr.ecr.us-east-1.amazonaws.com/bridge:1", None, None)
