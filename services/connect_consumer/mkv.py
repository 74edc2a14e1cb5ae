"""Kinesis Video Streams' Matroska fragments as Amazon Connect writes them, with ebmlite: what they
hold (track names, tags, GetMedia's error ids, the bounds on a fragment, :class:`Fragment`), the
element headers every walk reads, and framing GetMedia's byte stream into fragments
(:class:`FragmentFramer`). Reading a fragment is :mod:`connect_consumer.mkv_parser`'s, writing one
(the local stand-in, the tests) :mod:`connect_consumer.mkv_writer`'s.

GetMedia's payload (API reference, "payload") is a sequence of chunks, one per fragment, each a
whole Matroska document (``EBML`` header, ``Segment``), to which the service adds the tags
``AWS_KINESISVIDEO_FRAGMENT_NUMBER``, ``_SERVER_TIMESTAMP``, ``_PRODUCER_TIMESTAMP`` (before the
Cluster), ``_MILLIS_BEHIND_NOW`` and ``_CONTINUATION_TOKEN`` (after it), and on a failure
``AWS_KINESISVIDEO_ERROR_CODE`` (text) and ``_ERROR_ID`` (an integer code,
:data:`ERROR_FRAGMENT_NOT_FOUND` ...).

What Amazon Connect's producer writes (public dumps of real calls; sources named in
tests/unit/services/connect_consumer/fixtures/README.md): two tracks named ``AUDIO_FROM_CUSTOMER``
and ``AUDIO_TO_CUSTOMER`` (either may be track 1), each with ``CodecID`` ``A_AAC``, a 2-byte
``CodecPrivate`` and *no* ``Audio`` element, while the blocks hold 8 kHz 16-bit mono PCM, as the
per-call tag ``MimeType`` = ``audio/L16;rate=8000;channels=1;`` says; per-call tags (``ContactId``,
``InstanceId``, ``MimeType``, one per track name) each in its own ``Tags`` element, before and after
the Cluster; an unknown-size Cluster whose ``Timecode`` is epoch milliseconds, holding 16
SimpleBlocks of 1024 bytes per track. An older producer names its one track ``Track_audio/L16``: the
reference consumer (amazon-connect-realtime-transcription, KVSUtils) reads it as
``AUDIO_FROM_CUSTOMER``, and so does this one.

Why ebmlite: a maintained, pure-Python EBML library that ships the Matroska schema, so element ids
and types come from the schema, not from us. Its document reader builds an object per element,
without a bound on their number (a fragment of four million Voids stalled a task for seconds) and
without ``Block`` in its schema (a BlockGroup's audio was lost); so the framer and the parser walk
element headers with ebmlite's decoder, under the bounds below, and read the few elements they need
themselves.
"""

from __future__ import annotations

import io
import logging
from dataclasses import dataclass, field

import ebmlite
from ebmlite import decoding

LOG = logging.getLogger(__name__)

SCHEMA = ebmlite.loadSchema("matroska.xml")

TRACK_FROM_CUSTOMER = "AUDIO_FROM_CUSTOMER"
"""What the customer says (Amazon Connect's track name)."""
TRACK_TO_CUSTOMER = "AUDIO_TO_CUSTOMER"
"""What the customer hears: the agent, prompts, hold music (Amazon Connect's track name)."""
CONNECT_TRACKS = (TRACK_FROM_CUSTOMER, TRACK_TO_CUSTOMER)
LEGACY_TRACK_NAMES = {"Track_audio/L16": TRACK_FROM_CUSTOMER}
"""Track names of an older Connect producer -> the track they are (the reference consumer,
amazon-connect-realtime-transcription KVSUtils.getByteBufferFromStream, "backwards
compatibility")."""

CONNECT_SAMPLE_RATE_HZ = 8000
"""Amazon Connect's media streams are 8 kHz ("Live media streaming", admin guide; the MimeType tag
of real calls)."""
PCM_CODEC_ID = "A_PCM/INT/LIT"
"""Matroska's codec id for little-endian integer PCM (what other producers write for PCM)."""
CONNECT_CODEC_ID = "A_AAC"
"""The codec id Connect's producer writes on its PCM tracks (real dumps), with no Audio element: a
label only."""
CONNECT_MIME_TYPE = "audio/L16;rate=8000;channels=1;"
"""The MimeType tag of real Connect calls. RFC 3551 makes L16 big-endian, but Connect's bytes are
little-endian: the reference consumers pass them unchanged to Amazon Transcribe, which takes signed
16-bit little-endian PCM only."""
PCM_BIT_DEPTH = 16

