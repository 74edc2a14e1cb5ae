"""The bearer token on the stream's upgrade (BRIDGE_TOKEN, `bridge.auth`), over real sockets on
loopback."""

from __future__ import annotations

import hmac
import json
import logging

import pytest
from websockets.asyncio.client import connect
from websockets.datastructures import Headers
from websockets.exceptions import InvalidStatus

from bridge import auth
from bridge.auth import BearerToken, Verdict
from bridge.server import STREAM_PATH, Bridge
from contracts.bridge_env import BridgeEnvError, BridgeEnvironment
from tests.bridge.bridge_testkit import (
    PCM_CHUNK,
    append,
    event,
    http_exchange,
    ping_status,
    recv_event,
    running_bridge,
)
from voice_devtools.local.fake_vllm import FakeVllm

TOKEN = "s3cr3t-Token-0123456789abcdefXYZ"


def watch_upstream(bridge: Bridge) -> list[object]:
    """Record every attempt of `bridge` to open a vLLM connection or take a stream slot."""
    calls: list[object] = []
    open_upstream, accepted = bridge._open_upstream, bridge.stream_accepted

    async def recording_open(stream):
        calls.append("vllm")
        return await open_upstream(stream)

    def recording_accept(client):
        calls.append("slot")
        accepted(client)

    bridge._open_upstream = recording_open  # type: ignore[method-assign]
    bridge.stream_accepted = recording_accept  # type: ignore[method-assign]
    return calls


async def refused(
    bridge: Bridge, headers: dict[str, str] | None, path: str = STREAM_PATH
) -> tuple[int, Headers, dict]:
    """Try to open the stream with `headers`; return the HTTP status, headers and JSON body of the
    refusal."""
    with pytest.raises(InvalidStatus) as info:
        await connect(
            f"ws://127.0.0.1:{bridge.port}{path}",
            additional_headers=headers,
            compression=None,
            open_timeout=2,
        )
    response = info.value.response
    return response.status_code, response.headers, json.loads(response.body)


@pytest.mark.parametrize(
    ("headers", "verdict", "challenge"),
    [
        (None, "missing", "Bearer"),
        (
            {"Authorization": "Bearer " + TOKEN[:-1] + "Q"},
            "wrong",
            'Bearer error="invalid_token"',
        ),  # last byte
        (
            {"Authorization": "Bearer Q" + TOKEN[1:]},
            "wrong",
            'Bearer error="invalid_token"',
        ),  # first byte
        (
            {"Authorization": "Bearer " + TOKEN + "x"},
            "wrong",
            'Bearer error="invalid_token"',
        ),  # longer
        (
            {"Authorization": "Bearer " + TOKEN[:-1]},
            "wrong",
            'Bearer error="invalid_token"',
        ),  # shorter
        (
            {"Authorization": "Basic " + TOKEN},
            "malformed",
            'Bearer error="invalid_token"',
        ),  # another scheme
        ({"Authorization": TOKEN}, "malformed", 'Bearer error="invalid_token"'),  # no scheme
        ({"Authorization": "Bearer"}, "malformed", 'Bearer error="invalid_token"'),  # no token
        ({"X-Token": TOKEN}, "missing", "Bearer"),  # the right value in the wrong header
    ],
    ids=[
        "missing",
        "wrong-last-byte",
        "wrong-first-byte",
        "longer",
        "shorter",
        "basic",
        "no-scheme",
        "empty",
        "other-header",
    ],
)
def test_a_stream_without_the_right_token_gets_401_before_any_upstream_work(
    run, caplog, headers, verdict, challenge
):
    async def scenario():
        async with FakeVllm() as vllm, running_bridge(vllm.port, bridge_token=TOKEN) as bridge:
            calls = watch_upstream(bridge)
            status, answer_headers, body = await refused(bridge, headers)
            assert status == 401
            assert answer_headers["WWW-Authenticate"] == challenge
            assert body == {
                "error": f"{verdict} bearer token: send Authorization: Bearer <token> (the token "
                "secret's value)",
                "code": "unauthorized",
            }
            assert calls == [] and vllm.sessions == []
            assert (
                bridge.active_streams,
                bridge.metrics.started,
                bridge.metrics.unauthorized_count,
            ) == (0, 0, 1)

    run(scenario())
    assert f"refused a stream: {verdict} bearer token (401)" in caplog.text
    assert TOKEN not in caplog.text and TOKEN[:-1] not in caplog.text


