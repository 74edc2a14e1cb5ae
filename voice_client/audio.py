"""Read audio files and convert them to what the Voxtral endpoint takes: 16 kHz mono PCM16
(little-endian).

Reading uses soundfile (libsndfile: WAV, FLAC, OGG/Vorbis and more, any sample rate and channel
count); resampling uses soxr (the SoX resampler, "HQ" quality). Channels are mixed down by
averaging.

Source of the target format: vLLM's realtime protocol decodes ``input_audio_buffer.append`` audio as
base64 PCM16 at 16 kHz, mono (vllm ``entrypoints/speech_to_text/realtime/protocol.py``:
"base64-encoded PCM16 @ 16kHz").
"""

from __future__ import annotations

import io
import wave
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import soundfile
import soxr

from contracts import realtime

TARGET_SAMPLE_RATE_HZ = realtime.SAMPLE_RATE_HZ
"""Sample rate the Voxtral realtime model takes (vLLM realtime protocol:
:mod:`contracts.realtime`)."""

PCM16_BYTES_PER_SAMPLE = realtime.BYTES_PER_SAMPLE
"""Bytes per sample of signed 16-bit PCM."""

CHUNK_BYTES = 4096
"""Bytes of PCM16 per ``input_audio_buffer.append``: 2048 samples = 128 ms at 16 kHz
(docs/clients.md)."""

CHUNK_SECONDS = CHUNK_BYTES / PCM16_BYTES_PER_SAMPLE / TARGET_SAMPLE_RATE_HZ
"""Audio seconds in one full chunk (0.128 s)."""

RESAMPLER_QUALITY = "HQ"
"""soxr quality preset: "HQ" is soxr's default (20-bit precision, passband to ~91 % of Nyquist)."""

SUPPORTED_FORMATS = ("WAV", "FLAC", "OGG")
"""Container formats promised to users; libsndfile reads more (AIFF, CAF, MP3 with libsndfile >=
1.1)."""


class AudioError(ValueError):
    """An audio file cannot be used: unreadable, not audio, or empty. The message names the file and
    the fix."""


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
    """Mix ``samples`` (shape ``(frames,)`` or ``(frames, channels)``, float) down to mono and
    resample to 16 kHz.

    Returns float32 samples of shape ``(round(frames * 16000 / sample_rate_hz),)``.
    """
    mono = samples if samples.ndim == 1 else samples.mean(axis=1)
    mono = np.ascontiguousarray(mono, dtype=np.float32)
    if sample_rate_hz == TARGET_SAMPLE_RATE_HZ:
        return mono
    return soxr.resample(mono, sample_rate_hz, TARGET_SAMPLE_RATE_HZ, quality=RESAMPLER_QUALITY)


BLOCK_FRAMES = 65_536
"""Frames read from the file per block when streaming (1.4 s at 48 kHz: a few hundred KB of float32
per block)."""


@dataclass(frozen=True)
class AudioFileInfo:
    """An audio file checked to be readable and non-empty.

    Attributes:
        path: the file.
        sample_rate_hz: its sample rate in Hz.
        channels: its channel count.
        frames: its length in frames (samples per channel).
        declared_frames: for a PCM WAV whose header declares more frames than the file holds (a
            recording cut short), the frames the header declares; else None.
    """

    path: Path
    sample_rate_hz: int
    channels: int
    frames: int
    declared_frames: int | None = None

    @property
    def duration_s(self) -> float:
        """Duration in seconds."""
        return self.frames / self.sample_rate_hz


