"""Kinesis Video Streams' Matroska fragments as Amazon Connect writes them: framing, parsing and (for the local
stand-in and the tests) writing, with ebmlite.

Layout (AWS documentation): GetMedia's payload is a sequence of chunks, one per fragment, each a complete Matroska
document: an ``EBML`` header, then a ``Segment`` holding ``Info`` (``TimecodeScale``), ``Tracks``, ``Tags`` and a
``Cluster`` (``Timecode``, ``SimpleBlock`` s). GetMedia adds the tags ``AWS_KINESISVIDEO_FRAGMENT_NUMBER``,
``AWS_KINESISVIDEO_SERVER_TIMESTAMP``, ``AWS_KINESISVIDEO_PRODUCER_TIMESTAMP``, ``AWS_KINESISVIDEO_MILLIS_BEHIND_NOW``
and ``AWS_KINESISVIDEO_CONTINUATION_TOKEN``, and on a failure ``AWS_KINESISVIDEO_ERROR_CODE`` /
``AWS_KINESISVIDEO_ERROR_ID`` (GetMedia API reference, "payload"). Amazon Connect ("Plan for live media streaming")
writes 8 kHz audio with what the customer says and what the customer hears on separate tracks, named
``AUDIO_FROM_CUSTOMER`` and ``AUDIO_TO_CUSTOMER`` (the Connect KVS consumer demo reads those names), and tags each
fragment with ``ContactId`` (the stream is reused by later calls: a fragment of another contact ends this call).
The codec is 16-bit little-endian PCM (``A_PCM/INT/LIT``, Matroska codec specs), one channel per track
(unconfirmed: AWS documents the rate and the tracks, not the codec id; the consumer refuses anything else with a
clear error rather than guess).

Why ebmlite: a maintained (Mide Technology, 3.4 in 2025), pure-Python EBML reader and writer that ships the
Matroska schema, so element ids and types come from the schema, not from us. The two things it leaves to the caller
are ours here, and small: cutting a live byte stream into whole documents (:class:`FragmentFramer`, from element
headers decoded by ebmlite) and the ``SimpleBlock`` header (track number, timecode, flags: Matroska spec, "Block
structure").
"""

from __future__ import annotations

import io
from dataclasses import dataclass, field

import ebmlite
from ebmlite import decoding, encoding

SCHEMA = ebmlite.loadSchema("matroska.xml")

TRACK_FROM_CUSTOMER = "AUDIO_FROM_CUSTOMER"
"""What the customer says (Amazon Connect's track name)."""
TRACK_TO_CUSTOMER = "AUDIO_TO_CUSTOMER"
"""What the customer hears: the agent, prompts, hold music (Amazon Connect's track name)."""
CONNECT_TRACKS = (TRACK_FROM_CUSTOMER, TRACK_TO_CUSTOMER)

CONNECT_SAMPLE_RATE_HZ = 8000
"""Amazon Connect's media streams are 8 kHz ("Plan for live media streaming")."""
PCM_CODEC_ID = "A_PCM/INT/LIT"
"""Matroska's codec id for little-endian integer PCM."""
PCM_BIT_DEPTH = 16

TAG_CONTACT_ID = "ContactId"
TAG_FRAGMENT_NUMBER = "AWS_KINESISVIDEO_FRAGMENT_NUMBER"
TAG_SERVER_TIMESTAMP = "AWS_KINESISVIDEO_SERVER_TIMESTAMP"
TAG_PRODUCER_TIMESTAMP = "AWS_KINESISVIDEO_PRODUCER_TIMESTAMP"
TAG_MILLIS_BEHIND_NOW = "AWS_KINESISVIDEO_MILLIS_BEHIND_NOW"
TAG_CONTINUATION_TOKEN = "AWS_KINESISVIDEO_CONTINUATION_TOKEN"
TAG_ERROR_CODE = "AWS_KINESISVIDEO_ERROR_CODE"
TAG_ERROR_ID = "AWS_KINESISVIDEO_ERROR_ID"

