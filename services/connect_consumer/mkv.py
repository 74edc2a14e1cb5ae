"""Kinesis Video Streams' Matroska fragments as Amazon Connect writes them: framing, parsing and
(for the tests) writing, with ebmlite.

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
without ``Block`` in its schema (a BlockGroup's audio was lost); so the parser here walks element
headers with ebmlite's decoder, under the bounds below, and reads the few elements it needs itself.
"""

from __future__ import annotations

import io
import logging
import struct
from dataclasses import dataclass, field

import ebmlite
from ebmlite import decoding, encoding

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

_KNOWN_TAGS = {
    name.upper(): name
    for name in (
        TAG_CONTACT_ID,
        TAG_INSTANCE_ID,
        TAG_MIME_TYPE,
        TAG_FRAGMENT_NUMBER,
        TAG_SERVER_TIMESTAMP,
        TAG_PRODUCER_TIMESTAMP,
        TAG_MILLIS_BEHIND_NOW,
        TAG_CONTINUATION_TOKEN,
        TAG_ERROR_CODE,
        TAG_ERROR_ID,
        TAG_STOP_STREAMING,
    )
}
"""Tag names read case-insensitively: Matroska's tagging convention is upper case (libavformat
writes ``CONTACTID`` for ``ContactId``), Connect's producer writes ``ContactId`` (real dumps)."""

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

_EBML_ID = SCHEMA["EBML"].id
_SEGMENT_ID = SCHEMA["Segment"].id
_CLUSTER_ID = SCHEMA["Cluster"].id
_BLOCK_ID = 0xA1
"""BlockGroup's ``Block`` (RFC 9559, "Block element"; ebmlite's schema lacks it)."""
_LACING_MASK = 0x06
_TRACK_TYPE_AUDIO, _TRACK_TYPE_VIDEO = 2, 1


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
            header = _element_header(data, 0)
            if header is None:
                return None
            eid, size, payload_at = header
            if eid != _EBML_ID or size is None:
                raise FragmentError(
                    f"a fragment must start with an EBML header, found element id 0x{eid:x}"
                )
            segment_at = payload_at + size
            segment = _element_header(data, segment_at)
            if segment is None:
                return None
            sid, ssize, spayload_at = segment
            if sid != _SEGMENT_ID:
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
            self._walk = _Walk(at=spayload_at, open=[_SEGMENT_ID])
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
        while (header := _element_header(data, self.at)) is not None:
            eid, size, payload_at = header
            self.elements += 1
            if self.elements > MAX_ELEMENTS:
                raise FragmentError(
                    f"a fragment of more than {MAX_ELEMENTS} elements (a real one has ~150)"
                )
            while self.open and not _may_contain(self.open[-1], eid):
                # an element that cannot be its child ends an unknown-size master (RFC 8794 6.2)
                self.open.pop()
            if not self.open:
                if eid != _EBML_ID:
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


_UNKNOWN_SIZE_ALLOWED = {_SEGMENT_ID, SCHEMA["Cluster"].id}
_GLOBAL_IDS = set(SCHEMA.globals)
"""EBML's global elements (Void, CRC-32, SignatureSlot): valid in any master, so they never end
one."""


def _may_contain(parent: int, eid: int) -> bool:
    """Whether ``eid`` can be a child of the master ``parent`` (ebmlite's Matroska schema). An id
    the schema does not know is kept inside (EBML readers skip unknown elements; only a known
    element ends an unknown-size master)."""
    if eid in _GLOBAL_IDS:
        return True
    if eid not in SCHEMA.elements:
        return True
    return eid in SCHEMA.elements[parent].children


def _element_header(data: bytes | bytearray, at: int) -> tuple[int, int | None, int] | None:
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


