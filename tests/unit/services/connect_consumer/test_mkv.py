"""Kinesis Video Streams' Matroska fragments: framing a live byte stream (known and unknown Segment
sizes, any piece sizes), parsing both named tracks and the tags, and clear errors for what Connect
never sends."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from connect_consumer import mkv

PCM = (np.arange(1600) % 200 - 100).astype("<i2").tobytes()  # 0.1 s at 8 kHz


def fragment(number: int, unknown_size: bool = False, **options) -> bytes:
    options.setdefault("audio", {mkv.TRACK_FROM_CUSTOMER: PCM, mkv.TRACK_TO_CUSTOMER: PCM[::-1]})
    return mkv.encode_fragment(
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
    parsed = [mkv.parse_fragment(f) for f in out]
    assert [p.number for p in parsed] == [str(i) for i in range(len(unknown))]
    assert all(
        p.audio == {mkv.TRACK_FROM_CUSTOMER: PCM, mkv.TRACK_TO_CUSTOMER: PCM[::-1]} for p in parsed
    )
    assert all(p.contact_id == "c-1" for p in parsed)


def test_getmedia_error_tags_are_reported():
    data = mkv.encode_fragment(
        tags={mkv.TAG_ERROR_CODE: "Requested fragment is not found", mkv.TAG_ERROR_ID: "4000"},
        audio={},
        timecode_ms=0,
    )
    assert mkv.parse_fragment(data).error == "4000 Requested fragment is not found"


@pytest.mark.parametrize(
    "data, expected",
    [
        (b"\x1f\x43\xb6\x75\x80" + b"\x00" * 20, "must start with an EBML header"),
    ],
)
def test_a_stream_that_is_not_fragments_is_refused(data, expected):
    with pytest.raises(mkv.FragmentError, match=expected):
        mkv.FragmentFramer().feed(data)


def test_a_laced_or_odd_sized_block_is_refused_naming_it():
    laced = bytearray(fragment(1))
    header = mkv.encoding.encodeSize(1, 1) + b"\x00\x00\x80"
    at = bytes(laced).index(header)
    laced[at + 3] = 0x82  # Xiph lacing
    with pytest.raises(mkv.FragmentError, match="laced block"):
        mkv.parse_fragment(bytes(laced))
    odd = fragment(2, audio={mkv.TRACK_FROM_CUSTOMER: PCM[:-1]})
    with pytest.raises(mkv.FragmentError, match="not whole 16-bit samples"):
        mkv.parse_fragment(odd)


def test_the_parser_reads_what_libavformats_muxer_writes_with_the_tags_getmedia_appends():
    """The stand-in's producer fragments come from libavformat (PyAV), not from ebmlite: CRC-32
    elements in the masters, SeekHead, Cues, upper-case tag names (CONTACTID); GetMedia's tags
    appended to the Segment, of known and unknown size, framed from pieces of any size."""
    from voice_devtools.fake_kvs import mux_fragment

    left, right = PCM * 20, PCM[::-1] * 20  # 2 s each
    documents = []
    for index in range(4):
        muxed = mux_fragment(
            {mkv.TAG_CONTACT_ID: "c-1"},
            {mkv.TRACK_FROM_CUSTOMER: left, mkv.TRACK_TO_CUSTOMER: right},
            mkv.CONNECT_TRACKS,
            "pcm_s16le",
            start_sample=index * 16000,
        )
        assert (
            b"CONTACTID" in muxed and b"Lavf" in muxed
        )  # written by libavformat, its tag convention
        documents.append(
            mkv.append_tags(
                muxed, {mkv.TAG_FRAGMENT_NUMBER: str(100 + index)}, unknown_size=index % 2 == 1
            )
        )
    stream = b"".join(documents)
    framer = mkv.FragmentFramer()
    out = [
        f for at in range(0, len(stream), 777) for f in framer.feed(stream[at : at + 777])
    ] + framer.close()
    assert out == documents
    parsed = [mkv.parse_fragment(f) for f in out]
    assert [(p.number, p.contact_id, p.timecode_ms) for p in parsed] == [
        (str(100 + i), "c-1", i * 2000.0) for i in range(4)
    ]
    assert all(
        p.audio == {mkv.TRACK_FROM_CUSTOMER: left, mkv.TRACK_TO_CUSTOMER: right} for p in parsed
    )
    assert {p.tracks[mkv.TRACK_FROM_CUSTOMER].codec_id for p in parsed} == {mkv.PCM_CODEC_ID}


EBML_HEADER_ID = mkv.encoding.encodeId(mkv._EBML_ID)  # b"\x1a\x45\xdf\xa3"


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
        document = mkv.append_tags(
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
    parsed = [mkv.parse_fragment(f) for f in out]
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
    header = mkv._element_header(document, 0)
    segment = mkv._element_header(document, header[2] + header[1])
    at = segment[2]
    while (child := mkv._element_header(document, at))[0] != mkv.SCHEMA["Cluster"].id:
        at = child[2] + child[1]
    id_length = len(mkv.encoding.encodeId(child[0]))
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


# ---- the real layouts (fixtures/README.md names the sources) -----------------------------------
from tests.unit.services.connect_consumer import connect_testkit as kit  # noqa: E402
from voice_devtools import fake_kvs  # noqa: E402


def frame(stream: bytes, piece: int = 1000) -> list[bytes]:
    framer = mkv.FragmentFramer()
    return [
        f for at in range(0, len(stream), piece) for f in framer.feed(stream[at : at + piece])
    ] + framer.close()


@pytest.mark.parametrize("name", sorted(kit.fixtures()))
def test_each_fixture_file_is_what_the_stand_in_writes_byte_for_byte(name):
    assert (kit.FIXTURES_DIR / name).read_bytes() == kit.fixtures()[name]


def test_the_stand_in_lays_a_fragment_out_at_the_offsets_of_the_real_dump():
    """sample-matroska.txt (citizensadvice): the same strings give the same offsets, element by
    element."""
    pcm = bytes(16 * fake_kvs.BLOCK_BYTES)
    data = fake_kvs.connect_fragment(
        tags={
            "ContactId": kit.FIXTURE_CONTACT,
            "InstanceId": fake_kvs.INSTANCE_ID,
            "MimeType": mkv.CONNECT_MIME_TYPE,
            "AUDIO_TO_CUSTOMER": "2",
            "AUDIO_FROM_CUSTOMER": "1",
        },
        service_before={
            mkv.TAG_FRAGMENT_NUMBER: "91343852333181551234925834077012571618243808844",
            mkv.TAG_SERVER_TIMESTAMP: "1782912654.706",
            mkv.TAG_PRODUCER_TIMESTAMP: "1782912654.536",
        },
        service_after={
            mkv.TAG_MILLIS_BEHIND_NOW: "131207",
            mkv.TAG_CONTINUATION_TOKEN: "91343852333181551234925834077012571618243808844",
        },
        audio={mkv.TRACK_TO_CUSTOMER: pcm, mkv.TRACK_FROM_CUSTOMER: pcm},
        order=(mkv.TRACK_TO_CUSTOMER, mkv.TRACK_FROM_CUSTOMER),
        timecode_ms=1782912654536,
    )
    dump = {
        0: "1a45dfa3",
        40: "18538067",
        52: "1549a966",
        177: "1654ae6b",
        185: "ae",
        239: "ae",
        295: "1254c367",
        392: "1254c367",
        490: "1254c367",
        581: "1254c367",
        651: "1254c367",
        723: "1254c367",
        966: "1f43b675",
        971: "e7",
        981: "a7",
        34168: "1254c367",
        34265: "1254c367",
        34363: "1254c367",
        34454: "1254c367",
        34524: "1254c367",
        34596: "1254c367",
    }
    dump.update({984 + 1037 * block: "a3" for block in range(32)})  # 32 SimpleBlocks of 1028 bytes
    assert {at: data[at : at + len(eid) // 2].hex() for at, eid in dump.items()} == dump
    assert len(data) == 34768
    assert (
        data[207 + 3 : 207 + 3 + 17] == b"AUDIO_TO_CUSTOMER" and data[227 + 2 : 227 + 7] == b"A_AAC"
    )


@pytest.mark.parametrize(
    "name, tracks",
    [
        ("connect_to_customer_first.mkv", mkv.CONNECT_TRACKS),
        ("connect_from_customer_first.mkv", mkv.CONNECT_TRACKS),
        ("connect_customer_only.mkv", (mkv.TRACK_FROM_CUSTOMER,)),
        ("connect_then_fragment_not_found.mkv", mkv.CONNECT_TRACKS),
    ],
)
def test_every_real_layout_gives_each_tracks_exact_pcm_the_contact_and_the_fragment_numbers(
    name, tracks
):
    fragments = [mkv.parse_fragment(data) for data in frame((kit.FIXTURES_DIR / name).read_bytes())]
    if name == "connect_then_fragment_not_found.mkv":
        error = fragments.pop()
        assert error.error_code == mkv.ERROR_FRAGMENT_NOT_FOUND and error.number is None
    call = kit.FakeCall("c", "s", b"", b"")
    assert [f.number for f in fragments] == [call.number(i) for i in range(kit.FIXTURE_FRAGMENTS)]
    assert [f.tags[mkv.TAG_CONTINUATION_TOKEN] for f in fragments] == [f.number for f in fragments]
    assert {f.contact_id for f in fragments} == {kit.FIXTURE_CONTACT}
    assert [f.timecode_ms for f in fragments] == [
        fake_kvs.FIRST_TIMECODE_MS + 1024 * i for i in range(3)
    ]
    customer, agent = kit.fixture_audio()
    expected = {mkv.TRACK_FROM_CUSTOMER: customer, mkv.TRACK_TO_CUSTOMER: agent}
    for track in mkv.CONNECT_TRACKS:
        got = b"".join(f.audio.get(track, b"") for f in fragments)
        assert got == (expected[track] if track in tracks else b""), track
    assert all(
        f.tracks[t].codec_id == "A_AAC" and not f.tracks[t].has_audio_element
        for f in fragments
        for t in tracks
    )


def test_a_video_payload_in_the_parser_librarys_layout_is_refused_naming_the_track():
    fragments = frame((kit.FIXTURES_DIR / "getmedia_video.mkv").read_bytes())
    assert len(fragments) == 2
    with pytest.raises(
        mkv.FragmentError,
        match=r"no track named .* \(track 1 \(unnamed\): video, V_MPEG4/ISO/AVC\)",
    ):
        mkv.parse_fragment(fragments[0])


def one(order, audio, **options) -> bytes:
    tags = {"ContactId": "c-1", "MimeType": options.pop("mime", mkv.CONNECT_MIME_TYPE)}
    return fake_kvs.connect_fragment(
        tags=tags,
        service_before={mkv.TAG_FRAGMENT_NUMBER: "7"},
        service_after={},
        audio=audio,
        order=order,
        timecode_ms=0,
        **options,
    )


def test_the_older_producers_track_is_the_customers_and_an_unknown_track_is_skipped_and_named():
    legacy = mkv.parse_fragment(one(("Track_audio/L16",), {"Track_audio/L16": PCM}))
    assert legacy.audio == {mkv.TRACK_FROM_CUSTOMER: PCM} and legacy.skipped == ()
    extra = mkv.parse_fragment(
        one(
            (mkv.TRACK_FROM_CUSTOMER, "AUDIO_THIRD_PARTY"),
            {mkv.TRACK_FROM_CUSTOMER: PCM, "AUDIO_THIRD_PARTY": PCM[::-1]},
        )
    )
    assert extra.audio == {mkv.TRACK_FROM_CUSTOMER: PCM}
    assert extra.skipped == ("AUDIO_THIRD_PARTY (track 2, A_AAC)",)


@pytest.mark.parametrize(
    "data, message",
    [
        (
            lambda: one(
                (mkv.TRACK_FROM_CUSTOMER,), {mkv.TRACK_FROM_CUSTOMER: PCM}, mime="audio/aac"
            ),
            "MimeType 'audio/aac'; the consumer reads Connect's "
            "'audio/L16;rate=8000;channels=1;' only",
        ),
        (
            lambda: one(
                (mkv.TRACK_FROM_CUSTOMER,),
                {mkv.TRACK_FROM_CUSTOMER: PCM},
                mime="audio/L16;rate=16000;channels=1",
            ),
            "MimeType 'audio/L16;rate=16000;channels=1'",
        ),
        (
            lambda: mkv.encode_fragment(
                tags={}, audio={mkv.TRACK_FROM_CUSTOMER: PCM}, timecode_ms=0, codec_id="A_AAC"
            ),
            "track AUDIO_FROM_CUSTOMER is AAC \\(A_AAC with an Audio element: 8000 Hz, 1 channel",
        ),
        (
            lambda: mkv.encode_fragment(
                tags={}, audio={mkv.TRACK_FROM_CUSTOMER: PCM}, timecode_ms=0, codec_id="A_OPUS"
            ),
            "track AUDIO_FROM_CUSTOMER is A_OPUS 16-bit 1 channel",
        ),
    ],
)
def test_a_real_aac_or_other_encoding_is_refused_saying_what_connect_sends(data, message):
    with pytest.raises(mkv.FragmentError, match=message):
        mkv.parse_fragment(data())


def test_mime_type_parameter_names_are_case_insensitive():
    data = one(
        (mkv.TRACK_FROM_CUSTOMER,),
        {mkv.TRACK_FROM_CUSTOMER: PCM},
        mime="audio/L16; Rate=8000; CHANNELS=1",
    )
    assert mkv.parse_fragment(data).audio == {mkv.TRACK_FROM_CUSTOMER: PCM}


def test_connects_a_aac_label_without_a_mime_type_tag_is_read_as_its_pcm():
    data = fake_kvs.connect_fragment(
        tags={"ContactId": "c-1"},
        service_before={},
        service_after={},
        audio={mkv.TRACK_TO_CUSTOMER: PCM},
        order=(mkv.TRACK_TO_CUSTOMER,),
        timecode_ms=0,
    )
    assert mkv.parse_fragment(data).audio == {mkv.TRACK_TO_CUSTOMER: PCM}


def test_a_block_group_is_read_not_lost():
    data = one((mkv.TRACK_FROM_CUSTOMER,), {mkv.TRACK_FROM_CUSTOMER: PCM[:1024]})
    at = data.index(bytes.fromhex("a3") + mkv.encoding.encodeSize(1028, 8))
    block = data[at + 9 : at + 9 + 1028]
    group = (
        bytes.fromhex("a0")
        + mkv.encoding.encodeSize(1028 + 3, 1 + 1)
        + bytes.fromhex("a1")
        + mkv.encoding.encodeSize(1028, 2)
        + block
    )
    assert mkv.parse_fragment(data[:at] + group + data[at + 9 + 1028 :]).audio == {
        mkv.TRACK_FROM_CUSTOMER: PCM[:1024]
    }


def test_getmedia_error_chunks_are_returned_by_code():
    assert mkv.parse_fragment(fake_kvs.error_chunk(5000, "Internal error")).error_code == 5000
    assert 5000 in mkv.TRANSIENT_ERROR_CODES and 4500 not in mkv.TRANSIENT_ERROR_CODES
    assert mkv.parse_fragment(fake_kvs.error_chunk(4501, "x")).error == "4501 x"


def _with_cluster_children(children: bytes) -> bytes:
    data = one((mkv.TRACK_FROM_CUSTOMER,), {mkv.TRACK_FROM_CUSTOMER: b""})
    at = data.index(bytes.fromhex("1f43b675ff"))
    return data[: at + 5] + children + data[at + 5 :]


@pytest.mark.parametrize(
    "children, message",
    [
        (
            bytes.fromhex("a3858100008000") * (mkv.MAX_BLOCKS + 1),
            f"more than {mkv.MAX_BLOCKS} blocks",
        ),
        (bytes.fromhex("ec80") * (mkv.MAX_ELEMENTS + 1), f"more than {mkv.MAX_ELEMENTS} elements"),
    ],
)
def test_a_fragment_over_a_bound_is_refused_naming_it(children, message):
    with pytest.raises(mkv.FragmentError, match=message):
        mkv.parse_fragment(_with_cluster_children(children))
    if "elements" in message:  # the framer walks elements too, and stops at the same bound
        with pytest.raises(mkv.FragmentError, match=message):
            frame(_with_cluster_children(children) + _with_cluster_children(b""))


def test_a_fragment_over_the_byte_bound_is_refused_before_it_is_buffered_whole():
    huge = mkv.encode_fragment(
        tags={},
        audio={mkv.TRACK_FROM_CUSTOMER: bytes(mkv.MAX_FRAGMENT_BYTES)},
        timecode_ms=0,
        unknown_size=True,
    )
    framer = mkv.FragmentFramer()
    with pytest.raises(mkv.FragmentError, match=f"larger than {mkv.MAX_FRAGMENT_BYTES} bytes"):
        for at in range(0, len(huge), 65536):
            framer.feed(huge[at : at + 65536])


def test_every_string_from_a_fragment_is_cut_before_it_goes_anywhere():
    long_id = "x" * 300_000
    data = fake_kvs.connect_fragment(
        tags={"ContactId": long_id, "N" * 5000: "v"},
        service_before={},
        service_after={},
        audio={"T" * 9000: PCM},
        order=("T" * 9000,),
        timecode_ms=0,
        codec_id="C" * 200,
    )
    with pytest.raises(mkv.FragmentError) as refused:
        mkv.parse_fragment(data)
    assert len(str(refused.value)) < 400
    fragment = mkv.parse_fragment(
        one((mkv.TRACK_FROM_CUSTOMER, "Z" * 9000), {mkv.TRACK_FROM_CUSTOMER: PCM})
    )
    assert all(len(name) <= mkv.MAX_TEXT_CHARS + 40 for name in fragment.skipped)
    tagged = mkv.parse_fragment(
        fake_kvs.connect_fragment(
            tags={"ContactId": long_id},
            service_before={},
            service_after={},
            audio={},
            order=(),
            timecode_ms=0,
        )
    )
    assert len(tagged.contact_id) == mkv.MAX_TEXT_CHARS and tagged.contact_id.startswith("xxx")