_KNOWN_TAGS = {name.upper(): name for name in (
    TAG_CONTACT_ID, TAG_FRAGMENT_NUMBER, TAG_SERVER_TIMESTAMP, TAG_PRODUCER_TIMESTAMP, TAG_MILLIS_BEHIND_NOW,
    TAG_CONTINUATION_TOKEN, TAG_ERROR_CODE, TAG_ERROR_ID)}
"""Tag names read case-insensitively: Matroska's tagging convention is upper case (libavformat writes ``CONTACTID``
for ``ContactId``), Connect's producer writes ``ContactId`` (unconfirmed which case each producer keeps)."""

DEFAULT_TIMECODE_SCALE_NS = 1_000_000
"""Matroska's default TimecodeScale: timecodes in milliseconds."""
MAX_FRAGMENT_BYTES = 8 * 1024 * 1024
"""Largest fragment the framer buffers: far above Connect's (a few seconds of two 8 kHz PCM16 tracks is ~100 KB);
a larger one is a broken stream, reported, not buffered without bound."""

_EBML_ID = SCHEMA["EBML"].id
_SEGMENT_ID = SCHEMA["Segment"].id
_LACING_MASK = 0x06


class FragmentError(ValueError):
    """A fragment that cannot be used (truncated, an unknown codec or track, a malformed element)."""


@dataclass(frozen=True)
class Track:
    number: int
    name: str
    codec_id: str
    sample_rate_hz: float
    channels: int
    bit_depth: int


@dataclass
class Fragment:
    """One fragment: its tags (name -> value, fragment-level and track-level merged) and each track's PCM16."""

    tags: dict[str, str]
    tracks: dict[str, Track]
    audio: dict[str, bytes] = field(default_factory=dict)  # track name -> PCM16 little-endian mono
    timecode_ms: float = 0.0  # the cluster's timecode, in milliseconds

    @property
    def number(self) -> str | None:
        return self.tags.get(TAG_FRAGMENT_NUMBER)

    @property
    def contact_id(self) -> str | None:
        return self.tags.get(TAG_CONTACT_ID)

    @property
    def error(self) -> str | None:
        """GetMedia's in-band error (``AWS_KINESISVIDEO_ERROR_CODE`` and ``_ID``), if this chunk carries one."""
        if TAG_ERROR_CODE not in self.tags and TAG_ERROR_ID not in self.tags:
            return None
        return f"{self.tags.get(TAG_ERROR_ID, '?')} {self.tags.get(TAG_ERROR_CODE, '')}".strip()

    def seconds(self, track: str) -> float:
        return len(self.audio.get(track, b"")) / 2 / CONNECT_SAMPLE_RATE_HZ


