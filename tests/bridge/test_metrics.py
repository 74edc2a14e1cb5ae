"""The bridge under network isolation: its metrics need no network. SageMaker ships a container's
stdout to the endpoint's log group, and CloudWatch turns the embedded-metric-format lines there into
metrics, so a Model with EnableNetworkIsolation (no route anywhere) still reports ActiveStreams and
the rest."""

from __future__ import annotations

import json
import os
import socket

import pytest

from bridge.metrics import BridgeMetrics


@pytest.fixture
def isolated(monkeypatch):
    """The Voxtral container's environment as the stack sets it, and every outbound connection
    refused, as network isolation does (any attempt fails the test through the recorded list)."""
    from config.bridge import container_environment
    from config.settings import default_context, load_settings
    from contracts.bridge_env import OFFLINE_ENVIRONMENT

    environment = container_environment(load_settings(default_context()))
    assert {k: environment[k] for k in OFFLINE_ENVIRONMENT} == OFFLINE_ENVIRONMENT
    for name, value in environment.items():
        monkeypatch.setenv(name, value)
    attempts: list[object] = []

    def refuse(self, address, *args):
        attempts.append(address)
        raise OSError(101, "Network is unreachable (network isolation)")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket.socket, "connect_ex", refuse)
    monkeypatch.setattr(
        socket, "getaddrinfo", lambda *a, **k: (attempts.append(a), refuse(None, None))[1]
    )
    return environment, attempts


def test_metrics_reach_stdout_without_any_network(isolated, capsys):
    environment, attempts = isolated
    metrics = BridgeMetrics(
        os.environ["METRICS_NAMESPACE"], os.environ["ENDPOINT_NAME"], os.environ["VARIANT_NAME"]
    )
    metrics.stream_opened()
    metrics.stream_closed(2.5, 180.0)
    metrics.flush()
    (line,) = [
        json.loads(text) for text in capsys.readouterr().out.splitlines() if '"_aws"' in text
    ]
    directive = line["_aws"]["CloudWatchMetrics"][0]
    assert directive["Namespace"] == environment["METRICS_NAMESPACE"] == "RealtimeVoice/Bridge"
    assert (line["EndpointName"], line["VariantName"]) == ("voxtral-realtime", "AllTraffic")
    assert (
        line["ActiveStreams"],
        line["StreamsStarted"],
        line["TimeToFirstDelta"],
        line["StreamSeconds"],
    ) == (1, 1, 180.0, 2.5)
    assert attempts == []
