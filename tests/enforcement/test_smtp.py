"""The mail relay as COPYTRACK_SMTP_URL names it: STARTTLS with a login, TLS from the start,
refused recipients, and no login sent in clear."""

from __future__ import annotations

import datetime as dt
import ipaddress
import ssl
from pathlib import Path

import pytest
from aiosmtpd.smtp import AuthResult
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from tests.enforcement.servers import smtp_relay
from tracker.core.config import Settings
from tracker.enforcement.smtp import SmtpError, build_message, relay_from_settings, send_mail


def certificate(directory: Path) -> tuple[Path, Path]:
    """A self-signed certificate for 127.0.0.1: (certificate, key) PEM files."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "loopback relay")])
    start = dt.datetime.now(dt.UTC) - dt.timedelta(days=1)
    cert = (
        x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
        .serial_number(x509.random_serial_number()).not_valid_before(start)
        .not_valid_after(start + dt.timedelta(days=3))
        .add_extension(x509.SubjectAlternativeName(
            [x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
        .sign(key, hashes.SHA256())
    )  # fmt: skip
    cert_path, key_path = directory / "relay.pem", directory / "relay.key"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    private = serialization.PrivateFormat.PKCS8
    key_path.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, private, serialization.NoEncryption())
    )
    return cert_path, key_path


def server_tls(cert: Path, key: Path) -> ssl.SSLContext:
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert, key)
    return context


def only(user: str, password: str):  # type: ignore[no-untyped-def]
    def authenticate(server, session, envelope, mechanism, auth_data):  # type: ignore[no-untyped-def]
        ok = auth_data.login == user.encode() and auth_data.password == password.encode()
        return AuthResult(success=ok, handled=False)  # unhandled: the relay answers 535

    return authenticate


def message(to: list[str]):  # type: ignore[no-untyped-def]
    return build_message("rights@press.example", to, "Notice", "Body 正文", sender_name="Press")


def test_starttls_with_the_login_from_the_url(tmp_path: Path) -> None:
    cert, key = certificate(tmp_path)
    options = {"tls_context": server_tls(cert, key), "require_starttls": True,
               "authenticator": only("mailer", "p@ss word"), "auth_require_tls": True}  # fmt: skip
    with smtp_relay(**options) as (box, url):
        settings = Settings.from_env({
            "COPYTRACK_SMTP_URL": url.replace("//", "//mailer:p%40ss%20word@"),
            "COPYTRACK_SMTP_CA_FILE": str(cert),
        })  # fmt: skip
        sent = send_mail(relay_from_settings(settings), message(["abuse@host.example"]))
    assert sent.accepted == ["abuse@host.example"] and sent.answer.startswith("250")
    [mail] = box.mails
    assert mail.message["Message-ID"] == sent.message_id and "正文" in mail.text


def test_a_wrong_password_is_named_without_showing_it(tmp_path: Path) -> None:
    cert, key = certificate(tmp_path)
    options = {"tls_context": server_tls(cert, key), "authenticator": only("mailer", "right")}
    with smtp_relay(**options) as (_, url):
        settings = Settings.from_env({
            "COPYTRACK_SMTP_URL": url, "COPYTRACK_SMTP_USER": "mailer",
            "COPYTRACK_SMTP_PASSWORD": "wrong-password", "COPYTRACK_SMTP_CA_FILE": str(cert),
        })  # fmt: skip
        with pytest.raises(SmtpError, match="refused the login of 'mailer'") as err:
            send_mail(relay_from_settings(settings), message(["a@b.example"]))
    assert "wrong-password" not in str(err.value)
    assert "wrong-password" not in repr(relay_from_settings(settings))


def test_smtps_speaks_tls_from_the_first_byte(tmp_path: Path) -> None:
    cert, key = certificate(tmp_path)
    with smtp_relay(ssl_context=server_tls(cert, key)) as (box, url):
        settings = Settings.from_env({"COPYTRACK_SMTP_URL": url.replace("smtp:", "smtps:"),
                                      "COPYTRACK_SMTP_CA_FILE": str(cert)})  # fmt: skip
        send_mail(relay_from_settings(settings), message(["a@b.example"]))
    assert len(box.mails) == 1


def test_refused_recipients_are_reported_with_the_relays_answer() -> None:
    with smtp_relay() as (box, url):
        box.refuse.add("gone@host.example")
        relay = relay_from_settings(Settings.from_env({"COPYTRACK_SMTP_URL": url}))
        sent = send_mail(relay, message(["gone@host.example", "abuse@host.example"]))
        assert sent.refused == {"gone@host.example": "550 5.1.1 no such mailbox here"}
        with pytest.raises(SmtpError, match="refused every recipient"):
            send_mail(relay, message(["gone@host.example"]))
    assert [m.recipients for m in box.mails] == [["abuse@host.example"]]


def test_no_relay_configured_says_what_to_set() -> None:
    with pytest.raises(SmtpError, match="COPYTRACK_SMTP_URL"):
        relay_from_settings(Settings.from_env({}))
