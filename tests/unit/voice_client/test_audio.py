"""Audio reading and conversion to 16 kHz mono PCM16."""

from __future__ import annotations

import numpy as np
import pytest
import soundfile

from voice_client.audio import (
    CHUNK_BYTES,
    AudioError,
    float_to_pcm16,
    iter_chunks,
    load_pcm16,
    open_audio,
    pcm16_to_wav_bytes,
)


def test_recording_converts_to_16k_mono_of_the_same_duration(recording):
    info = soundfile.info(recording)
    assert (info.samplerate, info.channels) == (22050, 2)
    audio = load_pcm16(recording)
    assert (audio.sample_rate_hz, audio.source_sample_rate_hz, audio.source_channels) == (
        16000,
        22050,
        2,
    )
    assert audio.num_samples == round(info.frames * 16000 / 22050)
    assert abs(audio.duration_s - info.duration) < 1e-3


@pytest.mark.parametrize(
    ("fmt", "subtype", "rate", "channels"),
    [
        ("WAV", "PCM_16", 48000, 2),
        ("FLAC", "PCM_24", 44100, 1),
        ("OGG", "VORBIS", 32000, 3),
        ("WAV", "FLOAT", 16000, 1),
    ],
)
def test_any_rate_and_channel_count_keeps_a_tone_at_its_frequency(
    tmp_path, fmt, subtype, rate, channels
):
    seconds, tone_hz = 1.0, 440.0
    t = np.arange(int(rate * seconds)) / rate
    tone = 0.5 * np.sin(2 * np.pi * tone_hz * t)
    path = tmp_path / f"tone.{fmt.lower()}"
    soundfile.write(
        path, np.repeat(tone[:, None], channels, axis=1), rate, format=fmt, subtype=subtype
    )

    samples = np.frombuffer(load_pcm16(path).data, dtype="<i2").astype(np.float64) / 32767
    assert len(samples) == 16000
    spectrum = np.abs(np.fft.rfft(samples))
    assert np.argmax(spectrum) * 16000 / len(samples) == pytest.approx(tone_hz, abs=1.0)
    assert np.sqrt(np.mean(samples[1000:-1000] ** 2)) == pytest.approx(0.5 / np.sqrt(2), rel=0.03)


def test_channels_are_averaged(tmp_path):
    left = np.full(1600, 0.5, dtype=np.float32)
    right = np.full(1600, -0.25, dtype=np.float32)
    path = tmp_path / "two.wav"
    soundfile.write(path, np.stack([left, right], axis=1), 16000, subtype="FLOAT")
    samples = np.frombuffer(load_pcm16(path).data, dtype="<i2")
    assert set(samples.tolist()) == {round(0.125 * 32767)}


def test_empty_file_is_a_clear_error(tmp_path):
    path = tmp_path / "empty.wav"
    soundfile.write(path, np.zeros((0, 1), dtype=np.float32), 16000)
    with pytest.raises(AudioError, match="no audio samples"):
        load_pcm16(path)


def test_unreadable_and_missing_files_are_clear_errors(tmp_path):
    text = tmp_path / "notes.wav"
    text.write_text("not audio")
    with pytest.raises(AudioError, match=r"cannot read it as audio.*WAV, FLAC, OGG"):
        load_pcm16(text)
    with pytest.raises(AudioError, match="no such file"):
        load_pcm16(tmp_path / "absent.flac")


def test_a_wav_cut_short_is_named_with_what_its_header_declares(tmp_path, recording):
    whole = open_audio(recording)
    assert whole.declared_frames is None
    cut = tmp_path / "cut.wav"
    cut.write_bytes(
        recording.read_bytes()[:1000]
    )  # 44-byte header + 956 bytes: 239 stereo PCM16 frames
    info = open_audio(cut)
    assert (info.frames, info.declared_frames) == (239, whole.frames)
    flac = tmp_path / "whole.flac"
    soundfile.write(flac, np.zeros((100, 1), dtype=np.float32), 16000)
    assert open_audio(flac).declared_frames is None  # only PCM WAV headers are read


def test_pcm16_conversion_clips_and_rounds():
    pcm = np.frombuffer(float_to_pcm16(np.array([-2.0, -1.0, 0.0, 0.5, 1.0, 3.0])), dtype="<i2")
    assert pcm.tolist() == [-32767, -32767, 0, 16384, 32767, 32767]


def test_chunks_are_4096_bytes_except_the_last():
    data = bytes(range(256)) * 40  # 10240 bytes
    chunks = list(iter_chunks(data))
    assert [len(c) for c in chunks] == [CHUNK_BYTES, CHUNK_BYTES, 2048]
    assert b"".join(chunks) == data
    with pytest.raises(ValueError, match="multiple of 2"):
        list(iter_chunks(data, 4095))


def test_wav_round_trip(tmp_path):
    pcm = np.arange(-500, 500, dtype="<i2").tobytes()
    path = tmp_path / "out.wav"
    path.write_bytes(pcm16_to_wav_bytes(pcm, 44100))
    samples, rate = soundfile.read(path, dtype="int16")
    assert rate == 44100
    assert samples.tobytes() == pcm


def test_a_directory_is_named_as_such(tmp_path):
    with pytest.raises(AudioError, match="is a directory; give the path of an audio file"):
        load_pcm16(tmp_path)


def test_streamed_decoding_matches_whole_file_resampling_and_never_reads_the_whole_file(
    tmp_path, monkeypatch
):
    import soxr

    from voice_client.audio import iter_pcm16_chunks

    rate = 44100
    t = np.arange(int(rate * 2.3)) / rate
    stereo = np.stack(
        [0.4 * np.sin(2 * np.pi * 300 * t), 0.2 * np.sin(2 * np.pi * 1200 * t)], axis=1
    )
    path = tmp_path / "long.flac"
    soundfile.write(path, stereo, rate, subtype="PCM_24")
    whole, _ = soundfile.read(path, dtype="float32")
    expected = soxr.resample(whole.mean(axis=1), rate, 16000, quality="HQ")

    monkeypatch.setattr(
        soundfile, "read", lambda *a, **k: pytest.fail("the whole file was read at once")
    )
    chunks = list(
        iter_pcm16_chunks(path, block_frames=4000)
    )  # many small blocks: filter state must carry over
    assert {len(chunk) for chunk in chunks[:-1]} == {CHUNK_BYTES} and 0 < len(
        chunks[-1]
    ) <= CHUNK_BYTES
    got = np.frombuffer(b"".join(chunks), dtype="<i2").astype(np.float64) / 32767
    assert len(got) == len(expected) == round(len(whole) * 16000 / rate)
    assert np.max(np.abs(got - expected)) < 3 / 32767  # equal up to PCM16 rounding
