"""The clients' end-to-end tests (the mic page in a real browser, transcribe through the bridge) use the clients'
fixtures of tests/clients/conftest.py."""

from tests.clients.conftest import parse, recording  # noqa: F401 (pytest finds fixtures by their name here)