class FragmentFramer:
    """Cuts GetMedia's byte stream into whole fragments (EBML header + Segment), as bytes arrive.

    A Segment of known size ends at its size. One of unknown size (all-ones size) ends, by EBML's rule for
    unknown-sized elements (RFC 8794 section 6.2; RFC 9559 allows it for Segment and Cluster only), at the first
    element that cannot be its child: here the next fragment's ``EBML`` header, or the end of the stream
    (:meth:`close`). The framer finds it by walking the Segment's elements from header to header (ids and sizes
    decoded by ebmlite, children from ebmlite's Matroska schema), skipping each known-size element whole and
    descending only into unknown-size ones (a Cluster), so bytes inside a payload are never read as an id: PCM can hold
    the EBML header's four bytes by chance (about 1% of 20-minute calls), a byte search would cut a fragment there.
    An element cut by a read boundary waits for its remaining bytes; the walk resumes where it stopped.
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
            raise FragmentError(f"a fragment is larger than {MAX_FRAGMENT_BYTES} bytes; the stream is not Connect's")
        return fragments

    def close(self) -> list[bytes]:
        """The stream ended: the rest is one last fragment of unknown size ending at an element boundary, or
        truncated (raises)."""
        rest = bytes(self._buffer)
        walk, self._buffer, self._walk = self._walk, bytearray(), None
        if not rest:
            return []
        if walk is not None and walk.at == len(rest):
            return [rest]
        raise FragmentError(f"the stream ended inside a fragment ({len(rest)} bytes of it arrived): truncated")

    def _complete_end(self) -> int | None:
        data = self._buffer
        if self._walk is None:
            header = _element_header(data, 0)
            if header is None:
                return None
            eid, size, payload_at = header
            if eid != _EBML_ID or size is None:
                raise FragmentError(f"a fragment must start with an EBML header, found element id 0x{eid:x}")
            segment_at = payload_at + size
            segment = _element_header(data, segment_at)
            if segment is None:
                return None
            sid, ssize, spayload_at = segment
            if sid != _SEGMENT_ID:
                raise FragmentError(f"an EBML header must be followed by a Segment, found element id 0x{sid:x}")
            if ssize is not None:
                end = spayload_at + ssize
                return end if len(data) >= end else None
            self._walk = _Walk(at=spayload_at, open=[_SEGMENT_ID])
        return self._walk.advance(data)


@dataclass
class _Walk:
    """Element-by-element walk through an unknown-size Segment: ``at`` is the next element's offset, ``open`` the
    unknown-size masters it may still belong to (Segment, then perhaps a Cluster)."""

    at: int
    open: list[int]

    def advance(self, data: bytes | bytearray) -> int | None:
        """The Segment's end (the offset of the element after it), or None until more bytes arrive."""
        while (header := _element_header(data, self.at)) is not None:
            eid, size, payload_at = header
            while self.open and not _may_contain(self.open[-1], eid):
                self.open.pop()  # an element that cannot be its child ends an unknown-size master (RFC 8794 6.2)
            if not self.open:
                if eid != _EBML_ID:
                    raise FragmentError(f"element id 0x{eid:x} at byte {self.at} follows a Segment of unknown "
                                        "size; only the next fragment's EBML header may")
                return self.at
            if size is None:
                if eid not in _UNKNOWN_SIZE_ALLOWED:
                    raise FragmentError(f"element id 0x{eid:x} at byte {self.at} has an unknown size; Matroska "
                                        "allows that for Segment and Cluster only (RFC 9559)")
                self.open.append(eid)
                self.at = payload_at
            else:
                self.at = payload_at + size  # skipped whole: its payload is never read as ids
        return None


_UNKNOWN_SIZE_ALLOWED = {_SEGMENT_ID, SCHEMA["Cluster"].id}
_GLOBAL_IDS = set(SCHEMA.globals)
"""EBML's global elements (Void, CRC-32, SignatureSlot): valid in any master, so they never end one."""


def _may_contain(parent: int, eid: int) -> bool:
    """Whether ``eid`` can be a child of the master ``parent`` (ebmlite's Matroska schema). An id the schema does not
    know is kept inside (EBML readers skip unknown elements; only a known element ends an unknown-size master)."""
    if eid in _GLOBAL_IDS:
        return True
    if eid not in SCHEMA.elements:
        return True
    return eid in SCHEMA.elements[parent].children


def _element_header(data: bytes | bytearray, at: int) -> tuple[int, int | None, int] | None:
    """(id, size or None for unknown, payload offset) of the element at ``at``, or None if not all there yet."""
    if len(data) - at < 2:
        return None
    stream = io.BytesIO(bytes(data[at:at + 12]))
    try:
        eid, id_length = decoding.readElementID(stream)
        size, size_length = decoding.readElementSize(stream)
    except (IOError, TypeError, IndexError, ValueError):
        if len(data) - at >= 12:
            raise FragmentError(f"a malformed element header at byte {at}") from None
        return None
    if at + id_length + size_length > len(data):
        return None
    return eid, size, at + id_length + size_length


def parse_fragment(data: bytes) -> Fragment:
    """Parse one fragment (bytes from :class:`FragmentFramer`).

    Raises:
        FragmentError: malformed, or a track that is not one of Connect's two 8 kHz 16-bit mono PCM tracks.
    """
    try:
        document = SCHEMA.loads(data)
        segment = next((element for element in document if element.name == "Segment"), None)
        if segment is None:
            raise FragmentError("the fragment holds no Segment")
        return _parse_segment(segment)
    except FragmentError:
        raise
    except Exception as error:  # ebmlite raises IOError/TypeError/ValueError/KeyError on broken input
        raise FragmentError(f"the fragment could not be parsed ({type(error).__name__}: {error})") from error


