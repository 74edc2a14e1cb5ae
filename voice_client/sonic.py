"""Cartesia Sonic on SageMaker: build the request and parse the streamed response.

Facts used here come from Cartesia's SageMaker listing documentation
(github.com/cartesia-ai/cartesia-aws, ``sonic-3-6-jumpstart/README.md``):

- The request is one JSON object: ``context_id``, ``transcript``, ``voice`` (``{"mode": "id", "id":
  ...}``, only ``id`` mode), ``output_format`` (only ``container: raw``), optional ``language``. It
  is sent with ``InvokeEndpointWithResponseStream``, ``ContentType: application/json``, ``Accept:
  text/event-stream``.
- The response is a stream of JSON events, each ending with a line break. SageMaker may cut one
  event into several payload parts or pack several events into one part, so the client must
  reassemble lines. The request asks for ``text/event-stream``, so :class:`SonicEventParser` also
  reads full Server-Sent Events framing (WHATWG HTML, "Server-sent events", section "Interpreting an
  event stream").
- Event types: ``chunk`` (base64 audio in ``data``, at most 20 ms), ``timestamps``,
  ``phoneme_timestamps``, ``done`` (``done: true``) and ``error``.
- Failures of the request itself arrive as a SageMaker ``ModelError`` whose ``OriginalStatusCode``
  is 422 (the input is malformed) or 429 (the container has no free generation slot).

This module has no AWS dependency; :mod:`voice_client.speak` does the call.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
import uuid
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from contracts.sonic import SONIC_LANGUAGES
from voice_client.bounded_json import DEFAULT_MAX_DEPTH, JsonBoundError, loads_bounded, one_line

SONIC_CONTENT_TYPE = "application/json"
SONIC_ACCEPT = "text/event-stream"

SONIC_ENCODING = "pcm_s16le"
"""Output encoding we ask for: signed 16-bit little-endian PCM, written unchanged into a 16-bit
WAV."""

SONIC_SAMPLE_RATES_HZ = (8000, 16000, 22050, 24000, 44100, 48000)
"""Sample rates Cartesia's raw output format accepts (docs.cartesia.ai, TTS API
``output_format.sample_rate``)."""

DEFAULT_SAMPLE_RATE_HZ = 44100


MODEL_ERROR_HINTS: dict[int, str] = {
    422: "Sonic rejected the request as malformed (HTTP 422): check the voice ID, the language "
    "code and the text",
    429: (
        "Sonic has no free generation slot (HTTP 429): every slot on the endpoint's instances is "
        "busy; retry in a moment, or scale the endpoint out (more instances) and use "
        "LEAST_OUTSTANDING_REQUESTS routing"
    ),
}
"""What to tell the user for a ModelError's ``OriginalStatusCode`` (cartesia-aws README, "Error
Handling")."""


MAX_EVENT_BYTES = 1024 * 1024
"""Largest Sonic event accepted, in bytes (1 MiB; a ``chunk`` of 20 ms at 48 kHz is some 2.6 KB of
base64): a line, or an SSE event's data lines together, that grows past it fails the request before
it is parsed."""

MAX_EVENT_DEPTH = DEFAULT_MAX_DEPTH
"""Deepest JSON nesting accepted in a Sonic event (its events nest 2 levels)."""

MAX_AUDIO_BYTES = 128 * 1024 * 1024
"""PCM16 bytes one request keeps at most (128 MiB: 23 min at 48 kHz, 70 min at 16 kHz); an endpoint
that sends more fails the request, the audio received so far written out, instead of filling
memory."""


class SonicStreamError(Exception):
    """The response stream cannot be used: a malformed event, an ``error`` event, or a truncated
    stream.

    Attributes:
        audio: the PCM16 audio decoded before the failure (bytes; possibly empty), so that nothing
            received is lost.
    """

    def __init__(self, message: str, audio: bytes = b"") -> None:
        super().__init__(message)
        self.audio = audio


class TruncatedStreamError(SonicStreamError):
    """The stream ended in the middle of an event, or before the ``done`` event."""