TAG_CONTACT_ID = "ContactId"
TAG_INSTANCE_ID = "InstanceId"
TAG_MIME_TYPE = "MimeType"
TAG_FRAGMENT_NUMBER = "AWS_KINESISVIDEO_FRAGMENT_NUMBER"
TAG_SERVER_TIMESTAMP = "AWS_KINESISVIDEO_SERVER_TIMESTAMP"
TAG_PRODUCER_TIMESTAMP = "AWS_KINESISVIDEO_PRODUCER_TIMESTAMP"
TAG_MILLIS_BEHIND_NOW = "AWS_KINESISVIDEO_MILLIS_BEHIND_NOW"
TAG_CONTINUATION_TOKEN = "AWS_KINESISVIDEO_CONTINUATION_TOKEN"
TAG_ERROR_CODE = "AWS_KINESISVIDEO_ERROR_CODE"
TAG_ERROR_ID = "AWS_KINESISVIDEO_ERROR_ID"
TAG_STOP_STREAMING = "STOP_STREAMING"
"""``true`` on a producer's last fragment (a public Connect consumer stops there; unconfirmed which
producer writes it: the real dumps do not have it)."""

# GetMedia's AWS_KINESISVIDEO_ERROR_ID codes (GetMedia API reference, "payload").
ERROR_WRITING_TO_STREAM = 3002
ERROR_FRAGMENT_NOT_FOUND = 4000
"""At the end of a stream's fragments: what follows the last one, the end of the call."""
ERROR_KMS_CODES = range(4500, 4507)
"""4500-4506: the stream's KMS key is denied, disabled, invalid, unavailable, misused, in a bad
state, not found."""
ERROR_INTERNAL = 5000
TRANSIENT_ERROR_CODES = frozenset({ERROR_WRITING_TO_STREAM, ERROR_INTERNAL})
"""Codes a reader resumes after (from its last whole fragment, a bounded number of times); the
others end the call."""

DEFAULT_TIMECODE_SCALE_NS = 1_000_000
"""Matroska's default TimecodeScale: timecodes in milliseconds."""

# Bounds on what one fragment may hold. A real Connect fragment is ~35 KB: 1.024 s, 32 SimpleBlocks,
# ~150 elements, ~12 tags, strings of at most 47 characters (fragment numbers). Each bound is far
# above that and far below what stalls a task: a fragment over one is refused with an error naming
# the bound.
MAX_FRAGMENT_BYTES = 1024 * 1024
"""Largest fragment read (30 x a real one, ~30 s of two 8 kHz PCM16 tracks); the framer buffers no
more."""
MAX_ELEMENTS = 10_000
"""Elements walked in a fragment (a real one has ~150)."""
MAX_BLOCKS = 2_048
"""Blocks in a fragment (a real one has 32: 16 per track)."""
MAX_TAGS = 256
"""SimpleTags in a fragment (a real one has ~12)."""
MAX_TRACKS = 16
"""TrackEntries in a fragment (Connect writes one or two)."""
MAX_TEXT_CHARS = 128
"""Characters kept of any string from a fragment (tag names and values, track names, codec ids)
before it reaches a reason, an event or a table item: fragment numbers and continuation tokens are
at most 128 (GetMedia StartSelector), ContactIds 256 (Connect's StartContactStreaming), real ones
36."""

EBML_ID = SCHEMA["EBML"].id
SEGMENT_ID = SCHEMA["Segment"].id
CLUSTER_ID = SCHEMA["Cluster"].id


def cut(text: str, limit: int = MAX_TEXT_CHARS) -> str:
    """``text`` cut to ``limit`` characters (marked with an ellipsis): a producer's string in our
    own messages."""
    return text if len(text) <= limit else text[: limit - 1] + "\u2026"


