"""E-mail through the configured relay (COPYTRACK_SMTP_URL): alerts to the publisher's own
subscribers and the notices reviewers send.

``smtp://host[:587]`` upgrades to TLS with STARTTLS whenever the relay offers it;
``smtps://host[:465]`` speaks TLS from the first byte. A login (in the URL or in
COPYTRACK_SMTP_USER / COPYTRACK_SMTP_PASSWORD) is never sent over a connection left in
clear to a relay off this machine. What the relay answered — each recipient's code and the
answer to the message itself — is returned, to be recorded; the password never appears in
an error or a log line.
"""

from __future__ import annotations

import ipaddress
import smtplib
import socket
import ssl
from dataclasses import dataclass, field
from datetime import datetime
from email import policy
from email.message import EmailMessage
from email.utils import formataddr, formatdate, make_msgid
from pathlib import Path
from urllib.parse import unquote, urlsplit

from ..core.config import Settings
from ..core.times import now

__all__ = ["Relay", "Sent", "SmtpError", "relay_from_settings", "send_mail"]

#: Seconds the relay may take for one step of the dialogue.
TIMEOUT = 30.0
PORTS = {"smtp": 587, "smtps": 465}


class SmtpError(RuntimeError):
    """No message went out: no relay is configured, it cannot be reached, or it refused."""


@dataclass(frozen=True)
class Relay:
    """Where and how mail is handed over."""

    host: str
    port: int
    implicit_tls: bool
    user: str | None = None
    password: str | None = field(default=None, repr=False)
    ca_file: Path | None = None

    @property
    def shown(self) -> str:
        """The relay as errors and pages show it: without its login."""
        return f"{'smtps' if self.implicit_tls else 'smtp'}://{self.host}:{self.port}"


@dataclass(frozen=True)
class Sent:
    """A message the relay took: its Message-ID, who it took it for, whom it refused (with
    its answer), its answer to the message, and when."""

    message_id: str
    accepted: list[str]
    refused: dict[str, str]
    answer: str
    at: datetime


def relay_from_settings(settings: Settings) -> Relay:
    """The relay COPYTRACK_SMTP_URL names; SmtpError saying what to set when none is."""
    if not settings.smtp_url:
        raise SmtpError(
            "no mail relay: set COPYTRACK_SMTP_URL (smtp://relay:587 or smtps://relay:465; "
            "docs/operations.md) to send e-mail"
        )
    parts = urlsplit(settings.smtp_url)
    try:
        port = parts.port or PORTS[parts.scheme]
    except ValueError:
        raise SmtpError("COPYTRACK_SMTP_URL has a port that is no number") from None
    if not parts.hostname:
        raise SmtpError("COPYTRACK_SMTP_URL names no host: smtp://relay.example:587")
    return Relay(
        host=parts.hostname,
        port=port,
        implicit_tls=parts.scheme == "smtps",
        user=unquote(parts.username) if parts.username else settings.smtp_user,
        password=unquote(parts.password) if parts.password else settings.smtp_password,
        ca_file=settings.smtp_ca_file,
    )


def _is_local(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _tls(relay: Relay) -> ssl.SSLContext:
    return ssl.create_default_context(cafile=str(relay.ca_file) if relay.ca_file else None)


def _connect(relay: Relay) -> smtplib.SMTP:
    if relay.implicit_tls:
        client: smtplib.SMTP = smtplib.SMTP_SSL(
            relay.host, relay.port, timeout=TIMEOUT, context=_tls(relay)
        )
        client.ehlo()
        return client
    client = smtplib.SMTP(relay.host, relay.port, timeout=TIMEOUT)
    client.ehlo()
    if client.has_extn("starttls"):
        client.starttls(context=_tls(relay))
        client.ehlo()
    elif relay.user and not _is_local(relay.host):
        client.close()
        raise SmtpError(
            f"{relay.shown} offers no STARTTLS: its login would travel in clear; use "
            "smtps:// or a relay that offers STARTTLS"
        )
    return client


def _answer(code: int, text: bytes | str) -> str:
    text = text.decode("utf-8", "replace") if isinstance(text, bytes) else text
    return f"{code} {' '.join(text.split())}"[:500]


def build_message(
    sender: str,
    recipients: list[str],
    subject: str,
    body: str,
    *,
    sender_name: str = "",
    reply_to: str | None = None,
) -> EmailMessage:
    """A plain-text UTF-8 message with its own Message-ID (in the sender's domain)."""
    message = EmailMessage(policy=policy.SMTP)  # CRLF line ends, as the wire has them
    message["From"] = formataddr((sender_name, sender)) if sender_name else sender
    message["To"] = ", ".join(recipients)
    message["Subject"] = subject
    message["Date"] = formatdate(usegmt=True)
    message["Message-ID"] = make_msgid(domain=sender.rpartition("@")[2] or None)
    if reply_to:
        message["Reply-To"] = reply_to
    message.set_content(body)
    return message


def send_mail(relay: Relay, message: EmailMessage) -> Sent:
    """Hand ``message`` to the relay for every address of its To header.

    Recipients the relay refuses are returned with its answer; SmtpError when it took the
    message for none, refused the message, or could not be reached or logged into.
    """
    recipients = [a.strip() for a in str(message["To"]).split(",") if a.strip()]
    sender = str(message["From"]).rpartition("<")[2].rstrip(">")
    try:
        client = _connect(relay)
    except (OSError, smtplib.SMTPException, ssl.SSLError) as err:
        raise SmtpError(f"{relay.shown} cannot be reached: {_reason(err)}") from None
    try:
        if relay.user:
            try:
                client.login(relay.user, relay.password or "")
            except smtplib.SMTPAuthenticationError as err:
                raise SmtpError(
                    f"{relay.shown} refused the login of {relay.user!r}: "
                    f"{_answer(err.smtp_code, err.smtp_error)} (check COPYTRACK_SMTP_USER "
                    "and COPYTRACK_SMTP_PASSWORD)"
                ) from None
        code, text = client.mail(sender)
        if code != 250:
            raise SmtpError(f"{relay.shown} refused the sender {sender}: {_answer(code, text)}")
        refused: dict[str, str] = {}
        accepted: list[str] = []
        for address in recipients:
            code, text = client.rcpt(address)
            if code in (250, 251):
                accepted.append(address)
            else:
                refused[address] = _answer(code, text)
        if not accepted:
            client.rset()
            raise SmtpError(
                f"{relay.shown} refused every recipient: "
                + "; ".join(f"{a}: {r}" for a, r in refused.items())
            )
        code, text = client.data(message.as_bytes())
        if code != 250:
            raise SmtpError(f"{relay.shown} refused the message: {_answer(code, text)}")
        answer = _answer(code, text)
    except (OSError, smtplib.SMTPException) as err:
        raise SmtpError(f"{relay.shown} broke off: {_reason(err)}") from None
    finally:
        try:
            client.quit()
        except (OSError, smtplib.SMTPException):
            client.close()
    return Sent(str(message["Message-ID"]), accepted, refused, answer, now())


def _reason(err: BaseException) -> str:
    if isinstance(err, smtplib.SMTPResponseException):
        return _answer(err.smtp_code, err.smtp_error)
    if isinstance(err, socket.timeout | TimeoutError):
        return f"no answer within {TIMEOUT:g} s"
    return str(err) or type(err).__name__