@dataclass(frozen=True)
class SonicRequest:
    """One Sonic text-to-speech request.

    Attributes:
        transcript: the text to speak (non-empty).
        voice_id: a Cartesia voice ID.
        language: a code from :data:`SONIC_LANGUAGES`.
        sample_rate_hz: output sample rate, one of :data:`SONIC_SAMPLE_RATES_HZ`.
        context_id: request identifier echoed in the events and the container logs (a UUID4 by
            default).
    """

    transcript: str
    voice_id: str
    language: str = "en"
    sample_rate_hz: int = DEFAULT_SAMPLE_RATE_HZ
    context_id: str = field(default_factory=lambda: str(uuid.uuid4()))

    def __post_init__(self) -> None:
        problems = []
        if not self.transcript.strip():
            problems.append("the text to speak is empty")
        if not self.voice_id.strip():
            problems.append("the voice ID is empty (pass --voice with a Cartesia voice ID)")
        if self.language not in SONIC_LANGUAGES:
            problems.append(
                f"language {self.language!r} is not supported; use one of "
                f"{', '.join(sorted(SONIC_LANGUAGES))}"
            )
        if self.sample_rate_hz not in SONIC_SAMPLE_RATES_HZ:
            allowed = ", ".join(str(rate) for rate in SONIC_SAMPLE_RATES_HZ)
            problems.append(
                f"sample rate {self.sample_rate_hz} Hz is not supported; use one of {allowed}"
            )
        if problems:
            raise ValueError("; ".join(problems))

    def body(self) -> dict[str, Any]:
        """The JSON request body as a dict."""
        return {
            "context_id": self.context_id,
            "transcript": self.transcript,
            "voice": {"mode": "id", "id": self.voice_id},
            "output_format": {
                "container": "raw",
                "encoding": SONIC_ENCODING,
                "sample_rate": self.sample_rate_hz,
            },
            "language": self.language,
        }

    def invoke_kwargs(self, endpoint_name: str) -> dict[str, Any]:
        """Keyword arguments for boto3 ``sagemaker-runtime``
        ``invoke_endpoint_with_response_stream``."""
        return {
            "EndpointName": endpoint_name,
            "Body": json.dumps(self.body()).encode(),
            "ContentType": SONIC_CONTENT_TYPE,
            "Accept": SONIC_ACCEPT,
        }


#: Line terminators of an event stream: CRLF, LF or a lone CR (WHATWG HTML, event stream grammar,
#: "end-of-line").
_LINE_END = re.compile(rb"\r\n|\r|\n")
_UTF8_BOM = b"\xef\xbb\xbf"