class FragmentError(ValueError):
    """A fragment that cannot be used (truncated, a codec other than Connect's PCM, over a bound,
    malformed)."""


@dataclass(frozen=True)
class Track:
    number: int
    name: str  # as written (cut); ``Fragment.tracks`` is keyed by the Connect track it is read as
    codec_id: str
    track_type: int
    sample_rate_hz: float | None  # None: no Audio element (Connect's producer)
    channels: int | None
    bit_depth: int | None
    has_audio_element: bool


@dataclass
class Fragment:
    """One fragment: its tags (name -> value, cut to :data:`MAX_TEXT_CHARS`) and each Connect
    track's PCM16."""

    tags: dict[str, str]
    tracks: dict[str, Track]
    audio: dict[str, bytes] = field(
        default_factory=dict
    )  # Connect track name -> PCM16 little-endian mono 8 kHz
    timecode_ms: float = (
        0.0  # the cluster's timecode, in milliseconds (Connect: epoch milliseconds)
    )
    skipped: tuple[
        str, ...
    ] = ()  # tracks not read (names other than Connect's, cut), for a warning

    @property
    def number(self) -> str | None:
        return self.tags.get(TAG_FRAGMENT_NUMBER)

    @property
    def contact_id(self) -> str | None:
        return self.tags.get(TAG_CONTACT_ID)

    @property
    def error_code(self) -> int | None:
        """GetMedia's in-band error id (``AWS_KINESISVIDEO_ERROR_ID``), or None; -1 if it is not an
        integer."""
        if TAG_ERROR_ID not in self.tags and TAG_ERROR_CODE not in self.tags:
            return None
        value = self.tags.get(TAG_ERROR_ID, "")
        return int(value) if value.isdigit() and len(value) < 10 else -1

    @property
    def error(self) -> str | None:
        """GetMedia's in-band error as text (id and description), if this chunk carries one."""
        if self.error_code is None:
            return None
        return f"{self.tags.get(TAG_ERROR_ID, '?')} {self.tags.get(TAG_ERROR_CODE, '')}".strip()

    @property
    def stop_streaming(self) -> bool:
        return self.tags.get(TAG_STOP_STREAMING, "").lower() == "true"

    def seconds(self, track: str) -> float:
        return len(self.audio.get(track, b"")) / 2 / CONNECT_SAMPLE_RATE_HZ


class FragmentFramer:
    """Cuts GetMedia's byte stream into whole fragments (EBML header + Segment), as bytes arrive.

    A Segment of known size ends at its size. One of unknown size (all-ones size) ends, by EBML's
    rule for unknown-sized elements (RFC 8794 section 6.2; RFC 9559 allows it for Segment and
    Cluster only), at the first element that cannot be its child: here the next fragment's ``EBML``
    header, or the end of the stream (:meth:`close`). The framer finds it by walking the Segment's
    elements from header to header (ids and sizes decoded by ebmlite, children from ebmlite's
    Matroska schema), skipping each known-size element whole and descending only into unknown-size
    ones (a Cluster), so bytes inside a payload are never read as an id: PCM can hold the EBML
    header's four bytes by chance (about 1% of 20-minute calls), a byte search would cut a fragment
    there. An element cut by a read boundary waits for its remaining bytes; the walk resumes where
    it stopped.
    """

    def __init__(self) -> None:
        self._buffer = bytearray()
        self._walk: _Walk | None = None  # the unknown-size Segment being walked, kept across feeds

    def feed(self, data: bytes) -> list[bytes]:
        self._buffer += data
        fragments = []
        while (end := self._complete_end()) is not None:
            fragments.append(bytes(self._buffer[:end]))
            del self._buffer[:end]
            self._walk = None
        if len(self._buffer) > MAX_FRAGMENT_BYTES:
            raise FragmentError(
                f"a fragment is larger than {MAX_FRAGMENT_BYTES} bytes (a real one is ~35 KB)"
            )
        return fragments

    def close(self) -> list[bytes]:
        """The stream ended: the rest is one last fragment of unknown size ending at an element
        boundary, or truncated (raises)."""
        rest = bytes(self._buffer)
        walk, self._buffer, self._walk = self._walk, bytearray(), None
        if not rest:
            return []
        if walk is not None and walk.at == len(rest):
            return [rest]
        raise FragmentError(
            f"the stream ended inside a fragment ({len(rest)} bytes of it arrived): truncated"
        )

    def _complete_end(self) -> int | None:
        data = self._buffer
        if self._walk is None:
            header = element_header(data, 0)
            if header is None:
                return None
            eid, size, payload_at = header
            if eid != EBML_ID or size is None:
                raise FragmentError(
                    f"a fragment must start with an EBML header, found element id 0x{eid:x}"
                )
            segment_at = payload_at + size
            segment = element_header(data, segment_at)
            if segment is None:
                return None
            sid, ssize, spayload_at = segment
            if sid != SEGMENT_ID:
                raise FragmentError(
                    f"an EBML header must be followed by a Segment, found element id 0x{sid:x}"
                )
            if ssize is not None:
                end = spayload_at + ssize
                if end > MAX_FRAGMENT_BYTES:
                    raise FragmentError(
                        f"a fragment of {end} bytes; at most {MAX_FRAGMENT_BYTES} are read"
                    )
                return end if len(data) >= end else None
            self._walk = _Walk(at=spayload_at, open=[SEGMENT_ID])
        return self._walk.advance(data)


