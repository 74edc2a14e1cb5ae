"""The front door's access log: one INFO line per call, with the operation, the endpoint and
variant, the status, the duration and, when the call did not end cleanly, why (the error's code,
the container's ModelStreamError, the caller going away)."""

from __future__ import annotations

import logging
import re
import time

import h2.events

from tests.e2e.local.conftest import VOXTRAL
from tests.e2e.local.test_local_refusals import RawH2
from tests.e2e.local.test_local_streams import RECORDING, scripted  # noqa: F401 (a fixture)
from tests.unit.voice_client.clients_testkit import client_parser
from voice_devtools.local.runtime import ACCESS_LOGGER, CallRecord
from voicectl.commands import speak, transcribe

LINE = re.compile(
    r"^(?P<operation>\S+(?: /\S*)?) (?P<target>\S+) (?P<status>\d{3}|-) "
    r"(?P<duration>\d+\.\d{3}) s from 127\.0\.0\.1:\d+ request [0-9a-f-]{36}"
    r"(?: \((?P<outcome>.*)\))?$"
)


def access_lines(caplog, count: int) -> list[dict[str, str | None]]:
    """The access lines, parsed (each must have the documented form), once ``count`` are logged: a
    call's line is written when the front door is done with it, which may be just after the client
    is."""
    deadline = time.monotonic() + 10
    while (
        len(
            lines := [
                record.getMessage() for record in caplog.records if record.name == ACCESS_LOGGER
            ]
        )
        < count
        and time.monotonic() < deadline
    ):
        time.sleep(0.01)
    parsed = [LINE.match(line) for line in lines]
    assert all(parsed), lines
    return [
        {key: value for key, value in match.groupdict().items() if key != "duration"}
        for match in parsed
    ]


def test_a_transcription_and_a_speech_are_one_line_each(client_env, caplog, tmp_path):
    caplog.set_level(logging.INFO, logger=ACCESS_LOGGER)
    stack = client_env
    assert (
        transcribe.run(
            client_parser().parse_args(
                [
                    "transcribe",
                    RECORDING,
                    "--endpoint",
                    VOXTRAL,
                    "--endpoint-url",
                    stack.url,
                    "--speed",
                    "0",
                ]
            )
        )
        == 0
    )
    assert (
        speak.run(
            client_parser().parse_args(
                [
                    "speak",
                    "Hi.",
                    "--endpoint",
                    "sonic-tts",
                    "--voice",
                    "v",
                    "--endpoint-url",
                    stack.url,
                    "--out",
                    str(tmp_path / "hi.wav"),
                ]
            )
        )
        == 0
    )
    assert access_lines(caplog, 2) == [
        {
            "operation": "InvokeEndpointWithBidirectionalStream",
            "target": f"{VOXTRAL}/AllTraffic",
            "status": "200",
            "outcome": None,
        },
        {
            "operation": "InvokeEndpointWithResponseStream",
            "target": "sonic-tts/AllTraffic",
            "status": "200",
            "outcome": None,
        },
    ]


def test_a_stream_the_container_ends_says_so(scripted, client_env, caplog):  # noqa: F811
    caplog.set_level(logging.INFO, logger=ACCESS_LOGGER)
    stack = client_env
    scripted("crashy", mode="crash_after", crash_after=3)
    assert (
        transcribe.run(
            client_parser().parse_args(
                [
                    "transcribe",
                    RECORDING,
                    "--endpoint",
                    "crashy",
                    "--endpoint-url",
                    stack.url,
                    "--speed",
                    "0",
                ]
            )
        )
        == 1
    )
    # The client reopens once; each stream is a line of its own.
    assert (
        access_lines(caplog, 2)
        == [
            {
                "operation": "InvokeEndpointWithBidirectionalStream",
                "target": "crashy/AllTraffic",
                "status": "200",
                "outcome": "ModelStreamError 1011",
            }
        ]
        * 2
    )


def test_refused_calls_are_logged_with_their_error_code(stack, caplog):
    caplog.set_level(logging.INFO, logger=ACCESS_LOGGER)
    client = RawH2(stack.url, stack.ca_file)
    try:
        for path in (
            f"/endpoints/{VOXTRAL}/invocations-bidirectional-stream",
            "/no/such/operation",
            "/endpoints/x%C3%A9%01/invocations-response-stream",
        ):
            stream_id = client.request(path, body=b"")
            client.events_until(stream_id, (h2.events.StreamEnded,))
    finally:
        client.close()
    assert access_lines(caplog, 3) == [
        {
            "operation": "InvokeEndpointWithBidirectionalStream",
            "target": f"{VOXTRAL}/-",
            "status": "403",
            "outcome": "MissingAuthenticationTokenException",
        },
        {
            "operation": "POST /no/such/operation",
            "target": "-",
            "status": "404",
            "outcome": "UnknownOperationException",
        },
        {
            "operation": "InvokeEndpointWithResponseStream",
            "target": "x\\xe9\\x01/-",
            "status": "403",
            "outcome": "MissingAuthenticationTokenException",
        },
    ]


def test_a_callers_text_is_written_escaped_and_cut():
    record = CallRecord.of({"method": "POST", "path": "/" + "a\n" * 80})
    assert record.operation == "POST " + ("/" + "a\\x0a" * 20)[:100] + "..."
    assert "\n" not in record.line(1.5, None)
    assert record.line(1.5, None).startswith("POST /a\\x0aa")
    assert f" - - 1.500 s from - request {record.request_id}" in record.line(1.5, None)