class SonicEventParser:
    """Reassemble Sonic's events from payload parts split or packed at arbitrary byte positions.

    Two framings are read, line by line (a line ends with LF, CRLF or a lone CR, and a CRLF cut
    between two parts is still one line end):

    - newline-delimited JSON: a line that starts with ``{`` is one event (Cartesia's SageMaker
      container sends
      this: "a linebreak to the end of each complete event");
    - Server-Sent Events, as the WHATWG HTML standard interprets an event stream: ``data:`` lines
      (one space after the colon dropped) accumulate, joined by LF, until an empty line dispatches
      them as one event; ``event:`` names the event (it becomes the ``type`` when the JSON has none;
      an ``error`` event whose data is not JSON becomes ``{"type": "error", "error": <text>}``);
      ``id:`` and ``retry:`` are recorded (:attr:`last_event_id`, :attr:`retry_ms`); lines starting
      with ``:`` are comments; other fields are ignored; an empty line with no data dispatches
      nothing; a UTF-8 byte-order mark at the start is skipped.

    Feed each payload part's bytes to :meth:`feed`; it returns the complete events so far. Call
    :meth:`finish` at the end of the stream.

    Attributes:
        last_event_id: the value of the last ``id:`` line ("" before any).
        retry_ms: the last valid ``retry:`` value, milliseconds (None before any).
    """

    def __init__(self) -> None:
        self._pending = bytearray()
        self._first_line = True
        self._data: list[bytes] = []
        self._data_bytes = 0
        self._event_name = b""
        self.last_event_id = ""
        self.retry_ms: int | None = None

    def feed(self, part: bytes) -> list[dict[str, Any]]:
        """Add one payload part; return the events it completed, in order.

        Raises:
            SonicStreamError: a complete event is not a JSON object.
        """
        scan_from = max(
            len(self._pending) - 1, 0
        )  # only the new bytes (and a CR held back) can end a line
        self._pending += part
        buffer = bytes(self._pending)
        events: list[dict[str, Any]] = []
        start = 0
        for match in _LINE_END.finditer(buffer, scan_from):
            if match.group() == b"\r" and match.end() == len(buffer):
                break  # a CR at the very end may be the first half of a CRLF cut between two parts
            self._line(buffer[start : match.start()], events)
            start = match.end()
        del self._pending[:start]
        if len(self._pending) > MAX_EVENT_BYTES:
            raise SonicStreamError(
                f"a response event grew past {MAX_EVENT_BYTES:,} bytes without a line break, the "
                "most accepted (MAX_EVENT_BYTES)"
            )
        return events

    def finish(self) -> list[dict[str, Any]]:
        """Declare the end of the stream; return the events a final CR line end completed.

        Raises:
            TruncatedStreamError: bytes of a line without its line end remain, or an SSE event's
                data arrived without the empty line that dispatches it.
            SonicStreamError: the last event is not a JSON object.
        """
        events: list[dict[str, Any]] = []
        if self._pending.endswith(
            b"\r"
        ):  # held back by feed(): at the end of the stream it is a line end
            line = bytes(self._pending[:-1])
            self._pending.clear()
            self._line(line, events)
        if self._pending.strip():
            preview = bytes(self._pending[:80])
            raise TruncatedStreamError(
                f"the response stream ended inside an event ({len(self._pending)} bytes without "
                f"the closing line break, starting {preview!r})"
            )
        if self._data:
            raise TruncatedStreamError(
                f"the response stream ended inside a server-sent event ({len(self._data)} data "
                "lines without the empty line that ends the event)"
            )
        return events

    def _line(self, line: bytes, events: list[dict[str, Any]]) -> None:
        if self._first_line:
            self._first_line = False
            line = line.removeprefix(_UTF8_BOM)
        if not line:
            data = b"\n".join(self._data)
            if data.strip():  # no data (only event:, id:, comments...): nothing to dispatch
                events.append(_decode_event(data, self._event_name))
            self._data, self._event_name, self._data_bytes = [], b"", 0
            return
        if line.lstrip().startswith(b"{"):
            events.append(_decode_event(line.strip(), b""))
            return
        if line.startswith(b":") or not line.strip():
            return  # an SSE comment (often a keep-alive), or a line of blanks
        field, _, value = line.partition(b":")
        value = value.removeprefix(b" ")
        if field == b"data":
            self._data.append(value)
            self._data_bytes += len(value) + 1
            if self._data_bytes > MAX_EVENT_BYTES:
                raise SonicStreamError(
                    f"a server-sent event's data grew past {MAX_EVENT_BYTES:,} bytes, the most "
                    "accepted (MAX_EVENT_BYTES)"
                )
        elif field == b"event":
            self._event_name = value
        elif field == b"id":
            if b"\0" not in value:
                self.last_event_id = value.decode("utf-8", "replace")
        elif field == b"retry" and value.isdigit():
            self.retry_ms = int(value)
        # Other field names are ignored, as the standard says.


def _decode_event(data: bytes, event_name: bytes) -> dict[str, Any]:
    """One event from its JSON ``data`` (and SSE ``event:`` name, b"" for none).

    Raises:
        SonicStreamError: ``data`` is not a JSON object (except the text of an SSE ``error`` event).
    """
    name = event_name.decode("utf-8", "replace")
    try:
        event = loads_bounded(data, max_bytes=MAX_EVENT_BYTES, max_depth=MAX_EVENT_DEPTH)
    except JsonBoundError as error:
        raise SonicStreamError(f"a response event is refused: {error}") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        if name == "error":
            return {"type": "error", "error": data.decode("utf-8", "replace")}
        raise SonicStreamError(
            f"a response event is not valid JSON ({error}): {data[:120]!r}"
        ) from error
    if not isinstance(event, dict):
        raise SonicStreamError(f"a response event is not a JSON object: {data[:120]!r}")
    if name:
        event.setdefault("type", name)
    return event