@dataclass
class _Walk:
    """Element-by-element walk through an unknown-size Segment: ``at`` is the next element's offset,
    ``open`` the unknown-size masters it may still belong to (Segment, then perhaps a Cluster)."""

    at: int
    open: list[int]
    elements: int = 0

    def advance(self, data: bytes | bytearray) -> int | None:
        """The Segment's end (the offset of the element after it), or None until more bytes
        arrive."""
        while (header := element_header(data, self.at)) is not None:
            eid, size, payload_at = header
            self.elements += 1
            if self.elements > MAX_ELEMENTS:
                raise FragmentError(
                    f"a fragment of more than {MAX_ELEMENTS} elements (a real one has ~150)"
                )
            while self.open and not may_contain(self.open[-1], eid):
                # an element that cannot be its child ends an unknown-size master (RFC 8794 6.2)
                self.open.pop()
            if not self.open:
                if eid != EBML_ID:
                    raise FragmentError(
                        f"element id 0x{eid:x} at byte {self.at} follows a Segment of unknown "
                        "size; only the next fragment's EBML header may"
                    )
                return self.at
            if size is None:
                if eid not in _UNKNOWN_SIZE_ALLOWED:
                    raise FragmentError(
                        f"element id 0x{eid:x} at byte {self.at} has an unknown size; Matroska "
                        "allows that for Segment and Cluster only (RFC 9559)"
                    )
                self.open.append(eid)
                self.at = payload_at
            else:
                self.at = payload_at + size  # skipped whole: its payload is never read as ids
        return None


_UNKNOWN_SIZE_ALLOWED = {SEGMENT_ID, SCHEMA["Cluster"].id}
_GLOBAL_IDS = set(SCHEMA.globals)
"""EBML's global elements (Void, CRC-32, SignatureSlot): valid in any master, so they never end
one."""


def may_contain(parent: int, eid: int) -> bool:
    """Whether ``eid`` can be a child of the master ``parent`` (ebmlite's Matroska schema). An id
    the schema does not know is kept inside (EBML readers skip unknown elements; only a known
    element ends an unknown-size master)."""
    if eid in _GLOBAL_IDS:
        return True
    if eid not in SCHEMA.elements:
        return True
    return eid in SCHEMA.elements[parent].children


def element_header(data: bytes | bytearray, at: int) -> tuple[int, int | None, int] | None:
    """(id, size or None for unknown, payload offset) of the element at ``at``, or None if not all
    there yet."""
    if len(data) - at < 2:
        return None
    stream = io.BytesIO(bytes(data[at : at + 12]))
    try:
        eid, id_length = decoding.readElementID(stream)
        size, size_length = decoding.readElementSize(stream)
    except (OSError, TypeError, IndexError, ValueError):
        if len(data) - at >= 12:
            raise FragmentError(f"a malformed element header at byte {at}") from None
        return None
    if at + id_length + size_length > len(data):
        return None
    return eid, size, at + id_length + size_length
