"""Parse time and memory of one fragment through the Connect consumer's framer and parser, for a
real-layout fragment and hostile ones (a million one-sample blocks, 4 million Void elements, an 8 MB
audio fragment).

    .venv/bin/python bench/connect_fragment_bench.py  # the tree's mkv.py and mkv_parser.py
    .venv/bin/python bench/connect_fragment_bench.py --mkv OLD.py  # one file (git show REV:...)

Prints, per input: its size, what the reader does with it (fragments parsed, or the error it is
refused with), the seconds it takes (framing in 4 KiB pieces as GetMedia's reads arrive, then
parsing: the time one call's reading holds a thread) and the peak of memory allocated meanwhile
(tracemalloc).
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
import time
import tracemalloc
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

PIECE = 4096


def load(path: str | None):
    """The framer class and the parse function: the tree's (services/connect_consumer/mkv.py and
    mkv_parser.py), or those of one file that holds both (mkv.py before its parser moved out)."""
    if path is None:
        from connect_consumer.mkv import FragmentFramer
        from connect_consumer.mkv_parser import parse_fragment

        return FragmentFramer, parse_fragment
    spec = importlib.util.spec_from_file_location("mkv_under_test", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module.FragmentFramer, module.parse_fragment


def inputs() -> dict[str, bytes]:
    from connect_consumer import mkv
    from voice_devtools import fake_kvs

    def fragment(children: bytes) -> bytes:
        base = fake_kvs.connect_fragment(
            tags={"ContactId": "c-1"},
            service_before={},
            service_after={},
            audio={mkv.TRACK_FROM_CUSTOMER: b""},
            order=(mkv.TRACK_FROM_CUSTOMER,),
            timecode_ms=0,
            codec_id="A_PCM/INT/LIT",
        )
        at = base.index(bytes.fromhex("1f43b675ff")) + 5
        return base[:at] + children + base[at:]

    pcm = bytes(16 * 1024)
    real = fake_kvs.FakeCall("c-1", "s", pcm, pcm).fragment(0)
    return {
        "real layout (1.024 s, 2 tracks)": real,
        "1,000,000 one-sample blocks": fragment(
            bytes.fromhex("a3868100008000 00".replace(" ", "")) * 1_000_000
        ),
        "4,000,000 Void elements": fragment(bytes.fromhex("ec80") * 4_000_000),
        "8 MB of audio (under 8 MiB)": fragment(
            b"".join(bytes.fromhex("a3440481000080") + bytes(1024) for _ in range(8000))
        ),
    }


def run(framer_class, parse_fragment, data: bytes) -> tuple[str, float, int]:
    tracemalloc.start()
    began = time.perf_counter()
    try:
        framer = framer_class()
        documents = []
        for at in range(0, len(data), PIECE):
            documents += framer.feed(data[at : at + PIECE])
        documents += framer.close()
        parsed = [parse_fragment(document) for document in documents]
        outcome = f"parsed {len(parsed)}"
    except Exception as error:  # what the reader turns into Call Failed
        outcome = f"refused: {str(error)[:70]}"
    seconds = time.perf_counter() - began
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return outcome, seconds, peak


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--mkv", help="another services/connect_consumer/mkv.py to measure (framer and parser)"
    )
    args = parser.parse_args()
    framer_class, parse_fragment = load(args.mkv)
    print(f"{'input':34} {'bytes':>10} {'seconds':>8} {'peak MB':>8}  outcome")
    for name, data in inputs().items():
        outcome, seconds, peak = run(framer_class, parse_fragment, data)
        print(f"{name:34} {len(data):10d} {seconds:8.3f} {peak / 1e6:8.1f}  {outcome}")


if __name__ == "__main__":
    main()
