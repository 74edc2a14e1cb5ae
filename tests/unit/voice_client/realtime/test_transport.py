"""voice_client/realtime/transport.py: the channel the transcription needs. Both transports the
client has provide every coroutine of it, with its signature."""

from __future__ import annotations

import inspect

import pytest

from voice_client.realtime.transport import RealtimeTransport, TransportClosed
from voice_client.realtime.websocket import WebSocketTransport
from voice_client.sagemaker_stream import SageMakerStreamTransport

METHODS = ("send_text", "receive_text", "close")


@pytest.mark.parametrize("transport", [WebSocketTransport, SageMakerStreamTransport])
def test_each_transport_provides_the_protocols_coroutines(transport):
    for name in METHODS:
        wanted, given = getattr(RealtimeTransport, name), getattr(transport, name)
        assert inspect.iscoroutinefunction(given), f"{transport.__name__}.{name} is not a coroutine"
        assert list(inspect.signature(given).parameters) == list(
            inspect.signature(wanted).parameters
        )


def test_a_closed_transport_is_an_exception_apart_from_the_realtime_error():
    from voice_client.realtime.protocol import RealtimeError

    assert issubclass(TransportClosed, Exception) and not issubclass(TransportClosed, RealtimeError)
