"""The admin in English and 简体中文: gettext catalogs, one language per request.

Templates mark their text with ``_()`` (Jinja2's i18n extension) and Python code with
`gettext`; Babel extracts both (``babel.cfg``) into ``admin/locale/messages.pot`` and each
language's catalog, ``admin/locale/LANG/LC_MESSAGES/messages.po``, is read once at start
(compiled in memory: no binary .mo files to keep in step). A request's language is the
one the reviewer chose with the switch (a cookie), else the browser's first language the
admin has (Accept-Language), else English.
"""

from __future__ import annotations

import io
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from functools import lru_cache
from pathlib import Path

from babel import Locale, UnknownLocaleError
from babel.messages.mofile import write_mo
from babel.messages.pofile import read_po
from babel.support import NullTranslations, Translations
from starlette.requests import HTTPConnection
from starlette.types import ASGIApp, Receive, Scope, Send

LOCALE_DIR = Path(__file__).resolve().parent / "locale"
#: The admin's languages, each named in itself (the switch shows them so).
LANGUAGES = {"en": "English", "zh_CN": "简体中文"}
DEFAULT_LANGUAGE = "en"
COOKIE = "copytrack_lang"
#: HTML's name of each language (the pages' lang attribute).
HTML_LANG = {"en": "en", "zh_CN": "zh-CN"}

_language: ContextVar[str] = ContextVar("copytrack_language", default=DEFAULT_LANGUAGE)


@lru_cache(maxsize=len(LANGUAGES))
def translations(language: str) -> NullTranslations:
    """The catalog of ``language`` (English, the source language, has none)."""
    path = LOCALE_DIR / language / "LC_MESSAGES" / "messages.po"
    if language == DEFAULT_LANGUAGE or not path.exists():
        return NullTranslations()
    with path.open("rb") as po:
        catalog = read_po(po, locale=language)
    compiled = io.BytesIO()
    write_mo(compiled, catalog)
    compiled.seek(0)
    return Translations(fp=compiled)


def _from_header(header: str) -> str | None:
    """The first language of an Accept-Language header the admin has (zh, zh-CN, zh-Hans,
    zh-SG … read as 简体中文)."""
    ranked = []
    for n, part in enumerate(header.split(",")):
        tag, _, quality = part.strip().partition(";q=")
        try:
            weight = float(quality) if quality else 1.0
        except ValueError:
            continue
        ranked.append((-weight, n, tag.strip()))
    for _, _, tag in sorted(ranked):
        try:
            locale = Locale.parse(tag, sep="-") if tag and tag != "*" else None
        except (ValueError, UnknownLocaleError):
            continue
        if locale is None:
            continue
        if locale.language == "en":
            return "en"
        if locale.language == "zh" and locale.script != "Hant" and locale.territory not in (
            "TW", "HK", "MO"
        ):  # fmt: skip
            return "zh_CN"
    return None


def choose_language(connection: HTTPConnection) -> str:
    """The language of a request: the reviewer's choice, the browser's, or English."""
    chosen = connection.cookies.get(COOKIE)
    if chosen in LANGUAGES:
        return chosen
    return _from_header(connection.headers.get("accept-language", "")) or DEFAULT_LANGUAGE


def current_language() -> str:
    return _language.get()


@contextmanager
def language(name: str) -> Iterator[None]:
    """Speak ``name`` in this context (a request, a PDF rendered for one)."""
    token = _language.set(name if name in LANGUAGES else DEFAULT_LANGUAGE)
    try:
        yield
    finally:
        _language.reset(token)


def gettext(message: str) -> str:
    return translations(_language.get()).gettext(message)


def ngettext(singular: str, plural: str, n: int) -> str:
    return translations(_language.get()).ngettext(singular, plural, n)


def pgettext(context: str, message: str) -> str:
    """A message whose translation depends on where it stands ("Works": the library, or
    a count of works)."""
    # Babel annotates it `str | object`; it returns the message when it has no translation.
    return translations(_language.get()).pgettext(context, message)  # type: ignore[return-value]


def npgettext(context: str, singular: str, plural: str, n: int) -> str:
    return translations(_language.get()).npgettext(context, singular, plural, n)


#: The usual short name, for Python code that marks text (``_("Saved.")``).
_ = gettext


def N_(message: str) -> str:
    """Marks text to translate where it is shown, not here (labels in tables)."""
    return message


class LanguageMiddleware:
    """Sets each HTTP request's language before the app runs, so pages, messages and
    PDFs made for it speak it (the context is copied into the threads that serve it)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        with language(choose_language(HTTPConnection(scope))):
            await self.app(scope, receive, send)
