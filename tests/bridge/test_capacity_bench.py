"""bench/capacity_bench.py's harness: streams through a real bridge to the fake vLLM get their first
delta and their transcription.done, and a refused stream is counted as failed (figures are the
bench's business, not asserted)."""

from __future__ import annotations

import asyncio
import importlib.util
import sys

from tests.conftest import ROOT

spec = importlib.util.spec_from_file_location(
    "capacity_bench", ROOT / "bench" / "capacity_bench.py"
)
capacity_bench = importlib.util.module_from_spec(spec)
sys.modules["capacity_bench"] = capacity_bench
spec.loader.exec_module(capacity_bench)


def test_streams_complete_and_a_refused_stream_counts_as_failed():
    async def scenario():
        appends = capacity_bench.load_audio(None, 1.0)
        async with capacity_bench.local_bridge(max_streams=2) as url:
            served = await capacity_bench.run_level(
                url, capacity_bench.MODEL, 2, appends, 0.2, 10.0
            )
            crowded = await capacity_bench.run_level(
                url, capacity_bench.MODEL, 3, appends, 0.0, 10.0
            )
        return appends, served, crowded

    appends, served, crowded = asyncio.run(scenario())
    assert len(appends) == 8  # 1 s of audio in 128 ms appends
    assert all(
        r.error is None and r.first_delta_s is not None and r.rtf is not None for r in served
    ), served
    assert all(
        r.rtf >= 1.0 for r in served
    )  # transcription.done cannot come before the audio has been spoken
    failed = [r for r in crowded if r.error]
    assert len(failed) == 1, crowded
    assert "server_busy" in failed[0].error, failed[0].error
    line = capacity_bench.summary(3, crowded)
    assert line.split("|")[0].strip() == "3" and line.split("|")[6].split()[0] == "1"


def test_the_header_names_the_servers_transcription_delay():
    """The first delta waits for the delay's audio, so the header says which delay the figures are
    at."""
    assert capacity_bench.delay_label(160, real=True) == "160 ms"
    assert capacity_bench.delay_label(None, real=True) == (
        "not given (the checkpoint's 480 ms unless the server sets another)"
    )
    assert capacity_bench.delay_label(2400, real=False).startswith("n/a (the fake vLLM")
