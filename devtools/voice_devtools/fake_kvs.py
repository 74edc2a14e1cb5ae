"""A local stand-in for Kinesis Video Streams' GetDataEndpoint and GetMedia, serving a call as
Connect writes it.

A :class:`FakeCall` cuts a stereo recording (left: the customer, ``AUDIO_FROM_CUSTOMER``; right:
what the customer hears, ``AUDIO_TO_CUSTOMER``) into fragments, released as a live call would
produce them (``speed`` x real time; 0: all at once). By default each fragment is the real layout
byte for byte (:func:`connect_fragment`; what each property rests on is said where it is written):
1.024 s of 16 SimpleBlocks of 1024 bytes per track, interleaved; ``A_AAC`` labels and no Audio
element, the ``MimeType`` tag saying PCM; the per-call tags each in their own Tags element before
and after the Cluster; epoch-millisecond Cluster timecodes; GetMedia's tags around the Cluster, with
the continuation token equal to the fragment's own number (the dump). ``order`` numbers the tracks
either way (the dump has AUDIO_TO_CUSTOMER as track 1); ``tracks`` may hold only the customer's (a
flow that streams one side). ``layout="lavf"`` writes the fragments with libavformat's muxer instead
(PCM tracks, an independent writer).

:class:`FakeKvs` serves them over HTTP as the REST API boto3 calls: ``POST /getDataEndpoint``
(answers its own URL) and ``POST /getMedia``: chunked transfer of fragments from the StartSelector
on; the payload ends once no new fragment arrives for :data:`READ_TIMEOUT_S` (GetMedia's read "will
time out after 3 seconds if there are no ingested fragments"), so a call whose producer stopped ends
its stream after its last fragment. StartSelector as the API reference states it:
``CONTINUATION_TOKEN`` resumes after the fragment the token names ("starts returning chunks starting
where the last API ended"); ``FRAGMENT_NUMBER`` starts at ``AfterFragmentNumber`` itself (the API
reference has said both "the chunk containing" and "the chunk after" it; unconfirmed which AWS does:
the consumer skips what it has read either way, and Connect's StartFragmentNumber is the call's
first fragment, which must not be skipped); ``EARLIEST``. Faults, once each: ``errors`` (a GetMedia
error chunk, then the payload stops, as its ``AWS_KINESISVIDEO_ERROR_CODE`` says "an error that
caused GetMedia to stop"), ``resets`` (the connection cut in the middle of a fragment). What nobody
outside AWS knows, and the stand-in therefore does not model: what a transfer or a conference does
to the ContactId tag of the fragments (``then_contact`` only puts another contact's fragment after
the call's last, as a stream reused by a later call has).
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
from ebmlite import encoding

from connect_consumer import mkv
from connect_consumer.mkv_writer import append_tags
from voice_client.audio import AudioError, float_to_pcm16

READ_TIMEOUT_S = 3.0
"""GetMedia: "reading the HTTP response payload will time out after 3 seconds if there are no
ingested fragments"."""
FIRST_FRAGMENT_NUMBER = 91343852333181551234925834077012571618243808844
"""Fragment numbers are 47-digit decimal strings (this one is the dump's)."""
FIRST_TIMECODE_MS = 1782912654536
"""The Cluster timecode of the dump's fragment: epoch milliseconds (equal to its producer
timestamp)."""
SERVER_LAG_MS = 170
"""Server timestamp minus producer timestamp in the dump (1782912654.706 - .536)."""
INSTANCE_ID = "3087be6e-771a-48a8-90da-93b5326a43a1"