def test_the_right_token_opens_the_stream_on_every_stream_path_and_ping_stays_open(run, caplog):
    async def scenario():
        async with (
            FakeVllm(generate=True) as vllm,
            running_bridge(vllm.port, bridge_token=TOKEN) as bridge,
        ):
            calls = watch_upstream(bridge)
            assert await ping_status(bridge) == 200  # health checks carry no token
            for path, scheme in (
                (STREAM_PATH, "Bearer"),
                ("/v1/realtime", "bearer"),
            ):  # the scheme is case-blind
                async with connect(
                    f"ws://127.0.0.1:{bridge.port}{path}",
                    compression=None,
                    open_timeout=2,
                    additional_headers={"Authorization": f"{scheme} {TOKEN}"},
                ) as ws:
                    assert (await recv_event(ws))["type"] == "session.created"
                    await ws.send(event("session.update", model="anything"))
                    await ws.send(event("input_audio_buffer.commit"))
                    await ws.send(
                        append(PCM_CHUNK * 5)
                    )  # 0.64 s: vLLM's first delta needs ~0.6 s of audio
                    assert (await recv_event(ws))["type"] == "transcription.delta"
            assert calls == ["slot", "vllm", "slot", "vllm"]
            for headers in (None, {"Authorization": "Bearer nope"}):  # the alias is checked too
                status, _, body = await refused(bridge, headers, "/v1/realtime")
                assert (status, body["code"]) == (401, "unauthorized")
            assert calls == ["slot", "vllm", "slot", "vllm"]
            assert bridge.metrics.unauthorized_count == 2

    run(scenario())
    assert TOKEN not in caplog.text


def test_two_authorization_headers_are_refused(run):
    async def scenario():
        async with FakeVllm() as vllm, running_bridge(vllm.port, bridge_token=TOKEN) as bridge:
            head, body = await http_exchange(
                bridge,
                (
                    f"GET {STREAM_PATH} HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: "
                    "Upgrade\r\nSec-WebSocket-Key: "
                    "dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\nAuthorization: "
                    f"Bearer {TOKEN}\r\nAuthorization: Bearer {TOKEN}\r\n\r\n"
                ).encode(),
            )
            assert head.startswith(b"HTTP/1.1 401 ")
            assert json.loads(body)["error"].startswith("malformed bearer token")
            assert vllm.sessions == []

    run(scenario())


@pytest.mark.parametrize(
    "value",
    [
        b"Bearer \xff\xfe",  # bytes outside ASCII (websockets decodes header values as ISO-8859-1)
        b"Bearer " + TOKEN.encode() + b"\xe9",  # the right token with one such byte after it
        b"Bearer \xa0" + TOKEN.encode(),  # a no-break space, which str.strip() would remove
        b"Bearer\xa0" + TOKEN.encode(),  # a no-break space as the separator
    ],
    ids=["ff-fe", "token-then-e9", "nbsp-then-token", "nbsp-separator"],
)
def test_an_authorization_value_outside_visible_ascii_is_a_malformed_401_not_an_error(
    run, caplog, value
):
    async def scenario():
        async with FakeVllm() as vllm, running_bridge(vllm.port, bridge_token=TOKEN) as bridge:
            head, body = await http_exchange(
                bridge,
                (
                    f"GET {STREAM_PATH} HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: "
                    "Upgrade\r\nSec-WebSocket-Key: "
                    "dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n"
                ).encode()
                + b"Authorization: "
                + value
                + b"\r\n\r\n",
            )
            assert head.startswith(b"HTTP/1.1 401 ")
            assert b'\r\nWWW-Authenticate: Bearer error="invalid_token"\r\n' in head + b"\r\n"
            assert json.loads(body) == {
                "error": "malformed bearer token: send Authorization: Bearer <token> (the "
                "token secret's value)",
                "code": "unauthorized",
            }
            assert vllm.sessions == []
            assert (
                bridge.active_streams,
                bridge.metrics.started,
                bridge.metrics.unauthorized_count,
            ) == (0, 0, 1)

    run(scenario())  # the autouse fixture fails the test on any ERROR log line or traceback
    assert "refused a stream: malformed bearer token (401)" in caplog.text


def test_without_a_token_the_stream_opens_as_before_even_with_an_authorization_header(run):
    async def scenario():
        async with FakeVllm() as vllm, running_bridge(vllm.port) as bridge:
            for headers in (None, {"Authorization": "Bearer whatever"}):
                async with connect(
                    f"ws://127.0.0.1:{bridge.port}{STREAM_PATH}",
                    compression=None,
                    open_timeout=2,
                    additional_headers=headers,
                ) as ws:
                    assert (await recv_event(ws))["type"] == "session.created"
            assert bridge.metrics.checks_token is False

    run(scenario())


# ---- the comparison: constant time -------------------------------------------------------------


@pytest.fixture
def compare_calls(monkeypatch) -> list[tuple[bytes, bytes]]:
    """Every call of `hmac.compare_digest` made by `bridge.auth`, with its arguments (the real
    result is returned)."""
    calls: list[tuple[bytes, bytes]] = []
    real = hmac.compare_digest

    def spy(a, b):
        calls.append((a, b))
        return real(a, b)

    monkeypatch.setattr(auth.hmac, "compare_digest", spy)
    return calls


