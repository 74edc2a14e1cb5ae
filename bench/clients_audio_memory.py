"""Peak memory (RSS) of reading a long recording for ``voicectl transcribe``: streamed vs whole-file
decoding.

    .venv/bin/python bench/clients_audio_memory.py [--minutes 20] [--rate 48000] [--channels 2]

Writes a synthetic FLAC (a tone with noise) to a temporary directory, then, in a fresh process per
method, decodes it to 16 kHz mono PCM16 chunks and prints the process's peak RSS
(``resource.getrusage`` ``ru_maxrss``, KiB on Linux):

- ``streamed``: :func:`voice_client.audio.iter_pcm16_chunks` (soundfile.blocks -> mix down ->
  soxr.ResampleStream), the path ``transcribe`` uses; chunks are dropped as they are produced, as
  the sender does once a session is finished.
- ``whole-file``: ``soundfile.read`` of the whole file as float32, mix down and ``soxr.resample``
  (the old path).

A figure, not a test: the machine and libsndfile version change it.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

MEASURE = r"""
import resource, sys
import numpy as np, soundfile, soxr
path, method = sys.argv[1], sys.argv[2]
if method == "streamed":
    from voice_client.audio import iter_pcm16_chunks
    total = sum(len(chunk) for chunk in iter_pcm16_chunks(path))
else:
    samples, rate = soundfile.read(path, dtype="float32", always_2d=True)
    mono = soxr.resample(np.ascontiguousarray(samples.mean(axis=1)), rate, 16000, quality="HQ")
    total = len((np.clip(mono, -1, 1) * 32767).astype("<i2").tobytes())
print(total, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
"""


def write_synthetic(path: Path, minutes: float, rate: int, channels: int) -> None:
    """Write ``minutes`` of a 440 Hz tone plus noise as 16-bit FLAC, block by block (bounded
    memory)."""
    import numpy as np
    import soundfile

    rng = np.random.default_rng(0)
    frames_left = int(minutes * 60 * rate)
    start = 0
    with soundfile.SoundFile(path, "w", rate, channels, subtype="PCM_16", format="FLAC") as out:
        while frames_left:
            n = min(frames_left, rate * 10)
            t = (start + np.arange(n)) / rate
            tone = 0.3 * np.sin(2 * np.pi * 440 * t) + 0.05 * rng.standard_normal(n)
            out.write(np.repeat(tone[:, None], channels, axis=1).astype(np.float32))
            start += n
            frames_left -= n


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=20.0)
    parser.add_argument("--rate", type=int, default=48000)
    parser.add_argument("--channels", type=int, default=2)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / "long.flac"
        write_synthetic(path, args.minutes, args.rate, args.channels)
        print(
            f"file: {args.minutes:g} min, {args.rate} Hz, {args.channels} channels, FLAC "
            f"{path.stat().st_size / 1e6:.0f} MB"
        )
        for method in ("streamed", "whole-file"):
            done = subprocess.run(
                [sys.executable, "-c", MEASURE, str(path), method],
                capture_output=True,
                text=True,
                check=True,
                cwd=Path(__file__).parents[1],
            )
            pcm_bytes, peak_kib = map(int, done.stdout.split())
            print(
                f"{method:>10}: peak RSS {peak_kib / 1024:.0f} MiB for {pcm_bytes / 1e6:.0f} MB "
                "of PCM16 out"
            )


if __name__ == "__main__":
    main()