# ---- the real layout, byte for byte ------------------------------------------------------------
# Element widths as Connect's fragments have them through GetMedia (the dump in citizensadvice's
# consumer library, sample-matroska.txt, offsets checked by
# tests/unit/services/connect_consumer/test_fixtures.py) and as the producer's templates write them
# (amazon-kinesis-video-streams-pic, MkvStatics.c): the producer's elements with the templates'
# fixed size widths, GetMedia's own tags with 4-byte sizes (also in the parser library's
# output_get_media.mkv).
_EBML_HEADER = bytes.fromhex(
    "1a45dfa3a34286810142f7810142f2810442f381084282886d6174726f736b614287810242858102"
)
"""MkvStatics.c gMkvHeaderBits: 1-byte sizes, DocType matroska, DocTypeVersion 2."""
_SEGMENT = bytes.fromhex("18538067") + b"\x01" + b"\xff" * 7
"""GetMedia's Segment: unknown size in 8 bytes (both dumps; the producer writes the 1-byte 0xFF)."""
_CLUSTER = bytes.fromhex("1f43b675ff")
"""MkvStatics.c gMkvClusterInfoBits: an unknown-size Cluster, then Timecode (8 bytes) and Position
0."""
TITLE, MUXING_APP = "Kinesis Video SDK", "Kinesis Video SDK 1.1.0 JNI 2.0"
"""Info's Title and MuxingApp/WritingApp in the real dump."""
AAC_CODEC_PRIVATE = bytes.fromhex("1588")
"""The 2-byte CodecPrivate (the dump gives its length, not its bytes: this is AAC-LC's
AudioSpecificConfig for 8 kHz mono, what an A_AAC label would carry; unconfirmed)."""
BLOCK_BYTES = 1024
"""Bytes of PCM per SimpleBlock (the dump: 32 SimpleBlocks of 1028 bytes, a 4-byte block header
each)."""
BLOCKS_PER_TRACK = 16
"""SimpleBlocks per track in a fragment: 16 x 512 samples = 1.024 s (the dump's 32 blocks over two
tracks)."""
FRAGMENT_S = BLOCKS_PER_TRACK * BLOCK_BYTES / 2 / 8000
"""1.024 s of audio per fragment."""


def _sized(element_id: str, payload: bytes, width: int) -> bytes:
    """An element with its size in ``width`` bytes (wider when the payload needs it: tests' hostile
    strings)."""
    fits = len(payload) < (1 << (7 * width)) - 1
    return (
        bytes.fromhex(element_id)
        + encoding.encodeSize(len(payload), width if fits else None)
        + payload
    )


def _unsigned(element_id: str, value: int, width: int) -> bytes:
    return _sized(element_id, value.to_bytes(width, "big"), 1)


def _simple_tag(name: str, value: str, width: int) -> bytes:
    return _sized(
        "67c8", _sized("45a3", name.encode(), width) + _sized("4487", value.encode(), width), width
    )


def producer_tags(tags: dict[str, str]) -> bytes:
    """The producer's per-call tags: each in its own Tags > Tag > SimpleTag, all sizes 8 bytes
    (MkvStatics.c gMkvTagsBits; the dump's five Tags elements before and after the Cluster)."""
    return b"".join(
        _sized("1254c367", _sized("7373", _simple_tag(name, value, 8), 8), 8)
        for name, value in tags.items()
    )


def getmedia_tags(tags: dict[str, str]) -> bytes:
    """GetMedia's tags: one Tags > Tag holding a SimpleTag each, sizes 4 bytes (the dump;
    output_get_media.mkv)."""
    return _sized(
        "1254c367", _sized("7373", b"".join(_simple_tag(n, v, 4) for n, v in tags.items()), 4), 4
    )