def _parse_segment(segment) -> Fragment:
    tags: dict[str, str] = {}
    tracks_by_number: dict[int, Track] = {}
    timecode_scale = DEFAULT_TIMECODE_SCALE_NS
    blocks: list[tuple[int, float, bytes]] = []
    cluster_timecode = 0
    for element in segment:
        if element.name == "Info":
            for child in element:
                if child.name == "TimecodeScale":
                    timecode_scale = child.value
        elif element.name == "Tracks":
            for entry in element:
                if entry.name == "TrackEntry":
                    track = _parse_track(entry)
                    tracks_by_number[track.number] = track
        elif element.name == "Tags":
            for tag in element:
                if tag.name != "Tag":
                    continue  # CRC-32 and Void may lead any master element (libavformat writes CRC-32s)
                for simple in tag:
                    if simple.name == "SimpleTag":
                        values = {child.name: child.value for child in simple}
                        if "TagName" in values:
                            name = str(values["TagName"])
                            tags[_KNOWN_TAGS.get(name.upper(), name)] = str(values.get("TagString", ""))
        elif element.name == "Cluster":
            for child in element:
                if child.name == "Timecode":
                    cluster_timecode = child.value
                elif child.name == "SimpleBlock":
                    blocks.append(_parse_block(child.value))
                elif child.name == "BlockGroup":
                    for part in child:
                        if part.name == "Block":
                            blocks.append(_parse_block(part.value))
    fragment = Fragment(tags=tags, tracks={}, timecode_ms=cluster_timecode * timecode_scale / 1e6)
    if not blocks:
        return fragment
    names = {}
    for number, track in tracks_by_number.items():
        if track.name not in CONNECT_TRACKS:
            raise FragmentError(f"the fragment has a track named {track.name!r}; Connect's tracks are "
                                f"{' and '.join(CONNECT_TRACKS)}")
        if (track.codec_id != PCM_CODEC_ID or track.bit_depth != PCM_BIT_DEPTH or track.channels != 1
                or track.sample_rate_hz != CONNECT_SAMPLE_RATE_HZ):
            raise FragmentError(
                f"track {track.name} is {track.codec_id} {track.bit_depth}-bit {track.channels} channel(s) at "
                f"{track.sample_rate_hz:g} Hz; Connect sends {PCM_CODEC_ID} {PCM_BIT_DEPTH}-bit mono at "
                f"{CONNECT_SAMPLE_RATE_HZ} Hz")
        names[number] = track.name
        fragment.tracks[track.name] = track
    audio: dict[str, bytearray] = {name: bytearray() for name in names.values()}
    for number, _timecode, payload in blocks:
        if number not in names:
            raise FragmentError(f"a block is on track {number}, which the fragment's Tracks do not declare")
        if len(payload) % 2:
            raise FragmentError(f"a block on track {names[number]} holds {len(payload)} bytes, not whole 16-bit "
                                "samples: truncated")
        audio[names[number]] += payload
    fragment.audio = {name: bytes(pcm) for name, pcm in audio.items()}
    return fragment


def _parse_track(entry) -> Track:
    values = {child.name: child for child in entry}
    audio = {child.name: child.value for child in values["Audio"]} if "Audio" in values else {}
    if "TrackNumber" not in values:
        raise FragmentError("a TrackEntry has no TrackNumber")
    return Track(
        number=values["TrackNumber"].value,
        name=str(values["Name"].value) if "Name" in values else "",
        codec_id=str(values["CodecID"].value) if "CodecID" in values else "",
        sample_rate_hz=float(audio.get("SamplingFrequency", 8000.0)),
        channels=int(audio.get("Channels", 1)),
        bit_depth=int(audio.get("BitDepth", 0)),
    )


def _parse_block(raw: bytes) -> tuple[int, float, bytes]:
    """(track number, relative timecode, payload) of a SimpleBlock/Block (Matroska spec, "Block structure")."""
    raw = bytes(raw)
    if not raw:
        raise FragmentError("an empty block")
    length, _mask = decoding.decodeIntLength(raw[0])
    if len(raw) < length + 3:
        raise FragmentError("a block shorter than its header: truncated")
    number = int.from_bytes(raw[:length], "big") & ((1 << (7 * length)) - 1)
    timecode = int.from_bytes(raw[length:length + 2], "big", signed=True)
    flags = raw[length + 2]
    if flags & _LACING_MASK:
        raise FragmentError("a laced block; Connect's PCM blocks are not laced")
    return number, timecode, raw[length + 3:]