@dataclass
class SonicAudio:
    """Audio assembled from Sonic events.

    Attributes:
        pcm16: concatenated PCM16 little-endian audio.
        chunks: number of ``chunk`` events.
        done: whether the ``done`` event (or a chunk with ``done: true``) arrived.
        late_events: events that arrived after ``done`` (accepted: their audio is kept, see
            :attr:`warnings`).
        late_bytes: audio bytes those events carried.
    """

    pcm16: bytearray = field(default_factory=bytearray)
    chunks: int = 0
    done: bool = False
    late_events: int = 0
    late_bytes: int = 0

    @property
    def warnings(self) -> list[str]:
        """Oddities that did not stop the audio from being written, one line each."""
        if not self.late_events:
            return []
        return [
            f"{self.late_events} events arrived after the done event; their audio "
            f"({self.late_bytes} bytes) was kept"
        ]

    def add(self, event: dict[str, Any]) -> bool:
        """Apply one event. Return True when it carried audio.

        Lenient where nothing is lost: a ``chunk`` with ``done: true`` ends the stream after its
        audio, and events after ``done`` are applied and counted (:attr:`warnings`) rather than
        failing the request.

        Raises:
            SonicStreamError: an ``error`` event, or a ``chunk`` without valid base64 audio.
        """
        kind = event.get("type")
        before = len(self.pcm16)
        late = self.done
        carried = self._apply(kind, event)
        if late:
            self.late_events += 1
            self.late_bytes += len(self.pcm16) - before
        return carried

    def _apply(self, kind: Any, event: dict[str, Any]) -> bool:
        if kind == "chunk":
            data = event.get("data")
            if not isinstance(data, str):
                raise SonicStreamError(
                    "a chunk event has no base64 'data' field", bytes(self.pcm16)
                )
            try:
                decoded = base64.b64decode(data, validate=True)
            except binascii.Error as error:
                raise SonicStreamError(
                    f"a chunk event's audio is not valid base64 ({error})", bytes(self.pcm16)
                ) from error
            if len(self.pcm16) + len(decoded) > MAX_AUDIO_BYTES:
                raise SonicStreamError(
                    f"the endpoint sent more than {MAX_AUDIO_BYTES:,} bytes of audio, the most one "
                    "request keeps (MAX_AUDIO_BYTES); split the text",
                    bytes(self.pcm16),
                )
            self.pcm16 += decoded
            self.chunks += 1
            if event.get("done") is True:
                self.done = True
            return True
        if kind == "error" or (
            isinstance(event.get("status_code"), int) and event["status_code"] >= 400
        ):
            detail = one_line(
                event.get("error") or event.get("message") or event.get("data") or event
            )
            status = event.get("status_code")
            hint = MODEL_ERROR_HINTS.get(status, "") if isinstance(status, int) else ""
            shown = status if isinstance(status, int) else one_line(str(status), 20)
            message = f"Sonic reported an error (status {shown}): {detail}"
            raise SonicStreamError(f"{message}. {hint}" if hint else message, bytes(self.pcm16))
        if kind == "done" or event.get("done") is True:
            self.done = True
        # timestamps / phoneme_timestamps and unknown types carry no audio; ignoring them loses
        # nothing we write.
        return False


def assemble_audio(parts: Iterable[bytes]) -> SonicAudio:
    """Parse every payload part of a Sonic response and return the assembled audio.

    Raises:
        SonicStreamError: a malformed event or an ``error`` event (``.audio`` holds what was decoded
            before).
        TruncatedStreamError: the stream ended inside an event or before ``done`` (``.audio`` as
            above).
    """
    parser = SonicEventParser()
    audio = SonicAudio()
    for events in _events_of(parser, parts, audio):
        for event in events:
            audio.add(event)
    check_complete(parser, audio)
    return audio


def _events_of(
    parser: SonicEventParser, parts: Iterable[bytes], audio: SonicAudio
) -> Iterator[list[dict[str, Any]]]:
    for part in parts:
        try:
            yield parser.feed(part)
        except SonicStreamError as error:
            raise SonicStreamError(str(error), bytes(audio.pcm16)) from error


def check_complete(parser: SonicEventParser, audio: SonicAudio) -> None:
    """End the stream: apply the events :meth:`SonicEventParser.finish` completes, then raise
    :class:`TruncatedStreamError` unless the stream ended cleanly after the ``done`` event.

    Raises:
        SonicStreamError / TruncatedStreamError: with ``.audio`` holding the audio decoded so far.
    """
    try:
        for event in parser.finish():
            audio.add(event)
    except SonicStreamError as error:
        raise type(error)(str(error), bytes(audio.pcm16)) from error
    if not audio.done:
        raise TruncatedStreamError(
            f"the response stream ended before the done event (after {audio.chunks} audio chunks)",
            bytes(audio.pcm16),
        )