def connect_fragment(
    *,
    tags: dict[str, str],
    service_before: dict[str, str],
    service_after: dict[str, str],
    audio: dict[str, bytes],
    order: tuple[str, ...],
    timecode_ms: int,
    codec_id: str = mkv.CONNECT_CODEC_ID,
    segment_uid: bytes = bytes(16),
) -> bytes:
    """One fragment as GetMedia returns Connect's: EBML header; Segment (unknown size) of Info,
    Tracks (``order``: track 1 first, TrackUIDs counted the other way round as in the dump), the
    producer's ``tags`` (own Tags each), GetMedia's ``service_before`` tags, the Cluster
    (epoch-millisecond ``timecode_ms``; per 64 ms a SimpleBlock of each track in turn, relative
    timecodes 0, 64, ... (unconfirmed: the dump shows sizes, not the order)), the producer's tags
    again, GetMedia's ``service_after`` tags."""
    info = (
        _sized("73a4", segment_uid, 1)
        + _sized("2ad7b1", mkv.DEFAULT_TIMECODE_SCALE_NS.to_bytes(8, "big"), 1)
        + _sized("7ba9", TITLE.encode(), 1)
        + _sized("4d80", MUXING_APP.encode(), 1)
        + _sized("5741", MUXING_APP.encode(), 1)
    )
    entries = b""
    for number, name in enumerate(order, start=1):
        entry = (
            _unsigned("d7", number, 1)
            + _unsigned("73c5", len(order) + 1 - number, 8)
            + _unsigned("83", 2, 1)
            + _sized("536e", name.encode(), 1)
            + _sized("86", codec_id.encode(), 1)
            + _sized("63a2", AAC_CODEC_PRIVATE, 1)
        )
        entries += _sized("ae", entry, 4)
    blocks = b""
    pieces = {
        name: [
            audio.get(name, b"")[at : at + BLOCK_BYTES]
            for at in range(0, len(audio.get(name, b"")), BLOCK_BYTES)
        ]
        for name in order
    }
    for index in range(max((len(p) for p in pieces.values()), default=0)):
        for number, name in enumerate(order, start=1):
            if index < len(pieces[name]):
                header = (
                    bytes([0x80 | number]) + (index * 64).to_bytes(2, "big", signed=True) + b"\x80"
                )
                blocks += _sized("a3", header + pieces[name][index], 8)
    cluster = _CLUSTER + _unsigned("e7", timecode_ms, 8) + _unsigned("a7", 0, 1) + blocks
    body = (
        _sized("1549a966", info, 2)
        + _sized("1654ae6b", entries, 4)
        + producer_tags(tags)
        + getmedia_tags(service_before)
        + cluster
        + producer_tags(tags)
        + getmedia_tags(service_after)
    )
    return _EBML_HEADER + _SEGMENT + body


def error_chunk(error_id: int, message: str) -> bytes:
    """GetMedia's error chunk: its two tags (API reference); the layout around them is unconfirmed
    (no public dump): an EBML header and a Segment holding only GetMedia's Tags."""
    return (
        _EBML_HEADER
        + _SEGMENT
        + getmedia_tags({mkv.TAG_ERROR_CODE: message, mkv.TAG_ERROR_ID: str(error_id)})
    )


