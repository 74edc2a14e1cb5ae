"""A local stand-in for Kinesis Video Streams' GetDataEndpoint and GetMedia, serving a call as Connect writes it.

A :class:`FakeCall` cuts a stereo recording (left: the customer, ``AUDIO_FROM_CUSTOMER``; right: what the customer
hears, ``AUDIO_TO_CUSTOMER``) into fragments of :data:`FRAGMENT_S`, released as a live call would produce them
(``speed`` x real time; 0: all at once). Each fragment is what the producer writes, a Matroska document from
libavformat's muxer (PyAV: FFmpeg, independent of the consumer's ebmlite parser) with two PCM16 8 kHz mono tracks named
as Connect names them and the producer's tags (``ContactId``, ``InstanceId``: libavformat writes them upper case);
the stand-in then appends what the service adds to each fragment GetMedia returns, a ``Tags`` element with the
fragment number, server and producer timestamps, millis behind now and the continuation token
(:func:`voicectl.connect.mkv.append_tags`; odd fragments with a Segment of unknown size, as a live stream has).

:class:`FakeKvs` serves them over HTTP as the REST API boto3 calls: ``POST /getDataEndpoint`` (answers its own
URL) and ``POST /getMedia`` (chunked transfer of fragments from the StartSelector on; the payload ends once no new
fragment arrives for :data:`READ_TIMEOUT_S`, as GetMedia's read does after 3 s without ingested fragments).
``FRAGMENT_NUMBER`` starts at the named fragment itself (the API reference's "the fragment number from where you
want the GetMedia API to start returning"; unconfirmed whether AWS includes it: the consumer copes with either).
"""

from __future__ import annotations

import asyncio
import fractions
import io
import json
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import soundfile
import soxr
from aiohttp import web

from voicectl.clients.audio import AudioError, float_to_pcm16
from voicectl.connect import mkv

FRAGMENT_S = 2.0
"""Seconds of audio per fragment (Connect's are of this order; unconfirmed: AWS does not document the length)."""
READ_TIMEOUT_S = 3.0
"""GetMedia: "reading the HTTP response payload will time out after 3 seconds if there are no ingested fragments"."""
FIRST_FRAGMENT_NUMBER = 91343852333181432392682062607743920146264001
"""Fragment numbers are long decimal strings (this one has the shape of AWS's examples)."""