def open_audio(path: str | Path) -> AudioFileInfo:
    """Check that ``path`` is a readable, non-empty audio file (WAV, FLAC, OGG; any rate and channel
    count).

    Only the header is read (libsndfile), so this is cheap for any file length.

    Raises:
        AudioError: the file is missing, a directory, unreadable, not a supported audio format, or
            holds no samples.
    """
    path = Path(path)
    if path.is_dir():
        raise AudioError(
            f"{path}: is a directory; give the path of an audio file "
            f"({', '.join(SUPPORTED_FORMATS)})"
        )
    if not path.is_file():
        raise AudioError(f"{path}: no such file")
    try:
        info = soundfile.info(str(path))
    except (soundfile.LibsndfileError, RuntimeError, TypeError, OSError) as error:
        raise AudioError(
            f"{path}: cannot read it as audio ({error}); use a {', '.join(SUPPORTED_FORMATS)} file "
            "(convert others with e.g. `ffmpeg -i input.m4a output.flac`)"
        ) from error
    if info.frames <= 0:
        raise AudioError(
            f"{path}: the file holds no audio samples (0 frames at {info.samplerate} Hz)"
        )
    return AudioFileInfo(
        path=path,
        sample_rate_hz=int(info.samplerate),
        channels=info.channels,
        frames=info.frames,
        declared_frames=_declared_wav_frames(path, info.format, info.frames),
    )


def _declared_wav_frames(path: Path, container: str, frames: int) -> int | None:
    """The frame count a PCM WAV header declares when it is more than ``frames`` (what the file
    holds), else None.

    libsndfile quietly trims the header's length to the bytes present, so a truncated WAV reads as a
    shorter, complete one; the standard library's ``wave`` reports the header's own count (PCM WAV
    only; others: None).
    """
    if container != "WAV":
        return None
    try:
        with wave.open(str(path)) as header:
            declared = header.getnframes()
    except (wave.Error, EOFError, OSError):
        return None
    return declared if declared > frames else None


def iter_pcm16(path: str | Path, block_frames: int = BLOCK_FRAMES) -> Iterator[bytes]:
    """Decode ``path`` block by block to 16 kHz mono PCM16 (pieces of any even length, possibly
    empty).

    Memory stays bounded by one block whatever the file's length: soundfile reads ``block_frames``
    frames, the channels are averaged, and a streaming soxr resampler (which keeps its filter state
    across blocks) converts them. The output equals resampling the whole file at once up to soxr's
    streaming rounding (a few samples).

    Raises:
        AudioError: as :func:`open_audio`, or the file cannot be decoded part way.
    """
    info = open_audio(path)
    resampler = None
    if info.sample_rate_hz != TARGET_SAMPLE_RATE_HZ:
        resampler = soxr.ResampleStream(
            info.sample_rate_hz,
            TARGET_SAMPLE_RATE_HZ,
            1,
            dtype="float32",
            quality=RESAMPLER_QUALITY,
        )
    try:
        for block in soundfile.blocks(
            str(info.path), blocksize=block_frames, dtype="float32", always_2d=True
        ):
            mono = np.ascontiguousarray(
                block.mean(axis=1) if info.channels > 1 else block[:, 0], dtype=np.float32
            )
            yield float_to_pcm16(resampler.resample_chunk(mono) if resampler is not None else mono)
    except (soundfile.LibsndfileError, RuntimeError) as error:
        raise AudioError(f"{info.path}: decoding failed part way ({error})") from error
    if resampler is not None:
        yield float_to_pcm16(resampler.resample_chunk(np.zeros(0, dtype=np.float32), last=True))


class Pcm16Resampler:
    """A streaming resampler from PCM16 mono at ``source_rate_hz`` to 16 kHz PCM16 (soxr, filter
    state kept across pieces, so a live source resampled piece by piece equals the whole resampled
    at once up to soxr's rounding).

    Feed pieces with :meth:`resample` and call :meth:`flush` once at the end for the filter's tail.
    """

    def __init__(self, source_rate_hz: int) -> None:
        self._stream = (
            soxr.ResampleStream(
                source_rate_hz, TARGET_SAMPLE_RATE_HZ, 1, dtype="float32", quality=RESAMPLER_QUALITY
            )
            if source_rate_hz != TARGET_SAMPLE_RATE_HZ
            else None
        )

    def resample(self, pcm16: bytes, last: bool = False) -> bytes:
        if len(pcm16) % PCM16_BYTES_PER_SAMPLE:
            raise AudioError(f"PCM16 holds whole 2-byte samples; got {len(pcm16)} bytes")
        samples = np.frombuffer(pcm16, dtype="<i2").astype(np.float32) / 32768.0
        if self._stream is None:
            return pcm16
        return float_to_pcm16(self._stream.resample_chunk(samples, last=last))

    def flush(self) -> bytes:
        return self.resample(b"", last=True)


