"""Fixtures for the command tests: the client tests' parser, recording and SageMaker runtime
stand-in (``tests/unit/voice_client/clients_testkit.py``)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.unit.voice_client.clients_testkit import RECORDING, ResponseStreamServer, client_parser
from tests.unit.voice_client.token_testkit import secrets  # noqa: F401 (a fixture)


@pytest.fixture
def parse():
    """Parse a voicectl command line (list of arguments) into a Namespace."""
    return client_parser().parse_args


@pytest.fixture
def recording() -> Path:
    return RECORDING


@pytest.fixture
def sagemaker_runtime() -> Iterator[ResponseStreamServer]:
    with ResponseStreamServer() as server:
        yield server
