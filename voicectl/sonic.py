"""Cartesia Sonic on SageMaker: build the request and parse the streamed response.

Facts used here come from Cartesia's SageMaker listing documentation (github.com/cartesia-ai/cartesia-aws,
``sonic-3-6-jumpstart/README.md``):

- The request is one JSON object: ``context_id``, ``transcript``, ``voice`` (``{"mode": "id", "id": ...}``, only
  ``id`` mode), ``output_format`` (only ``container: raw``), optional ``language``. It is sent with
  ``InvokeEndpointWithResponseStream``, ``ContentType: application/json``, ``Accept: text/event-stream``.
- The response is a stream of JSON events, each ending with a line break. SageMaker may cut one event into several
  payload parts or pack several events into one part, so the client must reassemble lines.
- Event types: ``chunk`` (base64 audio in ``data``, at most 20 ms), ``timestamps``, ``phoneme_timestamps``,
  ``done`` (``done: true``) and ``error``.
- Failures of the request itself arrive as a SageMaker ``ModelError`` whose ``OriginalStatusCode`` is 422 (the
  input is malformed) or 429 (the container has no free generation slot).

This module has no AWS dependency; :mod:`voicectl.speak` does the call.
"""

from __future__ import annotations

import base64
import binascii
import json
import uuid
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

SONIC_CONTENT_TYPE = "application/json"
SONIC_ACCEPT = "text/event-stream"

SONIC_ENCODING = "pcm_s16le"
"""Output encoding we ask for: signed 16-bit little-endian PCM, written unchanged into a 16-bit WAV."""

SONIC_SAMPLE_RATES_HZ = (8000, 16000, 22050, 24000, 44100, 48000)
"""Sample rates Cartesia's raw output format accepts (docs.cartesia.ai, TTS API ``output_format.sample_rate``)."""

DEFAULT_SAMPLE_RATE_HZ = 44100

SONIC_LANGUAGES = frozenset(
    "ar bg bn cs da de el en es fi fr gu he hi hr hu id it ja ka kn ko ml mr ms nl no pa pl pt ro ru sk sv ta te th "
    "tl tr uk vi zh en-US de-DE es-MX fr-FR hi-IN it-IT ja-JP nl-NL pt-BR".split()
)
"""Language codes listed for Sonic 3.6 on SageMaker (cartesia-aws ``sonic-3-6-jumpstart/README.md``)."""

MODEL_ERROR_HINTS: dict[int, str] = {
    422: "Sonic rejected the request as malformed (HTTP 422): check the voice ID, the language code and the text",
    429: (
        "Sonic has no free generation slot (HTTP 429): every slot on the endpoint's instances is busy; "
        "retry in a moment, or scale the endpoint out (more instances) and use LEAST_OUTSTANDING_REQUESTS routing"
    ),
}
"""What to tell the user for a ModelError's ``OriginalStatusCode`` (cartesia-aws README, "Error Handling")."""

_SSE_DATA_PREFIX = b"data:"


