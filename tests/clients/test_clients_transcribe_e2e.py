"""``voicectl transcribe --url`` end to end: the client, the real bridge (container/bridge) and the fake vLLM,
all on 127.0.0.1. The servers run on their own event loop in a thread; the command runs as users run it."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
import soundfile

from tests.clients.conftest import Servers
from voicectl import transcribe
from voicectl.audio import load_pcm16

DELTAS = ("Hello ", "from ", "SageMaker. ", "Streaming ", "speech ", "to ", "text.")


@pytest.fixture
def servers() -> Iterator[Servers]:
    with Servers(deltas=DELTAS, delta_per_append=True) as running:
        yield running


def test_transcribe_url_paced_end_to_end(servers, parse, recording, capsys):
    args = parse(["transcribe", str(recording), "--url", servers.url, "--speed", "1", "--json"])
    assert transcribe.run(args) == 0
    out, err = capsys.readouterr()
    result = json.loads(out)

    (session,) = servers.vllm.sessions
    # The fake received 16 kHz mono PCM16 of the recording's duration (within 1 %), exactly what the client converted.
    duration_s = soundfile.info(recording).duration
    received_s = len(session.audio) / 2 / 16000
    assert received_s == pytest.approx(duration_s, rel=0.01)
    assert bytes(session.audio) == load_pcm16(recording).data
    assert session.event_types()[:2] == ["session.update", "input_audio_buffer.commit"]
    assert session.events[-1] == {"type": "input_audio_buffer.commit", "final": True}
    # Paced at --speed 1: from the first append to transcription.done within 10 % of real time.
    assert result["elapsed_s"] == pytest.approx(duration_s, rel=0.10)
    assert result["real_time_factor"] == pytest.approx(1.0, abs=0.10)
    assert result["audio_seconds_sent"] == pytest.approx(duration_s, rel=0.01)
    # The printed transcript is what the fake sent; the deltas were printed as they arrived.
    assert result["transcript"] == session.text
    assert session.sent[-1] == {"type": "transcription.done", "text": session.text, "usage": session.sent[-1]["usage"]}
    assert session.text.startswith("Hello from SageMaker. ")
    assert session.text in err
    assert result["time_to_first_delta_s"] is not None and 0 <= result["time_to_first_delta_s"] < 1.0


def test_transcribe_url_unpaced_prints_the_transcript_and_figures(servers, parse, recording, capsys):
    args = parse(["transcribe", str(recording), "--url", servers.url, "--speed", "0"])
    assert transcribe.run(args) == 0
    out, err = capsys.readouterr()
    (session,) = servers.vllm.sessions
    assert out == session.text + "\n"
    assert "time to first delta:" in err and "real-time factor:" in err and "audio sent: 3.660 s" in err
    assert len(session.audio) == len(load_pcm16(recording).data)


def test_transcribe_url_reports_an_error_event(servers, parse, recording, capsys):
    import asyncio

    async def fail_after_first_append() -> None:
        session = await servers.vllm.wait_for_session(timeout=10)
        await session.wait_for_event("input_audio_buffer.append", timeout=10)
        await session.send_error("CUDA out of memory", "processing_error")

    injected = asyncio.run_coroutine_threadsafe(fail_after_first_append(), servers.loop)
    args = parse(["transcribe", str(recording), "--url", servers.url, "--speed", "1"])
    assert transcribe.run(args) == 1
    injected.result(5)
    err = capsys.readouterr().err
    assert "the endpoint reported an error (processing_error): CUDA out of memory" in err
    assert "CloudWatch logs" in err


def test_transcribe_url_refused_connection_is_a_clear_error(parse, recording, capsys):
    from tests.fakes.fake_vllm import free_port

    args = parse(["transcribe", str(recording), "--url", f"ws://127.0.0.1:{free_port()}/invocations-bidirectional-stream"])
    assert transcribe.run(args) == 1
    assert "cannot open a WebSocket" in capsys.readouterr().err


def test_transcribe_bad_input_is_a_usage_error(parse, tmp_path):
    from voicectl.cli import UsageError

    bad = tmp_path / "bad.wav"
    bad.write_bytes(b"RIFF....")
    with pytest.raises(UsageError, match="cannot read it as audio"):
        transcribe.run(parse(["transcribe", str(bad), "--url", "ws://127.0.0.1:1/x"]))
    with pytest.raises(UsageError, match="--speed must be 0"):
        transcribe.run(parse(["transcribe", str(bad), "--url", "ws://127.0.0.1:1/x", "--speed", "-1"]))
    with pytest.raises(UsageError, match="must start with ws://"):
        transcribe.run(parse(["transcribe", str(bad), "--url", "http://127.0.0.1:1/x"]))
    with pytest.raises(SystemExit):
        parse(["transcribe", str(bad)])  # neither --endpoint nor --url


def test_ctrl_c_closes_the_stream_cleanly(recording):
    """SIGINT mid-stream: exit code 130 from voicectl's main, and vLLM sees a normal close (1000), not a drop."""
    import signal
    import subprocess
    import sys
    import time
    from pathlib import Path

    # Only the transcribe module is registered: the test must not depend on the other subcommands' modules.
    script = ("import sys\nfrom voicectl import cli\ncli.SUBCOMMAND_MODULES = ('voicectl.transcribe',)\n"
              "sys.exit(cli.main(sys.argv[1:]))\n")
    with Servers(deltas=("word ",), delta_per_append=True) as servers:
        process = subprocess.Popen([sys.executable, "-c", script, "transcribe", str(recording), "--url", servers.url],
                                   cwd=Path(__file__).parents[2], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                   text=True)
        session = servers.call(servers.vllm.wait_for_session(timeout=10), timeout=15)
        servers.call(session.wait_for_event("input_audio_buffer.append", count=3, timeout=10), timeout=15)
        time.sleep(0.2)
        process.send_signal(signal.SIGINT)
        _, err = process.communicate(timeout=15)
        close_code = servers.call(session.wait_closed(timeout=10), timeout=15)
    assert process.returncode == 130
    assert "voicectl transcribe: interrupted" in err
    assert close_code == 1000
    assert 0 < len(session.audio) < len(load_pcm16(recording).data)


def test_python_m_voicectl_transcribe(servers, recording):
    """The installed entry point (`python -m voicectl`) runs the subcommand; stdout holds only the transcript."""
    import subprocess
    import sys
    from pathlib import Path

    done = subprocess.run([sys.executable, "-m", "voicectl", "transcribe", str(recording), "--url", servers.url,
                           "--speed", "0"], cwd=Path(__file__).parents[2], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    (session,) = servers.vllm.sessions
    assert done.stdout == session.text + "\n"