def parse_fragment(data: bytes) -> Fragment:
    """Parse one fragment (bytes from :class:`FragmentFramer`), within the bounds above.

    Tracks are chosen by name (:data:`CONNECT_TRACKS`, :data:`LEGACY_TRACK_NAMES`); others are
    skipped and named in ``Fragment.skipped``. A Connect track must hold 8 kHz mono PCM16: the
    ``MimeType`` tag says so when present; without it, Connect's producer default (``A_AAC`` and no
    Audio element) is read as that, and ``A_PCM/INT/LIT`` with its Audio element.

    Raises:
        FragmentError: malformed or truncated; over a bound; a Connect track in another encoding
            (real AAC, video, another codec or rate); audio but no Connect track.
    """
    if len(data) > MAX_FRAGMENT_BYTES:
        raise FragmentError(
            f"a fragment of {len(data)} bytes; at most {MAX_FRAGMENT_BYTES} are read"
        )
    reader = _FragmentReader(data)
    try:
        reader.read()
    except FragmentError:
        raise
    except (
        OSError,
        ValueError,
        TypeError,
        IndexError,
        struct.error,
    ) as error:  # ebmlite's decoder on broken bytes
        raise FragmentError(
            f"the fragment could not be parsed ({type(error).__name__}: {cut(str(error))})"
        ) from error
    return reader.fragment()


_DESCEND = {
    SCHEMA[name].id
    for name in (
        "Info",
        "Tracks",
        "TrackEntry",
        "Audio",
        "Tags",
        "Tag",
        "SimpleTag",
        "Cluster",
        "BlockGroup",
    )
}
"""Masters the parser reads into; any other element (SeekHead, Cues, Void, CRC-32, Video ...) is
skipped whole."""
_ID = {
    name: SCHEMA[name].id
    for name in (
        "TimecodeScale",
        "TrackNumber",
        "TrackType",
        "Name",
        "CodecID",
        "SamplingFrequency",
        "Channels",
        "BitDepth",
        "TagName",
        "TagString",
        "Timecode",
        "SimpleBlock",
        "TrackEntry",
        "SimpleTag",
        "Audio",
    )
}


