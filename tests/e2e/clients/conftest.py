"""The clients' end-to-end tests (the mic page in a real browser, transcribe through the bridge) use
the clients' unit-test fixtures of tests/unit/voice_client/conftest.py."""

from tests.unit.voice_client.conftest import parse, recording  # noqa: F401 (pytest finds fixtures by name)
