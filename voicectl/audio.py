"""Read audio files and convert them to what the Voxtral endpoint takes: 16 kHz mono PCM16 (little-endian).

Reading uses soundfile (libsndfile: WAV, FLAC, OGG/Vorbis and more, any sample rate and channel count);
resampling uses soxr (the SoX resampler, "HQ" quality). Channels are mixed down by averaging.

Source of the target format: vLLM's realtime protocol decodes ``input_audio_buffer.append`` audio as base64 PCM16
at 16 kHz, mono (vllm ``entrypoints/speech_to_text/realtime/protocol.py``: "base64-encoded PCM16 @ 16kHz").
"""

from __future__ import annotations

import io
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import soundfile
import soxr

TARGET_SAMPLE_RATE_HZ = 16_000
"""Sample rate the Voxtral realtime model takes (vLLM realtime protocol)."""

PCM16_BYTES_PER_SAMPLE = 2
"""Bytes per sample of signed 16-bit PCM."""

CHUNK_BYTES = 4096
"""Bytes of PCM16 per ``input_audio_buffer.append``: 2048 samples = 128 ms at 16 kHz (design.md)."""

CHUNK_SECONDS = CHUNK_BYTES / PCM16_BYTES_PER_SAMPLE / TARGET_SAMPLE_RATE_HZ
"""Audio seconds in one full chunk (0.128 s)."""

RESAMPLER_QUALITY = "HQ"
"""soxr quality preset: "HQ" is soxr's default (20-bit precision, passband to ~91 % of Nyquist)."""

SUPPORTED_FORMATS = ("WAV", "FLAC", "OGG")
"""Container formats promised to users; libsndfile reads more (AIFF, CAF, MP3 with libsndfile >= 1.1)."""


class AudioError(ValueError):
    """An audio file cannot be used: unreadable, not audio, or empty. The message names the file and the fix."""


@dataclass(frozen=True)
class Pcm16Audio:
    """Mono PCM16 audio, little-endian.

    Attributes:
        data: the samples, 2 bytes each (signed 16-bit little-endian).
        sample_rate_hz: samples per second (16000 after :func:`load_pcm16`).
        source_sample_rate_hz: the file's sample rate before conversion, in Hz.
        source_channels: the file's channel count before mixing down.
    """

    data: bytes
    sample_rate_hz: int = TARGET_SAMPLE_RATE_HZ
    source_sample_rate_hz: int = TARGET_SAMPLE_RATE_HZ
    source_channels: int = 1

    @property
    def num_samples(self) -> int:
        """Number of samples (frames) in ``data``."""
        return len(self.data) // PCM16_BYTES_PER_SAMPLE

    @property
    def duration_s(self) -> float:
        """Duration in seconds."""
        return self.num_samples / self.sample_rate_hz


def float_to_pcm16(samples: np.ndarray) -> bytes:
    """Convert float samples in [-1.0, 1.0] (shape ``(n,)``) to PCM16 little-endian bytes.

    Values outside the range are clipped (resampling can overshoot a full-scale input slightly).
    """
    clipped = np.clip(np.asarray(samples, dtype=np.float32), -1.0, 1.0)
    # 32767 (not 32768) so that +1.0 maps to the largest positive int16 without wrapping.
    return np.round(clipped * 32767.0).astype("<i2").tobytes()


def to_mono_16k(samples: np.ndarray, sample_rate_hz: float) -> np.ndarray:
    """Mix ``samples`` (shape ``(frames,)`` or ``(frames, channels)``, float) down to mono and resample to 16 kHz.

    Returns float32 samples of shape ``(round(frames * 16000 / sample_rate_hz),)``.
    """
    mono = samples if samples.ndim == 1 else samples.mean(axis=1)
    mono = np.ascontiguousarray(mono, dtype=np.float32)
    if sample_rate_hz == TARGET_SAMPLE_RATE_HZ:
        return mono
    return soxr.resample(mono, sample_rate_hz, TARGET_SAMPLE_RATE_HZ, quality=RESAMPLER_QUALITY)


def load_pcm16(path: str | Path) -> Pcm16Audio:
    """Read an audio file (WAV, FLAC, OGG; any sample rate and channel count) as 16 kHz mono PCM16.

    Raises:
        AudioError: the file is missing, unreadable, not a supported audio format, or holds no samples.
    """
    path = Path(path)
    if not path.is_file():
        raise AudioError(f"{path}: no such file")
    try:
        samples, sample_rate_hz = soundfile.read(path, dtype="float32", always_2d=True)
    except (soundfile.LibsndfileError, RuntimeError, TypeError) as error:
        raise AudioError(
            f"{path}: cannot read it as audio ({error}); use a {', '.join(SUPPORTED_FORMATS)} file "
            "(convert others with e.g. `ffmpeg -i input.m4a output.flac`)"
        ) from error
    frames, channels = samples.shape
    if frames == 0:
        raise AudioError(f"{path}: the file holds no audio samples (0 frames at {sample_rate_hz} Hz)")
    mono_16k = to_mono_16k(samples, sample_rate_hz)
    return Pcm16Audio(
        data=float_to_pcm16(mono_16k),
        source_sample_rate_hz=int(sample_rate_hz),
        source_channels=channels,
    )


def iter_chunks(pcm16: bytes, chunk_bytes: int = CHUNK_BYTES) -> Iterator[bytes]:
    """Split PCM16 bytes into consecutive chunks of ``chunk_bytes`` (the last one may be shorter, never empty)."""
    if chunk_bytes <= 0 or chunk_bytes % PCM16_BYTES_PER_SAMPLE:
        raise ValueError(f"chunk_bytes must be a positive multiple of {PCM16_BYTES_PER_SAMPLE}, got {chunk_bytes}")
    for start in range(0, len(pcm16), chunk_bytes):
        yield pcm16[start : start + chunk_bytes]


def pcm16_to_wav_bytes(pcm16: bytes, sample_rate_hz: int, channels: int = 1) -> bytes:
    """Wrap PCM16 little-endian bytes (interleaved when ``channels`` > 1) in a WAV (RIFF) container."""
    samples = np.frombuffer(pcm16, dtype="<i2")
    if channels > 1:
        samples = samples.reshape(-1, channels)
    buffer = io.BytesIO()
    soundfile.write(buffer, samples, sample_rate_hz, subtype="PCM_16", format="WAV")
    return buffer.getvalue()


def write_wav(path: str | Path, pcm16: bytes, sample_rate_hz: int, channels: int = 1) -> None:
    """Write PCM16 little-endian bytes to ``path`` as a 16-bit WAV file (overwrites)."""
    Path(path).write_bytes(pcm16_to_wav_bytes(pcm16, sample_rate_hz, channels))