# ---- writing (the local stand-in and the tests) -------------------------------------------------------------------
def append_tags(document: bytes, tags: dict[str, str], *, unknown_size: bool = False) -> bytes:
    """``document`` (one Matroska document: EBML header, Segment) with a ``Tags`` element of ``tags`` appended to its
    Segment, as GetMedia appends its own tags to each fragment a producer wrote. The Segment is rewritten with its
    new size, or EBML's unknown size with ``unknown_size``; elements before it keep their offsets (SeekHead, Cues).

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
    payload = document[segment[2]:segment[2] + segment[1]]
    payload += bytes(SCHEMA["Tags"].encode({"Tag": [{"Targets": {}, "SimpleTag": [
        {"TagName": name, "TagString": value} for name, value in tags.items()]}]}))
    # An unknown size is 8 bytes of all ones after the 0x01 marker; a known one is written in 8 bytes too, so that
    # the Segment's payload keeps its offset from the document's start either way.
    size = b"\x01\xff\xff\xff\xff\xff\xff\xff" if unknown_size else encoding.encodeSize(len(payload), 8)
    return document[:segment_at] + encoding.encodeId(_SEGMENT_ID) + size + payload


def track_uid(number: int) -> int:
    return 1000 + number


def encode_fragment(*, tags: dict[str, str], audio: dict[str, bytes], timecode_ms: int,
                    tracks: tuple[str, ...] = CONNECT_TRACKS, codec_id: str = PCM_CODEC_ID,
                    unknown_size: bool = False) -> bytes:
    """A fragment as GetMedia returns it: EBML header, Segment (Info, Tracks, Tags, Cluster of SimpleBlocks).

    ``audio`` maps track names to PCM16 at 8 kHz; ``tags`` are written as fragment-level SimpleTags. With
    ``unknown_size`` the Segment has EBML's unknown size (the framer then ends it at the next EBML header).
    """
    # ebmlite encodes a master from a dict; a list value is that many elements (TrackEntry, SimpleTag, SimpleBlock).
    entries = [{"TrackNumber": number, "TrackUID": track_uid(number), "TrackType": 2, "Name": name,
                "CodecID": codec_id,
                "Audio": {"SamplingFrequency": float(CONNECT_SAMPLE_RATE_HZ), "Channels": 1,
                          "BitDepth": PCM_BIT_DEPTH}}
               for number, name in enumerate(tracks, start=1)]
    blocks = []
    for number, name in enumerate(tracks, start=1):
        pcm = audio.get(name, b"")
        if pcm:
            header = encoding.encodeSize(number, 1) + (0).to_bytes(2, "big", signed=True) + bytes([0x80])
            blocks.append(header + pcm)
    simple_tags = [{"TagName": name, "TagString": value} for name, value in tags.items()]
    body = SCHEMA["Info"].encode({"TimecodeScale": DEFAULT_TIMECODE_SCALE_NS})
    body += SCHEMA["Tracks"].encode({"TrackEntry": entries})
    body += SCHEMA["Tags"].encode({"Tag": [{"Targets": {}, "SimpleTag": simple_tags}]})
    cluster = {"Timecode": int(timecode_ms)}
    if blocks:
        cluster["SimpleBlock"] = blocks
    body += SCHEMA["Cluster"].encode(cluster)
    header = SCHEMA["EBML"].encode({"EBMLVersion": 1, "EBMLReadVersion": 1, "DocType": "matroska",
                                    "DocTypeVersion": 4, "DocTypeReadVersion": 2})
    segment_id = encoding.encodeId(_SEGMENT_ID)
    size = b"\x01\xff\xff\xff\xff\xff\xff\xff" if unknown_size else encoding.encodeSize(len(body))
    return bytes(header) + segment_id + size + bytes(body)
