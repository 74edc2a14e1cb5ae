"""What the tests of the two cleanup handlers (services/handlers/cleanup/) share: the handler
module loaded as Lambda loads it, moto's credentials in the environment, and a one-request server at
the CloudFormation response URL. Used by test_network_interfaces.py and test_instance_protection.py
beside it."""

from __future__ import annotations

import contextlib
import importlib.util
import json
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from types import ModuleType
from typing import ClassVar

from tests.conftest import ROOT

HANDLERS = ROOT / "services" / "handlers" / "cleanup"
REGION = "us-east-1"


def handler_module(name: str) -> ModuleType:
    """``services/handlers/cleanup/<name>.py`` as Lambda loads it: its directory on the path
    (it imports ``cfn_response`` from there)."""
    if str(HANDLERS) not in sys.path:
        sys.path.append(str(HANDLERS))
    spec = importlib.util.spec_from_file_location(name, HANDLERS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def moto_environment(monkeypatch) -> None:
    """Credentials and Region for boto3 under moto (never real ones)."""
    for key, value in {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": REGION,
    }.items():
        monkeypatch.setenv(key, value)


class _Responses(BaseHTTPRequestHandler):
    bodies: ClassVar[list[dict]] = []

    def do_PUT(self):  # http.server's name
        self.bodies.append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
        self.send_response(200)
        self.end_headers()

    def log_message(self, *args):
        pass


@contextlib.contextmanager
def response_url(path: str = "/response") -> Iterator[tuple[str, list[dict]]]:
    """A server on 127.0.0.1 that takes one PUT (the handler's answer to CloudFormation); yields its
    URL and the list the JSON body lands in."""
    bodies: list[dict] = []
    handler = type("Responses", (_Responses,), {"bodies": bodies})
    server = HTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.handle_request, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_port}{path}", bodies
    finally:
        server.server_close()
