"""connect_consumer.mkv_writer: fragments written as GetMedia returns them, and GetMedia's tags
appended to a document another muxer wrote, each read back by the consumer's own framer and
parser."""

from __future__ import annotations

import numpy as np
import pytest
from ebmlite import encoding

from connect_consumer import mkv
from connect_consumer.mkv_parser import parse_fragment
from connect_consumer.mkv_writer import append_tags, encode_fragment, track_uid

PCM = (np.arange(1600) % 200 - 100).astype("<i2").tobytes()  # 0.1 s at 8 kHz
UNKNOWN_SIZE = b"\x01\xff\xff\xff\xff\xff\xff\xff"


def segment_size_bytes(document: bytes) -> bytes:
    """The bytes of the Segment's size field."""
    header = mkv.element_header(document, 0)
    segment_at = header[2] + header[1]
    id_length = len(encoding.encodeId(mkv.SEGMENT_ID))
    return document[segment_at + id_length : mkv.element_header(document, segment_at)[2]]


@pytest.mark.parametrize("unknown_size", [False, True])
def test_an_encoded_fragment_reads_back_whole(unknown_size):
    data = encode_fragment(
        tags={mkv.TAG_CONTACT_ID: "c-1", mkv.TAG_FRAGMENT_NUMBER: "42"},
        audio={mkv.TRACK_FROM_CUSTOMER: PCM, mkv.TRACK_TO_CUSTOMER: PCM[::-1]},
        timecode_ms=1024,
        unknown_size=unknown_size,
    )
    assert (segment_size_bytes(data) == UNKNOWN_SIZE) is unknown_size
    framer = mkv.FragmentFramer()
    (framed,) = framer.feed(data) + framer.close()
    fragment = parse_fragment(framed)
    assert (fragment.number, fragment.contact_id, fragment.timecode_ms) == ("42", "c-1", 1024.0)
    assert fragment.audio == {mkv.TRACK_FROM_CUSTOMER: PCM, mkv.TRACK_TO_CUSTOMER: PCM[::-1]}
    assert {name: track.number for name, track in fragment.tracks.items()} == {
        mkv.TRACK_FROM_CUSTOMER: 1,
        mkv.TRACK_TO_CUSTOMER: 2,
    }
    assert {track.codec_id for track in fragment.tracks.values()} == {mkv.PCM_CODEC_ID}


def test_each_track_gets_its_uid_and_a_silent_track_no_block():
    data = encode_fragment(tags={}, audio={mkv.TRACK_TO_CUSTOMER: PCM}, timecode_ms=0)
    assert (track_uid(1), track_uid(2)) == (1001, 1002)
    for number in (1, 2):
        assert bytes(mkv.SCHEMA["TrackUID"].encode(track_uid(number))) in data
    assert parse_fragment(data).audio == {mkv.TRACK_FROM_CUSTOMER: b"", mkv.TRACK_TO_CUSTOMER: PCM}


def test_appended_tags_join_the_documents_own_and_leave_what_precedes_the_segment():
    document = encode_fragment(
        tags={mkv.TAG_CONTACT_ID: "c-1"}, audio={mkv.TRACK_FROM_CUSTOMER: PCM}, timecode_ms=0
    )
    known = append_tags(document, {mkv.TAG_FRAGMENT_NUMBER: "7"})
    unknown = append_tags(document, {mkv.TAG_FRAGMENT_NUMBER: "7"}, unknown_size=True)
    header = mkv.element_header(document, 0)
    segment_at = header[2] + header[1]
    assert known[:segment_at] == unknown[:segment_at] == document[:segment_at]
    assert segment_size_bytes(unknown) == UNKNOWN_SIZE
    assert len(segment_size_bytes(known)) == 8  # the payload starts at the same offset in both
    assert known.replace(segment_size_bytes(known), UNKNOWN_SIZE, 1) == unknown
    for data in (known, unknown):
        fragment = parse_fragment(data)
        assert (fragment.contact_id, fragment.number) == ("c-1", "7")
        assert fragment.audio[mkv.TRACK_FROM_CUSTOMER] == PCM


@pytest.mark.parametrize(
    "document, message",
    [
        (b"\x1f\x43\xb6\x75\x80" + bytes(20), "not a Matroska document"),
        (
            encode_fragment(tags={}, audio={}, timecode_ms=0, unknown_size=True),
            "the document's Segment is missing or of unknown size",
        ),
    ],
)
def test_tags_are_appended_only_to_a_matroska_document_of_known_size(document, message):
    with pytest.raises(mkv.FragmentError, match=message):
        append_tags(document, {mkv.TAG_FRAGMENT_NUMBER: "1"})
