"""connect_consumer.mkv: framing a live byte stream of Kinesis Video Streams' Matroska fragments
(known and unknown Segment sizes, any piece sizes, the EBML header's id inside audio), the bounds
the framer holds, and what a fragment's tags say (GetMedia's in-band errors)."""

from __future__ import annotations

import numpy as np
import pytest
from ebmlite import encoding
from hypothesis import given, settings, strategies as st

from connect_consumer import mkv
from connect_consumer.mkv_parser import parse_fragment
from connect_consumer.mkv_writer import append_tags, encode_fragment
from voice_devtools import fake_kvs

PCM = (np.arange(1600) % 200 - 100).astype("<i2").tobytes()  # 0.1 s at 8 kHz


def fragment(number: int, unknown_size: bool = False, **options) -> bytes:
    options.setdefault("audio", {mkv.TRACK_FROM_CUSTOMER: PCM, mkv.TRACK_TO_CUSTOMER: PCM[::-1]})
    return encode_fragment(
        tags={mkv.TAG_CONTACT_ID: "c-1", mkv.TAG_FRAGMENT_NUMBER: str(number)},
        timecode_ms=number * 100,
        unknown_size=unknown_size,
        **options,
    )


@settings(max_examples=30, deadline=None)
@given(st.lists(st.booleans(), min_size=1, max_size=5), st.integers(min_value=1, max_value=5000))
def test_any_mix_of_sizes_in_any_pieces_frames_into_the_same_fragments(unknown, piece):
    fragments = [fragment(i, u) for i, u in enumerate(unknown)]
    stream = b"".join(fragments)
    framer = mkv.FragmentFramer()
    out = [
        f for at in range(0, len(stream), piece) for f in framer.feed(stream[at : at + piece])
    ] + framer.close()
    assert out == fragments
    parsed = [parse_fragment(f) for f in out]
    assert [p.number for p in parsed] == [str(i) for i in range(len(unknown))]
    assert all(
        p.audio == {mkv.TRACK_FROM_CUSTOMER: PCM, mkv.TRACK_TO_CUSTOMER: PCM[::-1]} for p in parsed
    )
    assert all(p.contact_id == "c-1" for p in parsed)


def test_getmedia_error_tags_are_reported():
    data = encode_fragment(
        tags={mkv.TAG_ERROR_CODE: "Requested fragment is not found", mkv.TAG_ERROR_ID: "4000"},
        audio={},
        timecode_ms=0,
    )
    assert parse_fragment(data).error == "4000 Requested fragment is not found"


@pytest.mark.parametrize(
    "data, expected",
    [
        (b"\x1f\x43\xb6\x75\x80" + b"\x00" * 20, "must start with an EBML header"),
    ],
)
def test_a_stream_that_is_not_fragments_is_refused(data, expected):
    with pytest.raises(mkv.FragmentError, match=expected):
        mkv.FragmentFramer().feed(data)


EBML_HEADER_ID = encoding.encodeId(mkv.EBML_ID)  # b"\x1a\x45\xdf\xa3"


def _pcm_holding_the_ebml_header_id(seconds: float, at_sample: int) -> bytes:
    """PCM16 speech-like noise whose bytes hold the EBML header's id at byte ``2 * at_sample``
    (samples 0x451a and 0xa3df little-endian), as real audio does by chance."""
    samples = np.random.default_rng(7).integers(
        -3000, 3000, int(seconds * mkv.CONNECT_SAMPLE_RATE_HZ), dtype="<i2"
    )
    pcm = bytearray(samples.tobytes())
    pcm[2 * at_sample : 2 * at_sample + 4] = EBML_HEADER_ID
    return bytes(pcm)


@pytest.fixture(scope="module")
def fragments_with_the_ebml_id_in_their_audio() -> list[bytes]:
    """Three fragments as the KVS stand-in writes them (libavformat's muxer, GetMedia's tags
    appended), their Segments of unknown size, each track's SimpleBlock holding the EBML header's id
    inside its audio."""
    from voice_devtools.fake_kvs import mux_fragment

    documents = []
    for index in range(3):
        audio = {
            mkv.TRACK_FROM_CUSTOMER: _pcm_holding_the_ebml_header_id(1.0, 101 + index),
            mkv.TRACK_TO_CUSTOMER: _pcm_holding_the_ebml_header_id(1.0, 3001 + index),
        }
        muxed = mux_fragment(
            {mkv.TAG_CONTACT_ID: "c-1"},
            audio,
            mkv.CONNECT_TRACKS,
            "pcm_s16le",
            start_sample=index * 8000,
        )
        document = append_tags(
            muxed, {mkv.TAG_FRAGMENT_NUMBER: str(100 + index)}, unknown_size=True
        )
        assert (
            document.count(EBML_HEADER_ID) == 3
        )  # the fragment's own header and one inside each track's audio
        documents.append(document)
    return documents


