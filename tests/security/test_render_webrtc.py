"""WebRTC escaped the rendering sandbox.

With a campaign's ``render`` on, a page's ``RTCPeerConnection`` sent STUN/TURN datagrams
to an address the page chose: every HTTP-style request goes through the route or meets a
proxy that does not exist, but UDP does not go through a proxy. The crawler's Chromium
now keeps WebRTC to proxied connections (``--webrtc-ip-handling-policy``,
crawler/rendering.py), so it sends no UDP at all.

A real rendering crawl of a loopback page that opens a peer connection with a STUN and a
TURN server on a UDP socket (and a TCP listener) of the test's, on 127.0.0.1.
"""

from __future__ import annotations

import socket
import threading
import time
import zlib
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from crawler.rendering import chromium_path
from tests.corpus import novel_chapters
from tests.loopback import Handler, served
from tests.security.fakes import listening
from tracker.campaigns import Campaign, save_campaign, trigger_run, wait_for_run
from tracker.context import Context

pytestmark = [
    pytest.mark.security,
    pytest.mark.slow,
    pytest.mark.skipif(not chromium_path().exists(), reason="needs Debian's Chromium"),
]

CHAPTER = novel_chapters(1)[0][:1500]
MADE = "peer connection made"


def _page(port: int) -> bytes:
    """A chapter whose script opens a peer connection with ICE servers on ``port``, then
    asks for something that takes a second (the page stays open while ICE would send)."""
    paragraphs = "".join(f"<p>{line}</p>" for line in CHAPTER.split("\n") if line)
    servers = (
        f"{{urls: 'stun:127.0.0.1:{port}'}},"
        f"{{urls: 'turn:127.0.0.1:{port}?transport=udp', username: 'u', credential: 'p'}},"
        f"{{urls: 'turn:127.0.0.1:{port}?transport=tcp', username: 'u', credential: 'p'}}"
    )
    return (
        "<html><head><meta charset='utf-8'><title>第1章</title></head><body>"
        f"<article>{paragraphs}</article><div id='state'></div><script>"
        "const state = document.getElementById('state');"
        f"try {{ const pc = new RTCPeerConnection({{iceServers: [{servers}]}});"
        " pc.createDataChannel('out');"
        " pc.createOffer().then(offer => pc.setLocalDescription(offer));"
        f" state.textContent = '{MADE}';"
        "} catch (e) { state.textContent = 'no peer connection: ' + e; }"
        "fetch('/api/wait');"
        "</script></body></html>"
    ).encode()


class _Site(Handler):
    def do_GET(self) -> None:
        if self.path == "/":
            self.send_body(_page(self.server.ice_port))  # type: ignore[attr-defined]
        elif self.path == "/api/wait":
            time.sleep(1.5)
            self.send_body(b"{}", "application/json")
        else:
            self.send_error(404)


@contextmanager
def ice_servers() -> Iterator[tuple[list[bytes], object]]:
    """A UDP socket and a TCP listener on one port of 127.0.0.1: the datagrams that reach
    the one, the listener (its ``connections``) for the other."""
    with listening() as tcp:
        udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        udp.bind(("127.0.0.1", tcp.server_port))
        udp.settimeout(0.1)
        datagrams: list[bytes] = []
        stop = threading.Event()

        def receive() -> None:
            while not stop.is_set():
                try:
                    datagrams.append(udp.recv(2048))
                except TimeoutError:
                    continue

        receiver = threading.Thread(target=receive, daemon=True)
        receiver.start()
        try:
            yield datagrams, tcp
        finally:
            time.sleep(1)  # late datagrams
            stop.set()
            receiver.join()
            udp.close()


def test_a_rendered_page_sends_no_webrtc_datagram(crawl_ctx: Context) -> None:
    with ice_servers() as (datagrams, tcp):
        with served(_Site, ice_port=tcp.server_port) as site:
            url = f"http://127.0.0.1:{site.server_port}/"
            campaign = {"name": "webrtc", "seeds": [url], "delay": 0, "render": True}
            save_campaign(crawl_ctx, Campaign.from_dict(campaign))
            run = wait_for_run(crawl_ctx, trigger_run(crawl_ctx, "webrtc"), timeout=180)
        page = crawl_ctx.db.pages.find_one({"url": url})
    assert run["state"] == "finished", run
    assert page["rendered"] is True
    assert MADE in zlib.decompress(page["raw_zlib"]).decode()  # the script ran and asked
    assert datagrams == [], f"{len(datagrams)} datagrams reached the page's STUN/TURN server"
    assert tcp.connections == 0
