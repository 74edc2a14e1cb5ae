"""The clients' end-to-end tests (the mic page in a real browser, transcribe through the bridge) use
the clients' unit-test fixtures of tests/unit/voicectl/clients/conftest.py."""

from tests.unit.voicectl.clients.conftest import parse, recording  # noqa: F401 (pytest finds fixtures by name)
