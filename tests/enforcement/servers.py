"""Real servers on loopback for the enforcement tests: an SMTP relay (aiosmtpd), a webhook
receiver and an RDAP registry (http.server), each recording what it was sent."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from email import message_from_bytes, policy
from email.message import EmailMessage
from typing import Any

from aiosmtpd.controller import Controller

from tests.loopback import Handler, served


@dataclass
class Mail:
    """A message the relay took: envelope sender and recipients, the parsed message."""

    sender: str
    recipients: list[str]
    message: EmailMessage

    @property
    def text(self) -> str:
        return self.message.get_content()


@dataclass
class MailBox:
    """What the loopback relay received, and the addresses it refuses."""

    mails: list[Mail] = field(default_factory=list)
    refuse: set[str] = field(default_factory=set)
    lock: threading.Lock = field(default_factory=threading.Lock)

    async def handle_RCPT(self, server: Any, session: Any, envelope: Any, address: str,
                          rcpt_options: list[str]) -> str:  # fmt: skip
        if address in self.refuse:
            return "550 5.1.1 no such mailbox here"
        envelope.rcpt_tos.append(address)
        return "250 OK"

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
        with self.lock:
            self.mails.append(
                Mail(
                    envelope.mail_from,
                    list(envelope.rcpt_tos),
                    message_from_bytes(envelope.content, policy=policy.default),
                )
            )
        return "250 2.0.0 queued as TEST1"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextmanager
def smtp_relay(**options: Any) -> Iterator[tuple[MailBox, str]]:
    """An SMTP server on 127.0.0.1: its mailbox and its ``smtp://`` URL."""
    box = MailBox()
    port = free_port()
    controller = Controller(box, hostname="127.0.0.1", port=port, **options)
    controller.start()
    try:
        yield box, f"smtp://127.0.0.1:{port}"
    finally:
        controller.stop()


class WebhookHandler(Handler):
    """Records each POST (headers and body); answers ``server.status`` (503 while down)."""

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        self.server.received.append((dict(self.headers), body))
        self.send_body(b"thanks", "text/plain", self.server.status)


@contextmanager
def webhook_receiver(status: int = 200) -> Iterator[Any]:
    """A webhook receiver on loopback; ``.received`` lists (headers, body) of each POST,
    ``.status`` is what it answers."""
    with served(WebhookHandler, received=[], status=status) as server:
        server.url = f"http://127.0.0.1:{server.server_address[1]}/hooks/copytrack"
        yield server


def abuse_entity(email: str, role: str = "abuse") -> dict[str, Any]:
    """An RDAP entity with a vCard e-mail, as registries write them (RFC 9083)."""
    return {
        "objectClassName": "entity",
        "roles": [role],
        "vcardArray": ["vcard", [["version", {}, "text", "4.0"], ["fn", {}, "text", "Abuse"],
                                 ["email", {"type": "work"}, "text", email]]],
    }  # fmt: skip


class RdapHandler(Handler):
    """IANA-shaped bootstrap files under /bootstrap/ and registry answers under /rdap/."""

    def do_GET(self) -> None:
        self.server.asked.append(self.path)
        answer = self.server.documents.get(self.path)
        if answer is None:
            self.send_body(b'{"errorCode": 404}', "application/rdap+json", 404)
            return
        self.send_body(json.dumps(answer).encode(), "application/rdap+json")


@contextmanager
def rdap_registry(domains: dict[str, str], networks: dict[str, str]) -> Iterator[Any]:
    """A registry answering for ``domains`` (name → registrar's abuse e-mail) and
    ``networks`` (IPv4 address → hosting network's abuse e-mail), with the bootstrap files
    that point to it; ``.bootstrap_url`` is what COPYTRACK_RDAP_BOOTSTRAP_URL takes."""
    with served(RdapHandler, asked=[], documents={}) as server:
        base = f"http://127.0.0.1:{server.server_address[1]}"
        tlds = sorted({name.rpartition(".")[2] for name in domains})
        docs = server.documents
        docs["/bootstrap/dns.json"] = {
            "version": "1.0", "publication": "2026-01-01T00:00:00Z",
            "services": [[tlds, [f"{base}/rdap/"]]],
        }  # fmt: skip
        docs["/bootstrap/ipv4.json"] = {
            "version": "1.0", "publication": "2026-01-01T00:00:00Z",
            "services": [[["127.0.0.0/8"], [f"{base}/rdap/"]]],
        }  # fmt: skip
        docs["/bootstrap/ipv6.json"] = {"version": "1.0", "services": []}
        for name, email in domains.items():
            registrar = {**abuse_entity("registrar@example.test", "registrar"),
                         "entities": [abuse_entity(email)]}  # fmt: skip
            docs[f"/rdap/domain/{name}"] = {
                "objectClassName": "domain", "ldhName": name, "entities": [registrar],
            }  # fmt: skip
        for address, email in networks.items():
            docs[f"/rdap/ip/{address}"] = {
                "objectClassName": "ip network", "startAddress": address, "name": "TESTNET",
                "entities": [abuse_entity(email)],
            }  # fmt: skip
        server.bootstrap_url = f"{base}/bootstrap/"
        yield server
