"""One Kinesis Video Streams fragment as Amazon Connect writes it (the bytes of one from
:class:`~connect_consumer.mkv.FragmentFramer`) read into a :class:`~connect_consumer.mkv.Fragment`:
its tags, and each Connect track's PCM16 (:func:`parse_fragment`).

The reader walks element headers with ebmlite's decoder under the bounds of
:mod:`connect_consumer.mkv`, descends only into the masters it needs, and reads the few elements it
uses itself (ebmlite's document reader has no bound on the elements it builds, and no ``Block``).
"""

from __future__ import annotations

import struct

from ebmlite import decoding

from connect_consumer.mkv import (
    CLUSTER_ID,
    CONNECT_CODEC_ID,
    CONNECT_MIME_TYPE,
    CONNECT_SAMPLE_RATE_HZ,
    CONNECT_TRACKS,
    DEFAULT_TIMECODE_SCALE_NS,
    EBML_ID,
    LEGACY_TRACK_NAMES,
    MAX_BLOCKS,
    MAX_ELEMENTS,
    MAX_FRAGMENT_BYTES,
    MAX_TAGS,
    MAX_TEXT_CHARS,
    MAX_TRACKS,
    PCM_BIT_DEPTH,
    PCM_CODEC_ID,
    SCHEMA,
    SEGMENT_ID,
    TAG_CONTACT_ID,
    TAG_CONTINUATION_TOKEN,
    TAG_ERROR_CODE,
    TAG_ERROR_ID,
    TAG_FRAGMENT_NUMBER,
    TAG_INSTANCE_ID,
    TAG_MILLIS_BEHIND_NOW,
    TAG_MIME_TYPE,
    TAG_PRODUCER_TIMESTAMP,
    TAG_SERVER_TIMESTAMP,
    TAG_STOP_STREAMING,
    Fragment,
    FragmentError,
    Track,
    cut,
    element_header,
    may_contain,
)

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

_BLOCK_ID = 0xA1
"""BlockGroup's ``Block`` (RFC 9559, "Block element"; ebmlite's schema lacks it)."""
_LACING_MASK = 0x06
_TRACK_TYPE_AUDIO, _TRACK_TYPE_VIDEO = 2, 1


def parse_fragment(data: bytes) -> Fragment:
    """Parse one fragment (bytes from :class:`~connect_consumer.mkv.FragmentFramer`), within the
    bounds of :mod:`connect_consumer.mkv`.

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
        header = element_header(data, 0)
        if header is None or header[0] != EBML_ID or header[1] is None:
            raise FragmentError("a fragment must start with an EBML header")
        segment = element_header(data, header[2] + header[1])
        if segment is None or segment[0] != SEGMENT_ID:
            raise FragmentError("an EBML header must be followed by a Segment")
        end = len(data) if segment[1] is None else segment[2] + segment[1]
        if end > len(data):
            raise FragmentError(
                f"the Segment needs {end} bytes, the fragment has {len(data)}: truncated"
            )
        # (id, end, unknown size) of the masters the walk is in: an unknown-size one (a Cluster)
        # ends at the first element it cannot hold (RFC 8794 section 6.2), a known-size one at its
        # end.
        stack: list[tuple[int, int, bool]] = [(SEGMENT_ID, end, segment[1] is None)]
        at = segment[2]
        while True:
            while len(stack) > 1 and at >= stack[-1][1]:
                self._leave(stack.pop()[0])
            if at >= end:
                break
            header = element_header(data, at)
            if header is None:
                raise FragmentError(
                    f"the fragment ends inside an element header at byte {at}: truncated"
                )
            eid, size, payload = header
            while len(stack) > 1 and stack[-1][2] and not may_contain(stack[-1][0], eid):
                self._leave(stack.pop()[0])
            self.elements += 1
            if self.elements > MAX_ELEMENTS:
                raise FragmentError(
                    f"a fragment of more than {MAX_ELEMENTS} elements (a real one has ~150)"
                )
            if size is None:
                if eid != CLUSTER_ID:
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
            CLUSTER_ID,
            SCHEMA["BlockGroup"].id,
        ):
            if eid == _BLOCK_ID and parent == CLUSTER_ID:
                # a Block belongs in a BlockGroup: not audio of a track (skipped, as any unknown
                # element)
                return
            if len(self.blocks) >= MAX_BLOCKS:
                raise FragmentError(
                    f"a fragment of more than {MAX_BLOCKS} blocks (a real one has 32)"
                )
            self.blocks.append(_block(data, start, end))
        elif parent == CLUSTER_ID and eid == _ID["Timecode"]:
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
