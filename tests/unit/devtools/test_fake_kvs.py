"""The Kinesis Video Streams stand-in of connect-replay and the tests."""

from __future__ import annotations

import asyncio
import logging

import aiohttp

from voice_devtools.fake_kvs import FakeCall, FakeKvs


def test_a_reader_that_hangs_up_mid_call_ends_its_get_media_quietly(caplog):
    """A consumer whose call fails closes GetMedia while fragments are still being written; the
    stand-in used to log aiohttp's "Error handling request" and a traceback under the replay's real
    error line."""

    async def scenario() -> None:
        kvs = await FakeKvs(read_timeout_s=5).start()
        try:
            call = kvs.add(
                FakeCall(
                    "contact-1", "stream-1", bytes(8000 * 2 * 20), bytes(8000 * 2 * 20), speed=20.0
                )
            )
            async with aiohttp.ClientSession() as session:
                response = await session.post(
                    f"{kvs.url}/getMedia",
                    json={
                        "StreamARN": call.stream_arn,
                        "StartSelector": {
                            "StartSelectorType": "FRAGMENT_NUMBER",
                            "AfterFragmentNumber": call.number(0),
                        },
                    },
                )
                assert response.status == 200
                assert await response.content.read(1)
                response.close()  # the reader hangs up while the call is still being produced
            await asyncio.sleep(
                1.5
            )  # the stand-in writes the next fragments into the closed connection
        finally:
            await kvs.stop()

    with caplog.at_level(logging.DEBUG):
        asyncio.run(scenario())
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR], [
        r.getMessage() for r in caplog.records
    ]
