"""Fixtures for the client tests (what they stand on: ``clients_testkit.py``)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.unit.voice_client.clients_testkit import (
    RECORDING,
    MemoryServer,
    ResponseStreamServer,
    client_parser,
)


@pytest.fixture
def parse():
    """Parse a voicectl command line (list of arguments) into a Namespace."""
    return client_parser().parse_args


@pytest.fixture
def recording() -> Path:
    return RECORDING


@pytest.fixture
def memory_server() -> MemoryServer:
    return MemoryServer()


@pytest.fixture
def sagemaker_runtime() -> Iterator[ResponseStreamServer]:
    with ResponseStreamServer() as server:
        yield server
