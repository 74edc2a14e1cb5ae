"""connect_consumer.mkv_parser: a fragment read into its tags and each Connect track's exact PCM,
from every real layout (fixtures/README.md names the sources) and from what libavformat's muxer
writes, and clear errors for what Connect never sends (real AAC, video, laced blocks, over a
bound)."""

from __future__ import annotations

import numpy as np
import pytest
from ebmlite import encoding

from connect_consumer import mkv
from connect_consumer.mkv_parser import parse_fragment
from connect_consumer.mkv_writer import append_tags, encode_fragment
from tests.unit.services.connect_consumer import connect_testkit as kit
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


def test_a_laced_or_odd_sized_block_is_refused_naming_it():
    laced = bytearray(fragment(1))
    header = encoding.encodeSize(1, 1) + b"\x00\x00\x80"
    at = bytes(laced).index(header)
    laced[at + 3] = 0x82  # Xiph lacing
    with pytest.raises(mkv.FragmentError, match="laced block"):
        parse_fragment(bytes(laced))
    odd = fragment(2, audio={mkv.TRACK_FROM_CUSTOMER: PCM[:-1]})
    with pytest.raises(mkv.FragmentError, match="not whole 16-bit samples"):
        parse_fragment(odd)


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
            append_tags(
                muxed, {mkv.TAG_FRAGMENT_NUMBER: str(100 + index)}, unknown_size=index % 2 == 1
            )
        )
    stream = b"".join(documents)
    framer = mkv.FragmentFramer()
    out = [
        f for at in range(0, len(stream), 777) for f in framer.feed(stream[at : at + 777])
    ] + framer.close()
    assert out == documents
    parsed = [parse_fragment(f) for f in out]
    assert [(p.number, p.contact_id, p.timecode_ms) for p in parsed] == [
        (str(100 + i), "c-1", i * 2000.0) for i in range(4)
    ]
    assert all(
        p.audio == {mkv.TRACK_FROM_CUSTOMER: left, mkv.TRACK_TO_CUSTOMER: right} for p in parsed
    )
    assert {p.tracks[mkv.TRACK_FROM_CUSTOMER].codec_id for p in parsed} == {mkv.PCM_CODEC_ID}


# ---- the real layouts (fixtures/README.md names the sources) -----------------------------------


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
    fragments = [parse_fragment(data) for data in frame((kit.FIXTURES_DIR / name).read_bytes())]
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
        parse_fragment(fragments[0])


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
    legacy = parse_fragment(one(("Track_audio/L16",), {"Track_audio/L16": PCM}))
    assert legacy.audio == {mkv.TRACK_FROM_CUSTOMER: PCM} and legacy.skipped == ()
    extra = parse_fragment(
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
            lambda: encode_fragment(
                tags={}, audio={mkv.TRACK_FROM_CUSTOMER: PCM}, timecode_ms=0, codec_id="A_AAC"
            ),
            "track AUDIO_FROM_CUSTOMER is AAC \\(A_AAC with an Audio element: 8000 Hz, 1 channel",
        ),
        (
            lambda: encode_fragment(
                tags={}, audio={mkv.TRACK_FROM_CUSTOMER: PCM}, timecode_ms=0, codec_id="A_OPUS"
            ),
            "track AUDIO_FROM_CUSTOMER is A_OPUS 16-bit 1 channel",
        ),
    ],
)
def test_a_real_aac_or_other_encoding_is_refused_saying_what_connect_sends(data, message):
    with pytest.raises(mkv.FragmentError, match=message):
        parse_fragment(data())


def test_mime_type_parameter_names_are_case_insensitive():
    data = one(
        (mkv.TRACK_FROM_CUSTOMER,),
        {mkv.TRACK_FROM_CUSTOMER: PCM},
        mime="audio/L16; Rate=8000; CHANNELS=1",
    )
    assert parse_fragment(data).audio == {mkv.TRACK_FROM_CUSTOMER: PCM}


def test_connects_a_aac_label_without_a_mime_type_tag_is_read_as_its_pcm():
    data = fake_kvs.connect_fragment(
        tags={"ContactId": "c-1"},
        service_before={},
        service_after={},
        audio={mkv.TRACK_TO_CUSTOMER: PCM},
        order=(mkv.TRACK_TO_CUSTOMER,),
        timecode_ms=0,
    )
    assert parse_fragment(data).audio == {mkv.TRACK_TO_CUSTOMER: PCM}


def test_a_block_group_is_read_not_lost():
    data = one((mkv.TRACK_FROM_CUSTOMER,), {mkv.TRACK_FROM_CUSTOMER: PCM[:1024]})
    at = data.index(bytes.fromhex("a3") + encoding.encodeSize(1028, 8))
    block = data[at + 9 : at + 9 + 1028]
    group = (
        bytes.fromhex("a0")
        + encoding.encodeSize(1028 + 3, 1 + 1)
        + bytes.fromhex("a1")
        + encoding.encodeSize(1028, 2)
        + block
    )
    assert parse_fragment(data[:at] + group + data[at + 9 + 1028 :]).audio == {
        mkv.TRACK_FROM_CUSTOMER: PCM[:1024]
    }


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
        parse_fragment(_with_cluster_children(children))
    if "elements" in message:  # the framer walks elements too, and stops at the same bound
        with pytest.raises(mkv.FragmentError, match=message):
            frame(_with_cluster_children(children) + _with_cluster_children(b""))


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
        parse_fragment(data)
    assert len(str(refused.value)) < 400
    fragment = parse_fragment(
        one((mkv.TRACK_FROM_CUSTOMER, "Z" * 9000), {mkv.TRACK_FROM_CUSTOMER: PCM})
    )
    assert all(len(name) <= mkv.MAX_TEXT_CHARS + 40 for name in fragment.skipped)
    tagged = parse_fragment(
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
