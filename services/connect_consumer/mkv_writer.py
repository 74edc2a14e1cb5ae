"""Kinesis Video Streams fragments written, for the local stand-in (``voice_devtools.fake_kvs``)
and the tests: a whole fragment as GetMedia returns it (:func:`encode_fragment`), or GetMedia's tags
appended to a document another muxer wrote (:func:`append_tags`). The consumer itself only reads
(:mod:`connect_consumer.mkv_parser`), so its image does not carry this module.
"""

from __future__ import annotations

from ebmlite import encoding

from connect_consumer.mkv import (
    CONNECT_SAMPLE_RATE_HZ,
    CONNECT_TRACKS,
    DEFAULT_TIMECODE_SCALE_NS,
    EBML_ID,
    PCM_BIT_DEPTH,
    PCM_CODEC_ID,
    SCHEMA,
    SEGMENT_ID,
    FragmentError,
    element_header,
)


def append_tags(document: bytes, tags: dict[str, str], *, unknown_size: bool = False) -> bytes:
    """``document`` (one Matroska document: EBML header, Segment) with a ``Tags`` element of
    ``tags`` appended to its Segment, as GetMedia appends its own tags to each fragment a producer
    wrote. The Segment is rewritten with its new size, or EBML's unknown size with ``unknown_size``;
    elements before it keep their offsets (SeekHead, Cues).

    Raises:
        FragmentError: ``document`` is not an EBML header followed by a Segment of known size.
    """
    header = element_header(document, 0)
    if header is None or header[0] != EBML_ID or header[1] is None:
        raise FragmentError("not a Matroska document (no EBML header)")
    segment_at = header[2] + header[1]
    segment = element_header(document, segment_at)
    if segment is None or segment[0] != SEGMENT_ID or segment[1] is None:
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
    return document[:segment_at] + encoding.encodeId(SEGMENT_ID) + size + payload


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
    segment_id = encoding.encodeId(SEGMENT_ID)
    size = b"\x01\xff\xff\xff\xff\xff\xff\xff" if unknown_size else encoding.encodeSize(len(body))
    return bytes(header) + segment_id + size + bytes(body)