@dataclass
class FakeCall:
    contact_id: str
    stream_name: str
    customer: bytes  # PCM16 8 kHz
    agent: bytes
    speed: float = 0.0
    fragment_s: float = FRAGMENT_S
    started_at: float = field(default_factory=time.monotonic)
    extra_tracks: tuple[str, ...] = ()  # tests: a third track
    codec_id: str = mkv.PCM_CODEC_ID  # tests: an unknown codec
    truncate_fragment: int | None = None  # tests: serve this fragment cut short
    limit: int | None = None  # tests: only this many fragments exist yet (a call held open)
    then_contact: str | None = None  # after the last fragment, one of this other contact (Connect reuses streams)
    _muxed: dict[int, bytes] = field(default_factory=dict, repr=False, compare=False)  # the producer's, by index

    @property
    def stream_arn(self) -> str:
        return f"arn:aws:kinesisvideo:us-east-1:123456789012:stream/{self.stream_name}/1700000000000"

    @property
    def fragment_bytes(self) -> int:
        return int(self.fragment_s * mkv.CONNECT_SAMPLE_RATE_HZ) * 2

    @property
    def count(self) -> int:
        return max(1, -(-max(len(self.customer), len(self.agent)) // self.fragment_bytes))

    def number(self, index: int) -> str:
        return str(FIRST_FRAGMENT_NUMBER + index * 7)

    def index_of(self, number: str) -> int:
        return (int(number) - FIRST_FRAGMENT_NUMBER + 6) // 7

    def available(self) -> int:
        """Fragments produced so far (all of them when ``speed`` is 0), and the other contact's one after them."""
        count = self.count
        if self.speed > 0:
            elapsed_audio = (time.monotonic() - self.started_at) * self.speed
            count = min(count, int(elapsed_audio // self.fragment_s))
        if self.limit is not None:
            return min(count, self.limit)
        return count + (1 if self.then_contact and count == self.count else 0)

    def fragment(self, index: int) -> bytes:
        size = self.fragment_bytes
        audio = {mkv.TRACK_FROM_CUSTOMER: self.customer[index * size:(index + 1) * size],
                 mkv.TRACK_TO_CUSTOMER: self.agent[index * size:(index + 1) * size]}
        if index >= self.count:  # the next contact's first fragment: its audio is not this call's
            audio = {name: bytes(size) for name in audio}
        for name in self.extra_tracks:
            audio[name] = audio[mkv.TRACK_FROM_CUSTOMER]
        behind_ms = max(0, int((self.available() - 1 - index) * self.fragment_s * 1000))
        contact = self.then_contact if index >= self.count else self.contact_id
        tags = {mkv.TAG_CONTACT_ID: contact, "InstanceId": "11111111-2222-3333-4444-555555555555",
                mkv.TAG_FRAGMENT_NUMBER: self.number(index),
                mkv.TAG_SERVER_TIMESTAMP: f"{1700000000 + index * self.fragment_s:.3f}",
                mkv.TAG_PRODUCER_TIMESTAMP: f"{1700000000 + index * self.fragment_s:.3f}",
                mkv.TAG_MILLIS_BEHIND_NOW: str(behind_ms),
                mkv.TAG_CONTINUATION_TOKEN: self.number(index + 1)}
        tracks = mkv.CONNECT_TRACKS + self.extra_tracks
        if index not in self._muxed:
            producer = {name: tags[name] for name in (mkv.TAG_CONTACT_ID, "InstanceId")}
            self._muxed[index] = mux_fragment(producer, audio, tracks, CODECS[self.codec_id],
                                              start_sample=int(index * self.fragment_s * mkv.CONNECT_SAMPLE_RATE_HZ))
        service = {name: value for name, value in tags.items() if name.startswith("AWS_KINESISVIDEO_")}
        data = mkv.append_tags(self._muxed[index], service, unknown_size=index % 2 == 1)
        if self.truncate_fragment == index:
            data = data[:len(data) // 2]
        return data


CODECS = {mkv.PCM_CODEC_ID: "pcm_s16le", "A_PCM/INT/BIG": "pcm_s16be"}
"""Matroska codec id -> the libavformat encoder that writes it (tests: a codec Connect does not send)."""


def mux_fragment(tags: dict[str, str], audio: dict[str, bytes], tracks: tuple[str, ...], encoder: str,
                 start_sample: int) -> bytes:
    """One fragment as a producer writes it, by libavformat's Matroska muxer: a track per name in ``tracks`` (Name =
    the track name; mono 8 kHz, ``encoder``'s PCM), ``audio``'s PCM16 little-endian samples from ``start_sample`` of
    the call (the Cluster's timecode), and ``tags`` as global tags."""
    import av  # PyAV (the dev extra): only the stand-in writes fragments

    out = io.BytesIO()
    with av.open(out, mode="w", format="matroska") as container:
        container.metadata.update(tags)
        streams = []
        for name in tracks:
            stream = container.add_stream(encoder, rate=mkv.CONNECT_SAMPLE_RATE_HZ, layout="mono")
            stream.metadata["title"] = name
            streams.append(stream)
        for stream, name in zip(streams, tracks, strict=True):
            samples = np.frombuffer(audio.get(name, b""), dtype="<i2")
            if samples.size:
                frame = av.AudioFrame.from_ndarray(samples.reshape(1, -1), format="s16", layout="mono")
                frame.sample_rate, frame.pts = mkv.CONNECT_SAMPLE_RATE_HZ, start_sample
                frame.time_base = fractions.Fraction(1, mkv.CONNECT_SAMPLE_RATE_HZ)
                container.mux(stream.encode(frame))
            container.mux(stream.encode(None))
    return out.getvalue()


def load_stereo_call(path: str | Path) -> tuple[bytes, bytes]:
    """A stereo recording's two channels as PCM16 at 8 kHz (left: the customer, right: the agent).

    Raises:
        AudioError: not readable, not two channels, or no samples.
    """
    try:
        samples, rate = soundfile.read(str(path), dtype="float32", always_2d=True)
    except (soundfile.LibsndfileError, RuntimeError, OSError) as error:
        raise AudioError(f"{path}: cannot read it as audio ({error})") from error
    if samples.shape[1] != 2:
        raise AudioError(f"{path}: a call recording has two channels (left: customer, right: agent); this one has "
                         f"{samples.shape[1]}")
    if len(samples) == 0:
        raise AudioError(f"{path}: the recording holds no audio (a header and no samples)")
    if rate != mkv.CONNECT_SAMPLE_RATE_HZ:
        samples = soxr.resample(samples, rate, mkv.CONNECT_SAMPLE_RATE_HZ, quality="HQ")
    return float_to_pcm16(samples[:, 0]), float_to_pcm16(samples[:, 1])


class FakeKvs:
    """The HTTP stand-in (aiohttp on 127.0.0.1); ``calls`` by stream ARN. ``read_timeout_s`` defaults to
    :data:`READ_TIMEOUT_S` as it is when the stand-in is made (a test of ``voicectl connect-replay``, which makes its
    own, shortens it there)."""

    def __init__(self, read_timeout_s: float | None = None, poll_s: float = 0.05) -> None:
        self.calls: dict[str, FakeCall] = {}
        self.read_timeout_s = READ_TIMEOUT_S if read_timeout_s is None else read_timeout_s
        self.poll_s = poll_s
        self.get_media_requests: list[dict] = []
        self._runner: web.AppRunner | None = None
        self.port = 0

    def add(self, call: FakeCall) -> FakeCall:
        self.calls[call.stream_arn] = call
        return call

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def start(self) -> FakeKvs:
        app = web.Application()
        app.router.add_post("/getDataEndpoint", self._data_endpoint)
        app.router.add_post("/getMedia", self._get_media)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        return self

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    def _call(self, body: dict) -> FakeCall | None:
        return self.calls.get(body.get("StreamARN", ""))

    async def _data_endpoint(self, request: web.Request) -> web.Response:
        body = await request.json()
        if body.get("APIName") not in {"GET_MEDIA", "PUT_MEDIA", "GET_MEDIA_FOR_FRAGMENT_LIST"}:
            return _error(400, "InvalidArgumentException", f"APIName {body.get('APIName')!r} is not valid")
        if self._call(body) is None:
            return _error(404, "ResourceNotFoundException", "the stream does not exist")
        return web.json_response({"DataEndpoint": self.url})

    async def _get_media(self, request: web.Request) -> web.StreamResponse:
        body = await request.json()
        self.get_media_requests.append(body)
        call = self._call(body)
        if call is None:
            return _error(404, "ResourceNotFoundException", "the stream does not exist")
        selector = body.get("StartSelector") or {}
        kind = selector.get("StartSelectorType")
        if kind == "FRAGMENT_NUMBER" and selector.get("AfterFragmentNumber"):
            index = call.index_of(selector["AfterFragmentNumber"])
        elif kind == "CONTINUATION_TOKEN" and selector.get("ContinuationToken"):
            index = call.index_of(selector["ContinuationToken"])
        elif kind == "EARLIEST":
            index = 0
        else:
            return _error(400, "InvalidArgumentException", f"StartSelector {selector} is not supported here")
        response = web.StreamResponse(headers={"Content-Type": "video/webm"})
        await response.prepare(request)
        quiet_since = time.monotonic()
        try:
            while time.monotonic() - quiet_since < self.read_timeout_s:
                if index < call.available():
                    await response.write(call.fragment(index))
                    index += 1
                    quiet_since = time.monotonic()
                    if call.truncate_fragment == index - 1:
                        break
                else:
                    await asyncio.sleep(self.poll_s)
            await response.write_eof()
        except ConnectionResetError:
            pass  # the reader hung up (a call that failed or ended): GetMedia's server just stops, no traceback
        return response


def _error(status: int, kind: str, message: str) -> web.Response:
    return web.Response(status=status, text=json.dumps({"message": message}),
                        headers={"x-amzn-ErrorType": kind, "Content-Type": "application/json"})
