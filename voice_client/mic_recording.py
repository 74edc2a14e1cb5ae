"""The mic page's recording WebSocket, one per recording: its messages (:class:`PageSocket`,
:func:`read_start`, :func:`read_audio`), the transcript sent back as it grows
(:class:`TranscriptPublisher`), the watchdog on a stream that stops answering (:func:`watch`), and
the errors in the user's words (:func:`summarize_error`). The page's server, which runs a recording
from ``start`` to ``done``: :class:`voice_client.mic.MicServer`.

Messages on the recording WebSocket (text frames are JSON):

- page -> server: ``{"type": "start", "sample_rate_hz": N}`` first; then binary frames of float32
  little-endian mono samples at that rate; then ``{"type": "stop", "samples": TOTAL}`` once every
  sample has been sent.
- server -> page: ``{"type": "started", "target"}`` once the endpoint has accepted the stream (it is
  opened when the recording starts; accepted at its first server event that is not an ``error``:
  vLLM's ``session.created``, see
  :attr:`voice_client.realtime.TranscriptionMachine.accepted_at`; until then the page shows
  "Connecting to ..." and its audio waits here); ``{"type": "transcript", "text"}`` whenever the
  transcript changed; ``{"type": "stall", "silent_s"}`` while the endpoint does not answer (``0``
  once it answers again; see :func:`watch`); at the end either ``{"type": "done", "text", "figures",
  "result"}`` (``result`` as ``TranscriptionResult.as_dict()``) or ``{"type": "error", "message",
  "summary", "text"}`` (``summary``: one line in the user's words; ``message``: the detail;
  ``text``: the text received so far); then the server closes the WebSocket.

A recording may hold only so much audio (:data:`MAX_AHEAD_S`,
:data:`voice_client.mic_transcriber.MAX_QUEUED_AUDIO_S`).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import time
from collections.abc import Callable
from typing import Any, NoReturn

import numpy as np

from voice_client.mic_transcriber import AudioOverrun, MicTranscriber

MIN_SAMPLE_RATE_HZ = 8_000
MAX_SAMPLE_RATE_HZ = 384_000
"""Microphone sample rates accepted from the page (browsers capture at 44.1 or 48 kHz, some devices
at 8-192 kHz)."""

START_MESSAGE_TIMEOUT_S = 10.0
"""Seconds the page has, after its WebSocket opens, to send ``start``."""

FIRST_ANSWER_TIMEOUT_S = 10.0
"""Watchdog: seconds from the first audio sent to the first answer (a ``transcription.delta``, empty
ones included: vLLM sends one per 80 ms of audio once 0.6 s is buffered:
tests/vllm/test_vllm_contract.py) before the recording fails."""

STALL_NOTICE_S = 3.0
"""Seconds without an answer, while audio is being sent, before the page shows the stall ("no answer
for N s; still sending")."""

STALL_TIMEOUT_S = 15.0
"""Watchdog: seconds without an answer, while audio is being sent, before the recording fails."""

STOP_TIMEOUT_S = 15.0
"""Watchdog: seconds from Stop (the last sample queued) to the final transcript before the recording
fails. The bridge answers the final commit within about 1.4 s of vLLM work (17 deltas at the default
480 ms delay; what the final commit decodes: docs/settings.md, transcription delay); a replay after
a dropped stream adds up to the audio held divided by the 16 x send speed."""

WATCHDOG_TICK_S = 0.25
"""How often the watchdog looks."""

MAX_AHEAD_S = 3.0
"""Seconds of audio the page may send beyond the time since its recording WebSocket opened. A
microphone makes audio in real time; the page sends what it captured every 50 ms (and captures only
once its socket exists), so only a client that is not a microphone gets further ahead, and it is
refused rather than queued (queued, 190 MB sent in 30 s grew the page's server by 194 MB)."""


class StreamStalled(Exception):
    """The watchdog gave up on the stream (no first answer, no answer while audio flows, or a Stop
    that does not finish); the message says which, in the user's words."""


async def watch(
    transcriber: MicTranscriber,
    page: PageSocket,
    target: str,
    clock: Callable[[], float] = time.monotonic,
) -> NoReturn:
    """The recording's watchdog: tell the page when the endpoint has not answered for
    :data:`STALL_NOTICE_S` while audio is sent (``{"type": "stall", "silent_s"}``, and ``{"type":
    "stall", "silent_s": 0}`` once it answers again), and raise :class:`StreamStalled` when the
    stream is not accepted (no first event) or has sent no first answer within
    :data:`FIRST_ANSWER_TIMEOUT_S` of the first audio sent, no answer for :data:`STALL_TIMEOUT_S`,
    or no final transcript :data:`STOP_TIMEOUT_S` after Stop. The timeouts are read at each tick
    (tests shorten them)."""
    stalled = 0  # the silence last shown, in whole seconds (0: none shown)
    while True:
        await asyncio.sleep(WATCHDOG_TICK_S)
        now = clock()
        if not transcriber.accepted.is_set():
            # Never accepted: that is the diagnosis, whichever deadline passes first (Stop's, when
            # the stream opens so late that no audio has been sent yet).
            for since, limit_s in (
                (transcriber.first_sent_at, FIRST_ANSWER_TIMEOUT_S),
                (transcriber.audio_ended_at, STOP_TIMEOUT_S),
            ):
                if since is not None and now - since > limit_s:
                    raise StreamStalled(
                        f"{target} did not accept the stream: nothing came back in {limit_s:.0f} "
                        "s. Check that the endpoint is in service and its logs, then press "
                        "Record again."
                    )
        if (
            transcriber.audio_ended_at is not None
            and now - transcriber.audio_ended_at > STOP_TIMEOUT_S
        ):
            raise StreamStalled(
                f"The transcript did not finish within {STOP_TIMEOUT_S:.0f} s of Stop: {target} "
                "stopped answering. Check that the endpoint is in service and its logs, then press "
                "Record again."
            )
        if transcriber.first_sent_at is None:
            continue
        if transcriber.last_answer_at is None:
            if now - transcriber.first_sent_at > FIRST_ANSWER_TIMEOUT_S:
                raise StreamStalled(
                    f"{target} accepted the stream but sent nothing back in "
                    f"{FIRST_ANSWER_TIMEOUT_S:.0f} s. Check that the endpoint is in service and "
                    "its logs, then press Record again."
                )
            continue
        silent_s = now - max(transcriber.last_answer_at, transcriber.first_sent_at)
        if silent_s > STALL_TIMEOUT_S and transcriber.audio_ended_at is None:
            raise StreamStalled(
                f"{target} stopped answering: nothing for {STALL_TIMEOUT_S:.0f} s while audio was "
                "sent. Check that the endpoint is in service and its logs, then press Record again."
            )
        if silent_s > STALL_NOTICE_S and transcriber.audio_ended_at is None:
            if (shown := max(1, int(silent_s))) != stalled:  # once per whole second
                stalled = shown
                await page.send({"type": "stall", "silent_s": shown})
        elif stalled and silent_s <= STALL_NOTICE_S:
            stalled = 0
            await page.send({"type": "stall", "silent_s": 0})


class PageClosed(Exception):
    """The page's WebSocket closed (tab closed, reload, browser quit, network gone)."""

    def __init__(self, code: int | None) -> None:
        super().__init__(f"WebSocket code {code}")
        self.code = code


class PageProtocolError(Exception):
    """The page sent a message that breaks the recording protocol (see the module docstring)."""


class PageSocket:
    """A recording WebSocket (Starlette's) with the two failure kinds the recording cares about.

    Raises :class:`PageClosed` when the page is gone, whichever call notices it.
    """

    def __init__(self, websocket: Any) -> None:
        self._websocket = websocket

    async def receive(self) -> str | bytes:
        """The next message: text (JSON) or bytes."""
        message = await self._websocket.receive()
        if message["type"] == "websocket.disconnect":
            raise PageClosed(message.get("code"))
        if message.get("bytes") is not None:
            return message["bytes"]
        return message.get("text") or ""

    async def send(self, event: dict[str, Any]) -> None:
        from starlette.websockets import WebSocketDisconnect

        try:
            await self._websocket.send_text(json.dumps(event))
        except (
            WebSocketDisconnect,
            OSError,
            RuntimeError,
        ) as error:  # RuntimeError: sent after the close
            raise PageClosed(getattr(error, "code", None)) from error

    async def send_bytes(self, data: bytes) -> None:
        """Send a binary frame (the Speak panel's audio)."""
        try:
            await self._websocket.send_bytes(data)
        except Exception as error:
            raise PageClosed(getattr(error, "code", None)) from error

    async def close(self) -> None:
        with contextlib.suppress(Exception):
            await self._websocket.close()


async def read_start(page: PageSocket) -> int:
    """Read the page's ``start`` message and return its sample rate in Hz.

    Raises:
        PageProtocolError: it is not a valid ``start``.
        PageClosed: the page went away.
    """
    message = await page.receive()
    event = json_object(message)
    rate = event.get("sample_rate_hz")
    if event.get("type") != "start" or not isinstance(rate, int) or isinstance(rate, bool):
        raise PageProtocolError(
            'the first message must be {"type": "start", "sample_rate_hz": N}, '
            f"got {message!r:.200}"
        )
    if not MIN_SAMPLE_RATE_HZ <= rate <= MAX_SAMPLE_RATE_HZ:
        raise PageProtocolError(
            f"sample rate {rate} Hz is outside {MIN_SAMPLE_RATE_HZ}-{MAX_SAMPLE_RATE_HZ} Hz"
        )
    return rate


async def read_audio(
    page: PageSocket,
    transcriber: MicTranscriber,
    sample_rate_hz: int,
    opened_at: float | None = None,
) -> NoReturn:
    """Feed the page's audio frames to ``transcriber`` until ``stop``, then watch the socket for the
    page leaving.

    ``opened_at`` (``time.monotonic()``; default: now) is when the recording WebSocket opened: the
    page may send at most :data:`MAX_AHEAD_S` more audio than the time since then.

    Never returns: it ends by raising :class:`PageClosed` (the page went away, before or after
    ``stop``), :class:`PageProtocolError` (a malformed frame, a sample count that does not match, a
    message after ``stop``) or :class:`AudioOverrun` (audio faster than real time, or more waiting
    than a recording may hold).
    """
    opened_at = time.monotonic() if opened_at is None else opened_at
    received = 0
    stopped = False
    while True:
        message = await page.receive()
        if stopped:
            raise PageProtocolError(f"the page sent a message after stop: {message!r:.200}")
        if isinstance(message, bytes):
            if len(message) % 4:
                raise PageProtocolError(
                    f"an audio frame of {len(message)} bytes is not whole float32 samples"
                )
            elapsed_s = time.monotonic() - opened_at
            audio_s = (received + len(message) // 4) / sample_rate_hz
            if audio_s > elapsed_s + MAX_AHEAD_S:
                raise AudioOverrun(
                    f"the page sent {audio_s:.1f} s of audio in {elapsed_s:.1f} s, faster than a "
                    f"microphone records (at most {MAX_AHEAD_S:.0f} s ahead of real time)"
                )
            samples = np.frombuffer(message, dtype="<f4")
            if not np.isfinite(samples).all():
                raise PageProtocolError("an audio frame holds samples that are not finite numbers")
            transcriber.feed(sample_rate_hz, samples)
            received += samples.size
            continue
        event = json_object(message)
        if event.get("type") != "stop":
            raise PageProtocolError(f"expected audio or stop, got {message!r:.200}")
        if event.get("samples") != received:
            raise PageProtocolError(
                f"the page recorded {event.get('samples')} samples but {received} arrived"
            )
        transcriber.end_audio()
        stopped = True


def json_object(message: str | bytes) -> dict[str, Any]:
    """``message`` parsed as a JSON object.

    Raises:
        PageProtocolError: it is not one.
    """
    try:
        event = json.loads(message)
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise PageProtocolError(f"expected a JSON object, got {message!r:.200}") from None
    if not isinstance(event, dict):
        raise PageProtocolError(f"expected a JSON object, got {message!r:.200}")
    return event


class TranscriptPublisher:
    """Sends the transcript to the page as it changes, without taking back text the page may already
    show.

    When a dropped stream's session is replayed, :func:`~voice_client.realtime.transcribe_stream`
    discards that session's text and the replay transcribes the same audio again: the text re-grows
    through words already received. Showing that would blank words and bring them back (a
    flicker), and if the replay failed the words would be lost; so a text that is a beginning of the
    longest one received is not shown, and :meth:`text` keeps the longer one.
    """

    def __init__(self, page: PageSocket, transcriber: MicTranscriber) -> None:
        self._page = page
        self._transcriber = transcriber
        self._changed = asyncio.Event()
        self._text = ""
        self._shown = ""

    def update(self) -> None:
        """Note the transcript now and wake :meth:`run` (call it on every delta and replay)."""
        self.text()
        self._changed.set()

    def text(self) -> str:
        """The text to show: the transcript, or the longer text received before a replay that has
        not caught up."""
        current = self._transcriber.text
        if not self._text.startswith(current):
            self._text = current
        return self._text

    async def run(self) -> NoReturn:
        """Send the text to show each time it changed (one message for all the updates since the
        last one)."""
        while True:
            await self._changed.wait()
            self._changed.clear()
            if (text := self.text()) != self._shown:
                await self._page.send({"type": "transcript", "text": text})
                self._shown = text


def summarize_error(message: str, target: str) -> str:
    """One line for the page: what failed and what to check (the full ``message`` stays behind
    "Details").

    The patterns are the clients' own messages (voice_client/realtime/,
    voice_client/sagemaker_stream.py, voice_client/frameworks/sonic_stream.py, the mic page's
    modules).
    """
    lowered = message.lower()
    if "http/2 could not be negotiated" in lowered or "http1_1" in lowered:
        return (
            "The endpoint URL answered without HTTP/2, which streaming needs: HTTP/2 needs "
            "https://, so check that --endpoint-url starts with https://."
        )
    if refused := re.search(r"ModelError[^(]*\(status (4\d\d)\): ([^.]*)", message):
        return (
            f"{target} refused the request ({refused.group(1)}: {refused.group(2)}). Check the "
            "voice ID and the text."
        )
    if message.startswith("ModelError"):
        return (
            f"{target} could not reach its model container. Check that the endpoint is in "
            "service and its CloudWatch logs, then press Record again."
        )
    if message.startswith("cannot open a WebSocket"):
        return (
            f"{target} is not reachable. Check that the container is running, then press Record "
            "again."
        )
    if "certificate" in lowered or "tls_error" in lowered:
        return (
            "The endpoint's certificate is not trusted. Check AWS_CA_BUNDLE, then press Record "
            "again."
        )
    if "credentials" in lowered or "signature" in lowered:
        return (
            "AWS refused the credentials. Check them (aws sts get-caller-identity) and the Region."
        )
    if "access denied" in lowered:
        return (
            "Access denied: the caller needs sagemaker:InvokeEndpointWithBidirectionalStream on "
            "the endpoint."
        )
    if message.startswith(("the page sent", "the endpoint stopped taking audio")):
        return (
            "The recording was stopped: "
            + message[0].lower()
            + message[1:].split(". ")[0].rstrip(".")
            + "."
        )
    first = message.split(". ")[0].split("; ")[0].rstrip(".")
    return first[0].upper() + first[1:] + "." if first else message


async def stop_task(task: asyncio.Task[Any]) -> None:
    """Cancel ``task`` if it still runs and wait for it, keeping its outcome from being reported as
    unretrieved."""
    task.cancel()
    with contextlib.suppress(BaseException):
        await task