def iter_pcm16_chunks(
    path: str | Path, chunk_bytes: int = CHUNK_BYTES, block_frames: int = BLOCK_FRAMES
) -> Iterator[bytes]:
    """Decode ``path`` lazily to 16 kHz mono PCM16 in chunks of ``chunk_bytes`` (the last may be
    shorter).

    Raises:
        AudioError: as :func:`iter_pcm16`.
        ValueError: ``chunk_bytes`` is not a positive multiple of 2.
    """
    if chunk_bytes <= 0 or chunk_bytes % PCM16_BYTES_PER_SAMPLE:
        raise ValueError(
            f"chunk_bytes must be a positive multiple of {PCM16_BYTES_PER_SAMPLE}, got "
            f"{chunk_bytes}"
        )
    pending = bytearray()
    for piece in iter_pcm16(path, block_frames):
        pending += piece
        whole = len(pending) - len(pending) % chunk_bytes
        for start in range(0, whole, chunk_bytes):
            yield bytes(pending[start : start + chunk_bytes])
        del pending[:whole]
    if pending:
        yield bytes(pending)


def load_pcm16(path: str | Path) -> Pcm16Audio:
    """Read an audio file (WAV, FLAC, OGG; any sample rate and channel count) as 16 kHz mono PCM16,
    all in memory.

    For long files prefer :func:`iter_pcm16_chunks`, which keeps memory bounded.

    Raises:
        AudioError: the file is missing, unreadable, not a supported audio format, or holds no
            samples.
    """
    info = open_audio(path)
    return Pcm16Audio(
        data=b"".join(iter_pcm16(info.path)),
        source_sample_rate_hz=info.sample_rate_hz,
        source_channels=info.channels,
    )


def iter_chunks(pcm16: bytes, chunk_bytes: int = CHUNK_BYTES) -> Iterator[bytes]:
    """Split PCM16 bytes into consecutive chunks of ``chunk_bytes`` (the last one may be shorter,
    never empty)."""
    if chunk_bytes <= 0 or chunk_bytes % PCM16_BYTES_PER_SAMPLE:
        raise ValueError(
            f"chunk_bytes must be a positive multiple of {PCM16_BYTES_PER_SAMPLE}, got "
            f"{chunk_bytes}"
        )
    for start in range(0, len(pcm16), chunk_bytes):
        yield pcm16[start : start + chunk_bytes]


def pcm16_to_wav_bytes(pcm16: bytes, sample_rate_hz: int, channels: int = 1) -> bytes:
    """Wrap PCM16 little-endian bytes (interleaved when ``channels`` > 1) in a WAV (RIFF)
    container."""
    samples = np.frombuffer(pcm16, dtype="<i2")
    if channels > 1:
        samples = samples.reshape(-1, channels)
    buffer = io.BytesIO()
    soundfile.write(buffer, samples, sample_rate_hz, subtype="PCM_16", format="WAV")
    return buffer.getvalue()


def write_wav(path: str | Path, pcm16: bytes, sample_rate_hz: int, channels: int = 1) -> None:
    """Write PCM16 little-endian bytes to ``path`` as a 16-bit WAV file (overwrites)."""
    Path(path).write_bytes(pcm16_to_wav_bytes(pcm16, sample_rate_hz, channels))
