"""voice_client.mic_guard: the gate in front of the mic page lets through only the page
itself."""

from __future__ import annotations

import pytest

from voice_client import mic


def guard_scope(
    headers: dict[str, str], path: str = "/", kind: str = "http", method: str = "GET"
) -> dict:
    return {
        "type": kind,
        "path": path,
        "method": method,
        "headers": [(name.encode(), value.encode()) for name, value in headers.items()],
    }


PAGE = "127.0.0.1:7860"


@pytest.mark.parametrize(
    ("headers", "path", "kind", "method", "refused"),
    [
        ({"host": PAGE}, "/", "http", "GET", None),  # the page, typed into the address bar
        (
            {"host": PAGE, "origin": f"http://{PAGE}"},
            "/voicectl/recording",
            "websocket",
            None,
            None,
        ),
        (
            {"host": "localhost:7860", "origin": "http://localhost:7860"},
            "/assets/Index-Akn07EZk2.js",
            "http",
            "GET",
            None,
        ),
        ({"host": "[::1]:7860"}, "/theme.css", "http", "HEAD", None),
        (
            {"host": PAGE, "sec-fetch-site": "cross-site", "sec-fetch-mode": "navigate"},
            "/",
            "http",
            "GET",
            None,
        ),  # a link
        # DNS rebinding: the attacker's name, pointed at 127.0.0.1, with a matching Origin
        (
            {"host": "evil.example:7860", "origin": "http://evil.example:7860"},
            "/voicectl/recording",
            "websocket",
            None,
            "host",
        ),
        ({"host": "evil.example:7860"}, "/", "http", "GET", "host"),
        ({"host": "127.0.0.1:7861"}, "/", "http", "GET", "host"),  # another port: not this page
        ({"host": "127.0.0.1"}, "/", "http", "GET", "host"),
        ({}, "/", "http", "GET", "host"),
        (
            {"host": PAGE, "origin": "https://evil.example"},
            "/gradio_api/upload",
            "http",
            "POST",
            "origin",
        ),
        (
            {"host": PAGE, "origin": "http://evil.example"},
            "/voicectl/recording",
            "websocket",
            None,
            "origin",
        ),
        (
            {"host": PAGE, "origin": "http://127.0.0.1:8000"},
            "/voicectl/recording",
            "websocket",
            None,
            "origin",
        ),
        ({"host": PAGE, "origin": "null"}, "/voicectl/recording", "websocket", None, "origin"),
        (
            {"host": PAGE, "origin": f"https://{PAGE}"},
            "/",
            "http",
            "GET",
            "origin",
        ),  # served over http only
        (
            {"host": PAGE, "sec-fetch-site": "cross-site", "sec-fetch-mode": "no-cors"},
            "/",
            "http",
            "GET",
            "origin",
        ),
        (
            {"host": PAGE},
            "/gradio_api/upload",
            "http",
            "POST",
            "route",
        ),  # Gradio's upload route: never reached
        ({"host": PAGE, "origin": f"http://{PAGE}"}, "/gradio_api/upload", "http", "POST", "route"),
        ({"host": PAGE}, "/gradio_api/queue/join", "http", "POST", "route"),
        ({"host": PAGE}, "/gradio_api/file=/etc/passwd", "http", "GET", "route"),
        ({"host": PAGE}, "/gradio_api/info", "http", "GET", "route"),
        ({"host": PAGE}, "/", "http", "POST", "route"),
        ({"host": PAGE}, "/gradio_api/queue/data", "websocket", None, "route"),
    ],
)
def test_the_gate_lets_through_only_the_page_itself(headers, path, kind, method, refused):
    from voice_client.mic_guard import PageGuard, page_hosts

    guard = PageGuard(None, hosts=page_hosts(7860), websocket_paths=[mic.RECORDING_PATH])
    verdict = guard.refusal(guard_scope(headers, path, kind, method))
    assert (verdict and verdict[0]) == refused, verdict


def test_the_share_link_host_is_accepted_over_https_only():
    from voice_client.mic_guard import PageGuard, page_hosts

    guard = PageGuard(
        None,
        hosts=page_hosts(7860, ["abc.gradio.live"]),
        https_hosts=frozenset({"abc.gradio.live"}),
        websocket_paths=[mic.RECORDING_PATH],
    )
    share = {"host": "abc.gradio.live", "origin": "https://abc.gradio.live"}
    assert guard.refusal(guard_scope(share, mic.RECORDING_PATH, "websocket")) is None
    assert guard.refusal(guard_scope({**share, "origin": "http://abc.gradio.live"}))[0] == "origin"