class SonicStreamError(Exception):
    """The response stream cannot be used: a malformed event, an ``error`` event, or a truncated stream.

    Attributes:
        audio: the PCM16 audio decoded before the failure (bytes; possibly empty), so that nothing received is lost.
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
        context_id: request identifier echoed in the events and the container logs (a UUID4 by default).
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
            problems.append(f"language {self.language!r} is not supported; use one of {', '.join(sorted(SONIC_LANGUAGES))}")
        if self.sample_rate_hz not in SONIC_SAMPLE_RATES_HZ:
            allowed = ", ".join(str(rate) for rate in SONIC_SAMPLE_RATES_HZ)
            problems.append(f"sample rate {self.sample_rate_hz} Hz is not supported; use one of {allowed}")
        if problems:
            raise ValueError("; ".join(problems))

    def body(self) -> dict[str, Any]:
        """The JSON request body as a dict."""
        return {
            "context_id": self.context_id,
            "transcript": self.transcript,
            "voice": {"mode": "id", "id": self.voice_id},
            "output_format": {"container": "raw", "encoding": SONIC_ENCODING, "sample_rate": self.sample_rate_hz},
            "language": self.language,
        }

    def invoke_kwargs(self, endpoint_name: str) -> dict[str, Any]:
        """Keyword arguments for boto3 ``sagemaker-runtime`` ``invoke_endpoint_with_response_stream``."""
        return {
            "EndpointName": endpoint_name,
            "Body": json.dumps(self.body()).encode(),
            "ContentType": SONIC_CONTENT_TYPE,
            "Accept": SONIC_ACCEPT,
        }


class SonicEventParser:
    """Reassemble newline-terminated JSON events from payload parts split or packed at arbitrary byte positions.

    Feed each payload part's bytes to :meth:`feed`; it returns the complete events so far. Call :meth:`finish`
    at the end of the stream: it raises :class:`TruncatedStreamError` when bytes of an unterminated event remain.
    Blank lines are skipped and an SSE ``data:`` prefix is accepted, so a server that frames events as
    Server-Sent Events parses the same.
    """

    def __init__(self) -> None:
        self._pending = bytearray()

    def feed(self, part: bytes) -> list[dict[str, Any]]:
        """Add one payload part; return the events it completed, in order.

        Raises:
            SonicStreamError: a complete line is not a JSON object.
        """
        self._pending += part
        *lines, rest = bytes(self._pending).split(b"\n")
        self._pending = bytearray(rest)
        return [event for line in lines if (event := _parse_line(line)) is not None]

    def finish(self) -> None:
        """Declare the end of the stream.

        Raises:
            TruncatedStreamError: bytes of an event without its terminating line break remain.
        """
        if self._pending.strip():
            preview = bytes(self._pending[:80])
            raise TruncatedStreamError(
                f"the response stream ended inside an event ({len(self._pending)} bytes without the closing line "
                f"break, starting {preview!r})"
            )


def _parse_line(line: bytes) -> dict[str, Any] | None:
    line = line.strip()
    if not line:
        return None
    if line.startswith(_SSE_DATA_PREFIX):
        line = line[len(_SSE_DATA_PREFIX) :].strip()
    try:
        event = json.loads(line)
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise SonicStreamError(f"a response event is not valid JSON ({error}): {line[:120]!r}") from error
    if not isinstance(event, dict):
        raise SonicStreamError(f"a response event is not a JSON object: {line[:120]!r}")
    return event


@dataclass
class SonicAudio:
    """Audio assembled from Sonic events.

    Attributes:
        pcm16: concatenated PCM16 little-endian audio.
        chunks: number of ``chunk`` events.
        done: whether the ``done`` event arrived.
    """

    pcm16: bytearray = field(default_factory=bytearray)
    chunks: int = 0
    done: bool = False

    def add(self, event: dict[str, Any]) -> bool:
        """Apply one event. Return True when it carried audio.

        Raises:
            SonicStreamError: an ``error`` event, a ``chunk`` without valid base64 audio, or an event after ``done``.
        """
        kind = event.get("type")
        if self.done:
            raise SonicStreamError(f"an event of type {kind!r} arrived after the done event", bytes(self.pcm16))
        if kind == "chunk":
            data = event.get("data")
            if not isinstance(data, str):
                raise SonicStreamError("a chunk event has no base64 'data' field", bytes(self.pcm16))
            try:
                self.pcm16 += base64.b64decode(data, validate=True)
            except binascii.Error as error:
                raise SonicStreamError(f"a chunk event's audio is not valid base64 ({error})", bytes(self.pcm16)) from error
            self.chunks += 1
            return True
        if kind == "error" or (isinstance(event.get("status_code"), int) and event["status_code"] >= 400):
            detail = event.get("error") or event.get("message") or event.get("data") or event
            status = event.get("status_code")
            hint = MODEL_ERROR_HINTS.get(status, "") if isinstance(status, int) else ""
            message = f"Sonic reported an error (status {status}): {detail}"
            raise SonicStreamError(f"{message}. {hint}" if hint else message, bytes(self.pcm16))
        if kind == "done" or event.get("done") is True:
            self.done = True
        # timestamps / phoneme_timestamps and unknown types carry no audio; ignoring them loses nothing we write.
        return False


def assemble_audio(parts: Iterable[bytes]) -> SonicAudio:
    """Parse every payload part of a Sonic response and return the assembled audio.

    Raises:
        SonicStreamError: a malformed event or an ``error`` event (``.audio`` holds what was decoded before).
        TruncatedStreamError: the stream ended inside an event or before ``done`` (``.audio`` as above).
    """
    parser = SonicEventParser()
    audio = SonicAudio()
    for events in _events_of(parser, parts, audio):
        for event in events:
            audio.add(event)
    check_complete(parser, audio)
    return audio


def _events_of(parser: SonicEventParser, parts: Iterable[bytes], audio: SonicAudio) -> Iterator[list[dict[str, Any]]]:
    for part in parts:
        try:
            yield parser.feed(part)
        except SonicStreamError as error:
            raise SonicStreamError(str(error), bytes(audio.pcm16)) from error


def check_complete(parser: SonicEventParser, audio: SonicAudio) -> None:
    """Raise :class:`TruncatedStreamError` unless the stream ended cleanly after the ``done`` event."""
    try:
        parser.finish()
    except TruncatedStreamError as error:
        raise TruncatedStreamError(str(error), bytes(audio.pcm16)) from error
    if not audio.done:
        raise TruncatedStreamError(
            f"the response stream ended before the done event (after {audio.chunks} audio chunks)", bytes(audio.pcm16)
        )