def test_the_ebml_header_id_inside_pcm_does_not_end_an_unknown_size_segment(
    fragments_with_the_ebml_id_in_their_audio,
):
    documents = fragments_with_the_ebml_id_in_their_audio
    framer = mkv.FragmentFramer()
    out = framer.feed(b"".join(documents)) + framer.close()
    assert out == documents
    parsed = [parse_fragment(f) for f in out]
    assert [p.number for p in parsed] == ["100", "101", "102"]
    assert [
        p.audio[mkv.TRACK_FROM_CUSTOMER][202 + 2 * i : 206 + 2 * i] for i, p in enumerate(parsed)
    ] == [EBML_HEADER_ID] * 3


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_any_chunking_of_the_stream_gives_the_same_fragments(
    fragments_with_the_ebml_id_in_their_audio, data
):
    """GetMedia's chunks end anywhere: inside an element's id, its size, or its payload. Cut points
    drawn at will (ones inside the fourteen bytes after each element boundary drawn often) give the
    same fragments."""
    documents = fragments_with_the_ebml_id_in_their_audio
    stream = b"".join(documents)
    cuts = sorted(
        set(data.draw(st.lists(st.integers(min_value=1, max_value=len(stream) - 1), max_size=40)))
    )
    framer = mkv.FragmentFramer()
    out = []
    for start, end in zip([0, *cuts], [*cuts, len(stream)], strict=True):
        out += framer.feed(stream[start:end])
    assert out + framer.close() == documents


def _with_unknown_size_cluster(document: bytes) -> bytes:
    """``document`` (an unknown-size Segment) with its Cluster's size rewritten in place as EBML's
    unknown size of the same length (all value bits set)."""
    header = mkv.element_header(document, 0)
    segment = mkv.element_header(document, header[2] + header[1])
    at = segment[2]
    while (child := mkv.element_header(document, at))[0] != mkv.SCHEMA["Cluster"].id:
        at = child[2] + child[1]
    id_length = len(encoding.encodeId(child[0]))
    size_length = child[2] - at - id_length
    marker = (2 << (8 - size_length)) - 1
    size_at = at + id_length
    return (
        document[:size_at]
        + bytes([marker])
        + b"\xff" * (size_length - 1)
        + document[size_at + size_length :]
    )


def test_an_unknown_size_cluster_ends_at_the_next_element_it_cannot_hold(
    fragments_with_the_ebml_id_in_their_audio,
):
    """Producers may write Clusters of unknown size too: the Cluster ends at the Tags GetMedia
    appends (not a Cluster child), the Segment at the next EBML header; the audio's EBML id still
    ends neither."""
    documents = [_with_unknown_size_cluster(d) for d in fragments_with_the_ebml_id_in_their_audio]
    stream = b"".join(documents)
    framer = mkv.FragmentFramer()
    out = [
        f for at in range(0, len(stream), 501) for f in framer.feed(stream[at : at + 501])
    ] + framer.close()
    assert out == documents


def test_a_stream_cut_inside_an_element_of_an_unknown_size_segment_is_truncated(
    fragments_with_the_ebml_id_in_their_audio,
):
    document = fragments_with_the_ebml_id_in_their_audio[0]
    framer = mkv.FragmentFramer()
    assert framer.feed(document[:-3]) == []
    with pytest.raises(mkv.FragmentError, match="truncated"):
        framer.close()


def test_a_fragment_over_the_byte_bound_is_refused_before_it_is_buffered_whole():
    huge = encode_fragment(
        tags={},
        audio={mkv.TRACK_FROM_CUSTOMER: bytes(mkv.MAX_FRAGMENT_BYTES)},
        timecode_ms=0,
        unknown_size=True,
    )
    framer = mkv.FragmentFramer()
    with pytest.raises(mkv.FragmentError, match=f"larger than {mkv.MAX_FRAGMENT_BYTES} bytes"):
        for at in range(0, len(huge), 65536):
            framer.feed(huge[at : at + 65536])


def test_getmedia_error_chunks_are_returned_by_code():
    assert parse_fragment(fake_kvs.error_chunk(5000, "Internal error")).error_code == 5000
    assert 5000 in mkv.TRANSIENT_ERROR_CODES and 4500 not in mkv.TRANSIENT_ERROR_CODES
    assert parse_fragment(fake_kvs.error_chunk(4501, "x")).error == "4501 x"
