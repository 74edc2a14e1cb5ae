"""What the connect-replay tests share (the replay's and the command's): the KVS stand-in's quiet
reads shortened, and the bridge with the fake vLLM on an event loop in a thread."""

from __future__ import annotations

import asyncio
import threading

import pytest

from tests.unit.services.connect_consumer.connect_testkit import READ_TIMEOUT_S, servers


@pytest.fixture(autouse=True)
def short_kvs_reads(monkeypatch):
    """The command's KVS stand-in ends a quiet read as the consumer's own tests have theirs
    (connect_testkit's READ_TIMEOUT_S) instead of after GetMedia's 3 s (each call's end waits out
    two); tests/e2e/local runs the command as shipped."""
    monkeypatch.setattr("voice_devtools.fake_kvs.READ_TIMEOUT_S", READ_TIMEOUT_S)


class Background:
    """The bridge and the fake vLLM on an event loop in a thread (the CLI runs its own loop)."""

    def __enter__(self):
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.context = servers()
        self.url, _kvs, _vllm = asyncio.run_coroutine_threadsafe(
            self.context.__aenter__(), self.loop
        ).result(20)
        return self

    def __exit__(self, *exc):
        asyncio.run_coroutine_threadsafe(
            self.context.__aexit__(None, None, None), self.loop
        ).result(20)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(5)
