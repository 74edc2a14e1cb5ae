"""Fixtures of the client tests left here (the browser and end-to-end ones): the same as the unit tests'
(``tests/unit/voicectl/clients/conftest.py``), over the same kit (``clients_testkit.py`` there)."""

from tests.unit.voicectl.clients.conftest import memory_server, parse, recording, sagemaker_runtime  # noqa: F401
