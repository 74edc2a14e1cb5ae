"""The mic page against hostile pages, in a real browser (as test_clients_mic_browser.py runs
it): a page on another site, and a DNS rebinding page, can neither upload a file nor open a
recording."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.browser_testkit import requires_chromium
from tests.e2e.clients.mic_browser_testkit import (  # noqa: F401 (fixtures)
    ATTACKER_SITE_HOST,
    EVIL_NAME,
    fixture_browser,
    fixture_sonic_runtime,
    fixture_speech_wav,
    fixture_stack,
)

pytestmark = requires_chromium

ATTACK_SCRIPT = """
async (target) => {
  const result = {};
  const form = new FormData();
  // Gradio stores a file under its content's hash
  const unique = crypto.getRandomValues(new Uint8Array(65536));
  form.append("files", new Blob([unique, new Uint8Array(1 << 20)]), "big.bin");
  // no-cors: a cross-site page cannot read the answer, but the request is sent (no preflight)
  try {
    const answer = await fetch(target.http + "/gradio_api/upload",
                               {method: "POST", body: form, mode: target.mode});
    result.upload = answer.type === "opaque" ? "sent" : answer.status;
  } catch (error) {
    result.upload = "failed: " + error;
  }
  result.recording = await new Promise((resolve) => {
    const socket = new WebSocket(target.ws + "/voicectl/recording");
    socket.onopen = () => socket.send(JSON.stringify({type: "start", sample_rate_hz: 48000}));
    socket.onmessage = (event) => { resolve(JSON.parse(event.data).type); socket.close(); };
    socket.onclose = (event) => resolve("closed " + event.code);
  });
  return result;
}
"""


@pytest.fixture(scope="module")
def attacker_site() -> Iterator[str]:
    """A plain page at http://127.0.0.2:PORT/ (the attacker's site); yields its URL."""
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # http.server API
            body = b"<!doctype html><title>a site the user visits</title><p>nothing to see"
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer((ATTACKER_SITE_HOST, 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://{ATTACKER_SITE_HOST}:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()


def uploaded_files() -> set[str]:
    from gradio.utils import get_upload_folder

    folder = Path(get_upload_folder())
    return {str(path) for path in folder.rglob("*") if path.is_file()} if folder.exists() else set()


def test_a_page_on_another_site_can_neither_upload_nor_record(stack, browser, attacker_site):
    """The attacker's page (another site, on loopback) posts a file to Gradio's upload route and
    opens a recording, as any web site the user visits could: both are refused, no file is stored,
    no stream is opened."""
    servers, url = stack
    sessions_before, files_before = len(servers.vllm.sessions), uploaded_files()
    page = browser.new_page()
    try:
        page.goto(attacker_site)
        result = page.evaluate(
            ATTACK_SCRIPT, {"http": url, "ws": url.replace("http://", "ws://"), "mode": "no-cors"}
        )
    finally:
        page.close()
    assert result == {
        "upload": "sent",
        "recording": "closed 1006",
    }  # 1006: the handshake was refused (HTTP 403)
    assert uploaded_files() == files_before
    assert len(servers.vllm.sessions) == sessions_before


@pytest.fixture(scope="module")
def rebinding_proxy(stack) -> Iterator[str]:
    """DNS rebinding, played on loopback: ``evil.example`` resolves to 127.0.0.2, where this proxy
    listens on the mic page's port. Its first answer is the attacker's page (``/rebound``, the
    attacker's server before the rebinding); every other connection goes to the mic page at
    127.0.0.1 (the same name and port after the rebinding, so the browser treats the mic page as the
    attacker's own origin). Yields the attacker's origin."""
    import asyncio

    _, url = stack
    port = int(url.rsplit(":", 1)[1])
    document = b"<!doctype html><title>rebound</title>"
    loop = asyncio.new_event_loop()

    async def pipe(reader, writer) -> None:
        try:
            while data := await reader.read(65536):
                writer.write(data)
                await writer.drain()
        except OSError:
            pass
        finally:
            writer.close()

    async def serve(reader, writer) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        if head.startswith(b"GET /rebound "):
            writer.write(
                b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nConnection: close\r\n"
                b"Content-Length: %d\r\n\r\n%s" % (len(document), document)
            )
            await writer.drain()
            writer.close()
            return
        upstream_reader, upstream_writer = await asyncio.open_connection("127.0.0.1", port)
        upstream_writer.write(head)
        await asyncio.gather(pipe(reader, upstream_writer), pipe(upstream_reader, writer))

    thread = threading.Thread(
        target=loop.run_forever, daemon=True
    )  # Playwright's loop runs in this thread
    thread.start()
    server = asyncio.run_coroutine_threadsafe(
        asyncio.start_server(serve, ATTACKER_SITE_HOST, port), loop
    ).result(5)
    try:
        yield f"http://{EVIL_NAME}:{port}"
    finally:
        loop.call_soon_threadsafe(server.close)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(5)


def test_a_dns_rebinding_page_can_neither_load_the_page_nor_record(stack, browser, rebinding_proxy):
    """The attacker's name re-pointed at this machine with the page's port: its requests are
    same-origin for the browser (Origin http://evil.example:PORT, Host evil.example:PORT), and
    refused for naming another host."""
    servers, _url = stack
    evil = rebinding_proxy
    sessions_before, files_before = len(servers.vllm.sessions), uploaded_files()
    page = browser.new_page()
    try:
        page.goto(f"{evil}/rebound")
        result = page.evaluate(
            ATTACK_SCRIPT, {"http": evil, "ws": evil.replace("http://", "ws://"), "mode": "cors"}
        )
        the_page = page.goto(f"{evil}/")
        status = the_page.status
    finally:
        page.close()
    # The gate answers 403 without reading the upload's body and closes: the browser sees either the
    # 403 or, when it was still sending the body through the proxy, a failed fetch. Either way
    # nothing was taken (files below).
    assert result["upload"] == 403 or result["upload"] == "failed: TypeError: Failed to fetch", (
        result
    )
    assert result["recording"] == "closed 1006"
    assert status == 403
    assert uploaded_files() == files_before
    assert len(servers.vllm.sessions) == sessions_before