@pytest.mark.parametrize(
    "presented",
    [
        TOKEN,
        "Q" + TOKEN[1:],
        TOKEN[:-1] + "Q",
        TOKEN[:10],
        TOKEN * 40,
        "",
        "x",
    ],
    ids=["right", "first-byte", "last-byte", "prefix", "long", "empty", "one-char"],
)
@pytest.mark.parametrize("scheme", ["Bearer ", "Basic ", None])
def test_every_verdict_is_one_compare_digest_of_two_32_byte_digests(
    compare_calls, presented, scheme
):
    """Where the first wrong byte is, and how long the presented token is, changes neither what is
    compared (two HMAC-SHA256 digests, 32 bytes each) nor how (`hmac.compare_digest`, once); no
    shortcut comparison decides a verdict first (it would skip the spy for some inputs)."""
    checker = BearerToken(TOKEN)
    headers = Headers() if scheme is None else Headers({"Authorization": scheme + presented})
    verdict = checker.check(headers)
    expected = Verdict.OK if (scheme == "Bearer " and presented == TOKEN) else verdict
    assert verdict is expected
    assert len(compare_calls) == 1
    ((a, b),) = compare_calls
    assert (type(a), type(b), len(a), len(b)) == (bytes, bytes, 32, 32)
    assert (a == b) == (verdict is Verdict.OK)
    assert TOKEN.encode() not in a + b  # the token itself is never what is compared


def test_the_checker_keeps_no_plain_token_and_hides_it_in_repr():
    checker = BearerToken(TOKEN)
    assert repr(checker) == "BearerToken(<hidden>)"
    assert all(TOKEN.encode() not in getattr(checker, name) for name in checker.__slots__)
    assert checker.check(Headers({"Authorization": f"Bearer {TOKEN}"})) is Verdict.OK
    assert BearerToken(TOKEN).check(Headers({"Authorization": f"Bearer {TOKEN}x"})) is Verdict.WRONG


# ---- settings ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("", "is empty or only whitespace"),
        ("   \t", "is empty or only whitespace"),
        (TOKEN + " ", "holds whitespace or characters outside visible ASCII"),
        ("tok en-0123456789abcdef", "holds whitespace or characters outside visible ASCII"),
        ("tökén-0123456789abcdef", "holds whitespace or characters outside visible ASCII"),
        ("short-token", "is shorter than 16 characters"),
    ],
)
def test_an_unusable_token_is_a_clear_startup_error_that_does_not_show_it(value, message):
    with pytest.raises(BridgeEnvError) as info:
        BridgeEnvironment.from_env({"BRIDGE_TOKEN": value})
    assert str(info.value).startswith("BRIDGE_TOKEN (its value is not shown) " + message)
    if value.strip():
        assert value.strip() not in str(info.value)


def test_the_token_setting_is_read_and_kept_out_of_repr():
    settings = BridgeEnvironment.from_env({"BRIDGE_TOKEN": TOKEN})
    assert settings.bridge_token == TOKEN
    assert TOKEN not in repr(settings)
    assert BridgeEnvironment.from_env({}).bridge_token is None


def test_the_bridge_logs_whether_it_checks_a_token_never_the_token(run, caplog):
    caplog.set_level(logging.INFO)

    async def scenario():
        async with FakeVllm() as vllm, running_bridge(vllm.port, bridge_token=TOKEN):
            pass

    run(scenario())
    assert "bearer token required" in caplog.text
    assert TOKEN not in caplog.text


def test_guessing_tokens_is_counted_every_time_but_logged_once_per_interval_with_a_count(
    run, caplog
):
    import logging

    from bridge.auth import REFUSED_LOG_INTERVAL_S, RefusalLog

    guesses = 300

    async def scenario():
        async with FakeVllm() as vllm, running_bridge(vllm.port, bridge_token=TOKEN) as bridge:
            for index in range(guesses):
                headers = (
                    None if index % 3 == 0 else {"Authorization": f"Bearer guess-{index:020d}"}
                )
                status, _, _ = await refused(bridge, headers)
                assert status == 401
            assert bridge.metrics.unauthorized_count == guesses

    caplog.set_level(logging.INFO, "bridge")
    run(scenario())
    lines = [record.getMessage() for record in caplog.records if "refused" in record.getMessage()]
    assert lines == [
        "refused a stream: missing bearer token (401)"
    ]  # the rest wait for the interval to pass

    now = [0.0]
    logger = logging.getLogger("test.refusals")
    refusals = RefusalLog(logger, clock=lambda: now[0])
    caplog.clear()
    with caplog.at_level(logging.INFO, "test.refusals"):
        for _ in range(5):
            refusals.refused(Verdict.WRONG)
        refusals.refused(Verdict.MISSING)
        now[0] = REFUSED_LOG_INTERVAL_S - 1
        refusals.flush_due()
        now[0] = REFUSED_LOG_INTERVAL_S
        refusals.flush_due()
        refusals.flush_due()
    assert [record.getMessage() for record in caplog.records] == [
        "refused a stream: wrong bearer token (401)",
        "refused 5 streams since the last such line (401): 1 missing, 4 wrong bearer token; at "
        "most one line every 60 s",
    ]