@dataclass
class FakeCall:
    contact_id: str
    stream_name: str
    customer: bytes  # PCM16 8 kHz
    agent: bytes
    speed: float = 0.0
    layout: str = "connect"  # "connect": the real layout; "lavf": libavformat's muxer (PCM tracks)
    order: tuple[str, ...] = (
        mkv.TRACK_TO_CUSTOMER,
        mkv.TRACK_FROM_CUSTOMER,
    )  # track 1 first (the dump's order)
    tracks: tuple[str, ...] = mkv.CONNECT_TRACKS  # the tracks the flow streams
    started_at: float = field(default_factory=time.monotonic)
    extra_tracks: tuple[str, ...] = ()  # tests: a track of another name
    codec_id: str | None = None  # tests: another codec (default: the layout's own)
    mime_type: str = mkv.CONNECT_MIME_TYPE
    truncate_fragment: int | None = None  # tests: serve this fragment cut short
    limit: int | None = None  # tests: only this many fragments exist yet (a live call held open)
    then_contact: str | None = (
        None  # after the last fragment, one of this other contact (Connect reuses streams)
    )
    errors: dict[int, tuple[int, str]] = field(
        default_factory=dict
    )  # index -> a GetMedia error served once there
    resets: set[int] = field(default_factory=set)  # indexes whose first serving is cut mid-fragment
    _made: dict[int, bytes] = field(default_factory=dict, repr=False, compare=False)

    @property
    def fragment_s(self) -> float:
        return FRAGMENT_S if self.layout == "connect" else 2.0

    @property
    def stream_arn(self) -> str:
        return (
            f"arn:aws:kinesisvideo:us-east-1:123456789012:stream/{self.stream_name}/1700000000000"
        )

    @property
    def fragment_bytes(self) -> int:
        return round(self.fragment_s * mkv.CONNECT_SAMPLE_RATE_HZ) * 2

    @property
    def count(self) -> int:
        return max(1, -(-max(len(self.customer), len(self.agent)) // self.fragment_bytes))

    def number(self, index: int) -> str:
        return str(FIRST_FRAGMENT_NUMBER + index * 7)

    def index_of(self, number: str) -> int:
        return (int(number) - FIRST_FRAGMENT_NUMBER + 6) // 7

    def available(self) -> int:
        """Fragments produced so far (all of them when ``speed`` is 0), and the other contact's one
        after them."""
        count = self.count
        if self.speed > 0:
            elapsed_audio = (time.monotonic() - self.started_at) * self.speed
            count = min(count, int(elapsed_audio // self.fragment_s))
        if self.limit is not None:
            return min(count, self.limit)
        return count + (1 if self.then_contact and count == self.count else 0)

    def fragment(self, index: int) -> bytes:
        size = self.fragment_bytes
        sides = {mkv.TRACK_FROM_CUSTOMER: self.customer, mkv.TRACK_TO_CUSTOMER: self.agent}
        audio = {name: sides[name][index * size : (index + 1) * size] for name in self.tracks}
        if index >= self.count:  # the next contact's first fragment: its audio is not this call's
            audio = {name: bytes(size) for name in audio}
        for name in self.extra_tracks:
            audio[name] = sides[mkv.TRACK_FROM_CUSTOMER][index * size : (index + 1) * size]
        contact = self.then_contact if index >= self.count else self.contact_id
        number = self.number(index)
        behind_ms = max(0, int((self.available() - 1 - index) * self.fragment_s * 1000))
        timecode_ms = FIRST_TIMECODE_MS + round(index * self.fragment_s * 1000)
        service_before = {
            mkv.TAG_FRAGMENT_NUMBER: number,
            mkv.TAG_SERVER_TIMESTAMP: f"{(timecode_ms + SERVER_LAG_MS) / 1000:.3f}",
            mkv.TAG_PRODUCER_TIMESTAMP: f"{timecode_ms / 1000:.3f}",
        }
        # The continuation token is the fragment's own number (the dump): resuming with it starts
        # after it.
        service_after = {
            mkv.TAG_MILLIS_BEHIND_NOW: str(behind_ms),
            mkv.TAG_CONTINUATION_TOKEN: number,
        }
        order = tuple(name for name in self.order if name in audio) + tuple(
            name for name in audio if name not in self.order
        )
        if self.layout == "connect":
            # Per-call tags as the dump has them: ids, MimeType, then each track's name -> its
            # TrackUID.
            tags = {
                mkv.TAG_CONTACT_ID: contact,
                mkv.TAG_INSTANCE_ID: INSTANCE_ID,
                mkv.TAG_MIME_TYPE: self.mime_type,
            }
            tags.update({name: str(len(order) - position) for position, name in enumerate(order)})
            data = connect_fragment(
                tags=tags,
                service_before=service_before,
                service_after=service_after,
                audio=audio,
                order=order,
                timecode_ms=timecode_ms,
                codec_id=self.codec_id or mkv.CONNECT_CODEC_ID,
            )
        else:
            if index not in self._made:
                producer = {mkv.TAG_CONTACT_ID: contact, mkv.TAG_INSTANCE_ID: INSTANCE_ID}
                self._made[index] = mux_fragment(
                    producer,
                    audio,
                    order,
                    CODECS[self.codec_id or mkv.PCM_CODEC_ID],
                    start_sample=int(index * self.fragment_s * 8000),
                )
            data = append_tags(
                self._made[index], service_before | service_after, unknown_size=index % 2 == 1
            )
        if self.truncate_fragment == index:
            data = data[: len(data) // 2]
        return data


CODECS = {mkv.PCM_CODEC_ID: "pcm_s16le", "A_PCM/INT/BIG": "pcm_s16be"}
"""Matroska codec id -> the libavformat encoder that writes it (tests: a codec Connect does not
send)."""


def mux_fragment(
    tags: dict[str, str],
    audio: dict[str, bytes],
    tracks: tuple[str, ...],
    encoder: str,
    start_sample: int,
) -> bytes:
    """One fragment as a producer writes it, by libavformat's Matroska muxer: a track per name in
    ``tracks`` (Name = the track name; mono 8 kHz, ``encoder``'s PCM), ``audio``'s PCM16
    little-endian samples from ``start_sample`` of the call (the Cluster's timecode), and ``tags``
    as global tags."""
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
                frame = av.AudioFrame.from_ndarray(
                    samples.reshape(1, -1), format="s16", layout="mono"
                )
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
        raise AudioError(
            f"{path}: a call recording has two channels (left: customer, right: agent); this one "
            f"has {samples.shape[1]}"
        )
    if len(samples) == 0:
        raise AudioError(f"{path}: the recording holds no audio (a header and no samples)")
    if rate != mkv.CONNECT_SAMPLE_RATE_HZ:
        samples = soxr.resample(samples, rate, mkv.CONNECT_SAMPLE_RATE_HZ, quality="HQ")
    return float_to_pcm16(samples[:, 0]), float_to_pcm16(samples[:, 1])


class FakeKvs:
    """The HTTP stand-in (aiohttp on 127.0.0.1); ``calls`` by stream ARN. ``read_timeout_s``
    defaults to :data:`READ_TIMEOUT_S` as it is when the stand-in is made (a test of ``voicectl
    connect-replay``, which makes its own, shortens it there)."""

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
            return _error(
                400, "InvalidArgumentException", f"APIName {body.get('APIName')!r} is not valid"
            )
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
            index = call.index_of(selector["ContinuationToken"]) + 1
        elif kind == "EARLIEST":
            index = 0
        else:
            return _error(
                400, "InvalidArgumentException", f"StartSelector {selector} is not supported here"
            )
        response = web.StreamResponse(headers={"Content-Type": "video/webm"})
        await response.prepare(request)
        quiet_since = time.monotonic()
        try:
            # A call held at ``limit`` is a live producer whose next fragment is not written yet:
            # its payload stays open, as a real one does while a live call's fragments keep coming
            # (one every 1.024 s, inside 3 s).
            while time.monotonic() - quiet_since < self.read_timeout_s:
                if index in call.errors:  # also one past the last fragment: 4000, nothing after it
                    await response.write(error_chunk(*call.errors.pop(index)))
                    break  # "an error that caused GetMedia to stop"
                if index < call.available():
                    data = call.fragment(index)
                    if index in call.resets:
                        call.resets.discard(index)
                        await response.write(data[: len(data) // 2])
                        assert request.transport is not None
                        # the connection reset in the middle of a fragment
                        request.transport.abort()
                        return response
                    await response.write(data)
                    index += 1
                    quiet_since = time.monotonic()
                    if call.truncate_fragment == index - 1:
                        break
                else:
                    if call.limit is not None:
                        quiet_since = (
                            time.monotonic()
                        )  # held: the producer is live, its next fragment due
                    await asyncio.sleep(self.poll_s)
            await response.write_eof()
        except ConnectionResetError:
            # the reader hung up (a call that failed or ended): GetMedia's server just stops, no
            # traceback
            pass
        return response


def _error(status: int, kind: str, message: str) -> web.Response:
    return web.Response(
        status=status,
        text=json.dumps({"message": message}),
        headers={"x-amzn-ErrorType": kind, "Content-Type": "application/json"},
    )