class _FragmentReader:
    """One walk over a fragment's element headers (ebmlite's decoder), reading only what the parser
    needs."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.elements = 0
        self.timecode_scale = DEFAULT_TIMECODE_SCALE_NS
        self.cluster_timecode = 0
        self.tags: dict[str, str] = {}
        self.tracks: list[Track] = []
        self.blocks: list[
            tuple[int, int, int]
        ] = []  # (track number, payload start, payload end) in data
        self._entry: dict[int, object] = {}
        self._simple_tag: dict[int, str] = {}

    def read(self) -> None:
        data = self.data
        header = _element_header(data, 0)
        if header is None or header[0] != _EBML_ID or header[1] is None:
            raise FragmentError("a fragment must start with an EBML header")
        segment = _element_header(data, header[2] + header[1])
        if segment is None or segment[0] != _SEGMENT_ID:
            raise FragmentError("an EBML header must be followed by a Segment")
        end = len(data) if segment[1] is None else segment[2] + segment[1]
        if end > len(data):
            raise FragmentError(
                f"the Segment needs {end} bytes, the fragment has {len(data)}: truncated"
            )
        # (id, end, unknown size) of the masters the walk is in: an unknown-size one (a Cluster)
        # ends at the first element it cannot hold (RFC 8794 section 6.2), a known-size one at its
        # end.
        stack: list[tuple[int, int, bool]] = [(_SEGMENT_ID, end, segment[1] is None)]
        at = segment[2]
        while True:
            while len(stack) > 1 and at >= stack[-1][1]:
                self._leave(stack.pop()[0])
            if at >= end:
                break
            header = _element_header(data, at)
            if header is None:
                raise FragmentError(
                    f"the fragment ends inside an element header at byte {at}: truncated"
                )
            eid, size, payload = header
            while len(stack) > 1 and stack[-1][2] and not _may_contain(stack[-1][0], eid):
                self._leave(stack.pop()[0])
            self.elements += 1
            if self.elements > MAX_ELEMENTS:
                raise FragmentError(
                    f"a fragment of more than {MAX_ELEMENTS} elements (a real one has ~150)"
                )
            if size is None:
                if eid != _CLUSTER_ID:
                    raise FragmentError(
                        f"element id 0x{eid:x} at byte {at} has an unknown size; Matroska allows "
                        "that for Segment and Cluster only (RFC 9559)"
                    )
                stack.append((eid, stack[-1][1], True))
                at = payload
                continue
            element_end = payload + size
            if element_end > stack[-1][1]:
                raise FragmentError(
                    f"element id 0x{eid:x} at byte {at} runs past its parent's end: truncated"
                )
            if eid in _DESCEND:
                self._enter(eid)
                stack.append((eid, element_end, False))
                at = payload
            else:
                self._leaf(stack[-1][0], eid, payload, element_end)
                at = element_end
        while len(stack) > 1:
            self._leave(stack.pop()[0])

    def _enter(self, eid: int) -> None:
        if eid == _ID["TrackEntry"]:
            self._entry = {}
        elif eid == _ID["SimpleTag"]:
            self._simple_tag = {}
        elif eid == _ID["Audio"]:
            self._entry[_ID["Audio"]] = True

    def _leave(self, eid: int) -> None:
        if eid == _ID["TrackEntry"]:
            self._add_track(self._entry)
        elif eid == _ID["SimpleTag"] and _ID["TagName"] in self._simple_tag:
            if len(self.tags) >= MAX_TAGS:
                raise FragmentError(f"a fragment of more than {MAX_TAGS} tags (a real one has ~12)")
            name = self._simple_tag[_ID["TagName"]]
            self.tags[_KNOWN_TAGS.get(name.upper(), name)] = self._simple_tag.get(
                _ID["TagString"], ""
            )

    def _leaf(self, parent: int, eid: int, start: int, end: int) -> None:
        data = self.data
        if eid in (_ID["SimpleBlock"], _BLOCK_ID) and parent in (
            _CLUSTER_ID,
            SCHEMA["BlockGroup"].id,
        ):
            if eid == _BLOCK_ID and parent == _CLUSTER_ID:
                # a Block belongs in a BlockGroup: not audio of a track (skipped, as any unknown
                # element)
                return
            if len(self.blocks) >= MAX_BLOCKS:
                raise FragmentError(
                    f"a fragment of more than {MAX_BLOCKS} blocks (a real one has 32)"
                )
            self.blocks.append(_block(data, start, end))
        elif parent == _CLUSTER_ID and eid == _ID["Timecode"]:
            self.cluster_timecode = _uint(data, start, end)
        elif parent == SCHEMA["Info"].id and eid == _ID["TimecodeScale"]:
            self.timecode_scale = _uint(data, start, end) or DEFAULT_TIMECODE_SCALE_NS
        elif parent == _ID["TrackEntry"] and eid in (_ID["TrackNumber"], _ID["TrackType"]):
            self._entry[eid] = _uint(data, start, end)
        elif parent == _ID["TrackEntry"] and eid in (_ID["Name"], _ID["CodecID"]):
            self._entry[eid] = _text(data, start, end)
        elif parent == _ID["Audio"] and eid == _ID["SamplingFrequency"]:
            if end - start not in (0, 4, 8):
                raise FragmentError(
                    f"a SamplingFrequency of {end - start} bytes; EBML floats are 4 or 8"
                )
            self._entry[eid] = (
                struct.unpack(">f" if end - start == 4 else ">d", data[start:end])[0]
                if end > start
                else 0.0
            )
        elif parent == _ID["Audio"] and eid in (_ID["Channels"], _ID["BitDepth"]):
            self._entry[eid] = _uint(data, start, end)
        elif parent == _ID["SimpleTag"] and eid in (_ID["TagName"], _ID["TagString"]):
            self._simple_tag[eid] = _text(data, start, end)

    def _add_track(self, entry: dict[int, object]) -> None:
        if _ID["TrackNumber"] not in entry:
            raise FragmentError("a TrackEntry has no TrackNumber")
        if len(self.tracks) >= MAX_TRACKS:
            raise FragmentError(
                f"a fragment of more than {MAX_TRACKS} tracks (Connect writes one or two)"
            )
        self.tracks.append(
            Track(
                number=int(entry[_ID["TrackNumber"]]),
                name=str(entry.get(_ID["Name"], "")),
                codec_id=str(entry.get(_ID["CodecID"], "")),
                track_type=int(entry.get(_ID["TrackType"], 0)),
                sample_rate_hz=entry.get(_ID["SamplingFrequency"], 8000.0)
                if _ID["Audio"] in entry
                else None,
                channels=int(entry.get(_ID["Channels"], 1)) if _ID["Audio"] in entry else None,
                bit_depth=int(entry[_ID["BitDepth"]]) if _ID["BitDepth"] in entry else None,
                has_audio_element=_ID["Audio"] in entry,
            )
        )

    def fragment(self) -> Fragment:
        fragment = Fragment(
            tags=self.tags, tracks={}, timecode_ms=self.cluster_timecode * self.timecode_scale / 1e6
        )
        names: dict[int, str] = {}
        skipped = []
        for track in self.tracks:
            connect = (
                track.name if track.name in CONNECT_TRACKS else LEGACY_TRACK_NAMES.get(track.name)
            )
            if connect is None:
                skipped.append(
                    f"{track.name or '(unnamed)'} (track {track.number}, "
                    f"{track.codec_id or 'no codec'})"
                )
                continue
            if connect in fragment.tracks or track.number in names:
                raise FragmentError(
                    f"two tracks are read as {connect} (or share number {track.number})"
                )
            _check_format(track, self.tags.get(TAG_MIME_TYPE))
            names[track.number] = connect
            fragment.tracks[connect] = track
        fragment.skipped = tuple(skipped)
        if self.blocks and not names:
            found = "; ".join(_describe(track) for track in self.tracks) or "no TrackEntry"
            raise FragmentError(
                f"the fragment has no track named {' or '.join(CONNECT_TRACKS)} "
                f"({cut(found, 300)}); Connect's streams carry those audio tracks"
            )
        declared = {track.number for track in self.tracks}
        audio: dict[str, list[bytes]] = {name: [] for name in names.values()}
        for number, start, end in self.blocks:
            if number not in declared:
                raise FragmentError(
                    f"a block is on track {number}, which the fragment's Tracks do not declare"
                )
            if number not in names:
                continue  # a skipped track's audio
            if (end - start) % 2:
                raise FragmentError(
                    f"a block on track {names[number]} holds {end - start} bytes, not whole 16-bit "
                    "samples: truncated"
                )
            audio[names[number]].append(self.data[start:end])
        fragment.audio = {name: b"".join(pieces) for name, pieces in audio.items()}
        return fragment


def _describe(track: Track) -> str:
    kinds = {_TRACK_TYPE_VIDEO: "video", _TRACK_TYPE_AUDIO: "audio"}
    kind = kinds.get(track.track_type, f"type {track.track_type}")
    return (
        f"track {track.number} {cut(track.name, 40) or '(unnamed)'}: {kind}, "
        f"{cut(track.codec_id, 40)}"
    )


def _check_format(track: Track, mime_type: str | None) -> None:
    """Raises FragmentError unless ``track`` (one of Connect's by name) holds 8 kHz mono PCM16."""
    what = f"track {track.name}"
    if track.track_type == _TRACK_TYPE_VIDEO:
        raise FragmentError(
            f"{what} is a video track ({cut(track.codec_id, 40)}); Connect's tracks are audio"
        )
    if mime_type is not None:
        kind, _, rest = mime_type.partition(";")
        # Parameter names are case-insensitive (RFC 2045, section 5.1): Rate=8000 is rate=8000.
        params = {
            name.strip().lower(): value
            for name, _, value in (
                part.strip().partition("=") for part in rest.split(";") if part.strip()
            )
        }
        if (
            kind.strip().lower() != "audio/l16"
            or params.get("rate", "").strip() != str(CONNECT_SAMPLE_RATE_HZ)
            or params.get("channels", "1").strip() != "1"
        ):
            raise FragmentError(
                f"{what}: MimeType {cut(mime_type, 60)!r}; the consumer reads Connect's "
                f"{CONNECT_MIME_TYPE!r} only"
            )
        if track.codec_id in (CONNECT_CODEC_ID, PCM_CODEC_ID):
            return  # the tag says what the label does not (Connect's A_AAC)
    elif track.codec_id == CONNECT_CODEC_ID and not track.has_audio_element:
        return  # Connect's producer default without its MimeType tag: the same PCM (real dumps)
    elif (
        track.codec_id == PCM_CODEC_ID
        and track.bit_depth == PCM_BIT_DEPTH
        and track.channels == 1
        and track.sample_rate_hz == CONNECT_SAMPLE_RATE_HZ
    ):
        return
    if track.codec_id == CONNECT_CODEC_ID:
        raise FragmentError(
            f"{what} is AAC (A_AAC with an Audio element: {track.sample_rate_hz or 0:g} Hz, "
            f"{track.channels} channel(s)); Connect writes PCM16 labelled A_AAC without one, "
            "and real AAC is not read"
        )
    raise FragmentError(
        f"{what} is {cut(track.codec_id, 40) or 'without a CodecID'} {track.bit_depth or 0}-bit "
        f"{track.channels or 0} channel(s) at {track.sample_rate_hz or 0:g} Hz; Connect sends 8 "
        f"kHz 16-bit mono PCM ({CONNECT_CODEC_ID} without an Audio element, or {PCM_CODEC_ID})"
    )


def _uint(data: bytes, start: int, end: int) -> int:
    if end - start > 8:
        raise FragmentError(
            f"an integer of {end - start} bytes at byte {start}; EBML integers are at most 8"
        )
    return int.from_bytes(data[start:end], "big")


def _text(data: bytes, start: int, end: int) -> str:
    """A string element, NUL padding dropped (RFC 8794 section 7.3), cut to
    :data:`MAX_TEXT_CHARS`."""
    raw = data[start : min(end, start + 4 * MAX_TEXT_CHARS)].split(b"\0", 1)[0]
    return cut(raw.decode("utf-8", "replace"))


def _block(data: bytes, start: int, end: int) -> tuple[int, int, int]:
    """(track number, payload start, payload end) of a SimpleBlock/Block (RFC 9559, "Block
    structure")."""
    if end <= start:
        raise FragmentError("an empty block")
    length, _mask = decoding.decodeIntLength(data[start])
    if end - start < length + 3:
        raise FragmentError("a block shorter than its header: truncated")
    number = int.from_bytes(data[start : start + length], "big") & ((1 << (7 * length)) - 1)
    if data[start + length + 2] & _LACING_MASK:
        raise FragmentError("a laced block; Connect's PCM blocks are not laced")
    return number, start + length + 3, end


# ---- writing (the local stand-in and the tests) ------------------------------------------------
def append_tags(document: bytes, tags: dict[str, str], *, unknown_size: bool = False) -> bytes:
    """``document`` (one Matroska document: EBML header, Segment) with a ``Tags`` element of
    ``tags`` appended to its Segment, as GetMedia appends its own tags to each fragment a producer
    wrote. The Segment is rewritten with its new size, or EBML's unknown size with ``unknown_size``;
    elements before it keep their offsets (SeekHead, Cues).

    Raises:
        FragmentError: ``document`` is not an EBML header followed by a Segment of known size.
    """
    header = _element_header(document, 0)
    if header is None or header[0] != _EBML_ID or header[1] is None:
        raise FragmentError("not a Matroska document (no EBML header)")
    segment_at = header[2] + header[1]
    segment = _element_header(document, segment_at)
    if segment is None or segment[0] != _SEGMENT_ID or segment[1] is None:
        raise FragmentError("the document's Segment is missing or of unknown size")
    payload = document[segment[2] : segment[2] + segment[1]]
    payload += bytes(
        SCHEMA["Tags"].encode(
            {
                "Tag": [
                    {
                        "Targets": {},
                        "SimpleTag": [
                            {"TagName": name, "TagString": value} for name, value in tags.items()
                        ],
                    }
                ]
            }
        )
    )
    # An unknown size is 8 bytes of all ones after the 0x01 marker; a known one is written in 8
    # bytes too, so that the Segment's payload keeps its offset from the document's start either
    # way.
    size = (
        b"\x01\xff\xff\xff\xff\xff\xff\xff"
        if unknown_size
        else encoding.encodeSize(len(payload), 8)
    )
    return document[:segment_at] + encoding.encodeId(_SEGMENT_ID) + size + payload


def track_uid(number: int) -> int:
    return 1000 + number


def encode_fragment(
    *,
    tags: dict[str, str],
    audio: dict[str, bytes],
    timecode_ms: int,
    tracks: tuple[str, ...] = CONNECT_TRACKS,
    codec_id: str = PCM_CODEC_ID,
    unknown_size: bool = False,
) -> bytes:
    """A fragment as GetMedia returns it: EBML header, Segment (Info, Tracks, Tags, Cluster of
    SimpleBlocks).

    ``audio`` maps track names to PCM16 at 8 kHz; ``tags`` are written as fragment-level SimpleTags.
    With ``unknown_size`` the Segment has EBML's unknown size (the framer then ends it at the next
    EBML header).
    """
    # ebmlite encodes a master from a dict; a list value is that many elements (TrackEntry,
    # SimpleTag, SimpleBlock).
    entries = [
        {
            "TrackNumber": number,
            "TrackUID": track_uid(number),
            "TrackType": 2,
            "Name": name,
            "CodecID": codec_id,
            "Audio": {
                "SamplingFrequency": float(CONNECT_SAMPLE_RATE_HZ),
                "Channels": 1,
                "BitDepth": PCM_BIT_DEPTH,
            },
        }
        for number, name in enumerate(tracks, start=1)
    ]
    blocks = []
    for number, name in enumerate(tracks, start=1):
        pcm = audio.get(name, b"")
        if pcm:
            header = (
                encoding.encodeSize(number, 1) + (0).to_bytes(2, "big", signed=True) + bytes([0x80])
            )
            blocks.append(header + pcm)
    simple_tags = [{"TagName": name, "TagString": value} for name, value in tags.items()]
    body = SCHEMA["Info"].encode({"TimecodeScale": DEFAULT_TIMECODE_SCALE_NS})
    body += SCHEMA["Tracks"].encode({"TrackEntry": entries})
    body += SCHEMA["Tags"].encode({"Tag": [{"Targets": {}, "SimpleTag": simple_tags}]})
    cluster = {"Timecode": int(timecode_ms)}
    if blocks:
        cluster["SimpleBlock"] = blocks
    body += SCHEMA["Cluster"].encode(cluster)
    header = SCHEMA["EBML"].encode(
        {
            "EBMLVersion": 1,
            "EBMLReadVersion": 1,
            "DocType": "matroska",
            "DocTypeVersion": 4,
            "DocTypeReadVersion": 2,
        }
    )
    segment_id = encoding.encodeId(_SEGMENT_ID)
    size = b"\x01\xff\xff\xff\xff\xff\xff\xff" if unknown_size else encoding.encodeSize(len(body))
    return bytes(header) + segment_id + size + bytes(body)
