"""What the tracker, the crawler and the system say in English, in the reader's language.

Errors are raised below the admin (tracker, crawler, the OS) as English sentences that name
their input ("'127.0.0.1:8080' is not a domain name"); the layers below cannot import the
admin's catalogs. The admin knows their forms: each is a template here whose ``{field}``
parts match the input. `said` finds the template a message fits, translates it, and puts
the input back as it was; a field holding a sentence of its own (a reason, an OS error) is
translated the same way. A message none fits is shown as it is, and a message headed by
what it is about ("book.txt: …", "https://…: …") keeps its head and has its rest said.
"""

from __future__ import annotations

import re
from functools import lru_cache

from .i18n import N_, gettext

#: Fields holding a sentence, not the input: said in turn.
SENTENCE_FIELDS = frozenset({"reason", "error", "strerror", "phrase", "kind", "what"})

TEMPLATES: tuple[str, ...] = (
    # fetching a page (crawler.fetch, tracker.core.netguard)
    N_("only http and https URLs can be fetched"),
    N_("cannot fetch: {reason}"),
    N_("cannot fetch: not an HTTP answer ({detail})"),
    N_("HTTP {code} {phrase}"),
    N_("gone: HTTP {code} {phrase}"),
    N_("{host} does not resolve ({error})"),
    N_("{host} does not resolve (no addresses)"),
    N_("[Errno {errno}] {strerror}"),
    N_("{host} is a {kind} address; set COPYTRACK_ALLOW_PRIVATE_NETWORKS=1 to crawl private "
       "networks"),
    N_("{host} has no host name"),
    N_("larger than {size} MB (the crawler's DOWNLOAD_MAXSIZE): not an article page; save "
       "the article's text and check the file instead"),
    N_("still downloading after {seconds} s (DOWNLOAD_TIMEOUT); try again later, or save the "
       "page and check the file"),
    N_("no article text found ({reason})"),
    # files and lines of the library (tracker.masters.loaders, tracker.core.jsonl, extractor)
    N_("invalid JSON ({error} at column {column})"),
    N_("{error}: line {line} column {column} (char {char})"),
    N_("expected a JSON object, got {type}"),
    N_('no "text": every line needs a non-empty "text" string'),
    N_("not UTF-8 ({error} at byte {start}); re-save the file as UTF-8"),
    N_("JSON nested too deeply to read"),
    N_("larger than {size} MB; split it"),
    N_("no text found in the file"),
    N_("no such file or directory"),
    N_("not UTF-8 text (invalid byte at offset {offset}); convert the file to UTF-8"),
    N_("binary file (contains NUL bytes), not text; a UTF-16 text needs its byte-order mark, "
       "or convert it to UTF-8"),
    N_("unsupported file type: use {suffixes}"),
    # Word, EPUB and PDF masters, book downloads (extractor.books)
    N_("a damaged {format} file ({error})"),
    N_("not a book download ({what})"),
    N_("the archive names {name} but does not hold it"),
    N_("a ZIP without a .txt or .epub file in it"),
    N_("an EPUB without a package document (container.xml)"),
    N_("an EPUB without text in its spine"),
    N_("a DOCX without text"),
    N_("a PDF that cannot be read ({error})"),
    N_("a PDF without text (scanned images?)"),
    N_("a PDF past pypdf's bounds on page {page} ({error}): a PDF bomb?"),
    N_("inflates past {size} MB: not a book (a compression bomb?)"),
    # after "a PDF that cannot be read": a name is any words
    N_("{name} cannot be read ({error})"),
    # works (tracker.masters.library, tracker.scanning.library_edits)
    N_("text too short to fingerprint: {letters} letters, copytrack needs at least {granule} "
       "(Chinese characters or Latin letters)"),
    N_("empty text: nothing to register"),
    N_("empty text: give the work's text"),
    N_("{chars} characters: one work holds at most {most}; add a text this long as a new "
       "work, which is split into chapters"),
    N_("no work #{number}"),
    # campaigns (tracker.campaigns.definition)
    N_("name: {name} is not a valid name (1-64 letters, 汉字 too, digits, '_', '.', '-', "
       "starting with a letter or digit)"),
    N_("seeds: {url} is not an http(s) URL with a host"),
    N_("seeds: give at least one seed URL (page, sitemap or feed)"),
    N_("seeds: cannot resolve {url}: {error}"),
    N_("seeds: {url} refused: {error}"),
    N_("kind: {kind_given} is not one of {kinds}"),
    # what the tracker writes in a finding's history (tracker.findings)
    N_("{lang} notice sent to {recipient}, deadline {date}"),
    N_("re-checked after the notice: the page still copies this work"),
    N_("the page no longer copies this work"),
    N_("the page copies this work again"),
    N_("{domain} is a licensed domain"),
    N_("{domain} is no longer licensed"),
    # an account (tracker.accounts.users)
    N_("{value} is not a time zone: give an IANA name such as Asia/Shanghai"),
    # the API's responses as its reference page lists them (admin.routes.api_base)
    N_("Successful Response"), N_("The report"),
    N_("No token, or one that is unknown, expired or revoked"),
    N_("The token's role may not do this (or a session write lacks X-CSRF-Token)"),
    N_("No such finding or campaign"), N_("No such work"),
    N_("The current state does not allow it"),
    N_("The body is larger than the operation takes, or holds more JSON values"),
    N_("The request does not match this document"),
    N_("A server does not answer or the index is not ready: retry after Retry-After"),
    N_("The body is over {size} MB, or holds more than {what}"),
    N_("A filter value the server cannot use, or a body that is not JSON"),
    N_("No run of the campaign is under way"), N_("The body is not JSON"),
    N_("The campaign is running already"),
    N_("The finding is not confirmed, or Settings name no notice sender"),
    N_("The finding is not confirmed, the deadline has passed, or Settings name no notice "
       "sender"),
    N_("The request does not match this document, or no work went in"),
    N_("The request does not match this document, or the text cannot be a work's"),
    N_("The workflow does not allow this change"),
    N_("A subscription of that name exists: delete it first or choose another name"),
    N_("No subscription of that name"), N_("a subscription"),
    N_("a notice"), N_("a status, a note and a reason"), N_("a text to check"),
    N_("1,000 works"), N_("a title, an author and a text"),
    # the API reference's descriptions with a figure in them (admin.routes.api*)
    N_("The body: at most {size} MB of JSON."),
    N_("At least {num} Chinese characters or ASCII letters."),
    N_("The removal deadline it would get: {days} working days"),
    N_("The day the copy should be gone by (a day to come; default {days} working days from "
       "now)"),
    # licensed domains (tracker.findings.licensing)
    N_("{value} is not a domain name"),
    N_("{value} is not a domain name (e.g. partner.example.com)"),
)  # fmt: skip

#: Sentences that fill the templates' sentence fields: the OS's and the JSON parser's
#: words, HTTP's reason phrases, kinds of address.
WORDS: tuple[str, ...] = (
    N_("Connection refused"), N_("Connection reset by peer"), N_("Connection timed out"),
    N_("timed out"), N_("Network is unreachable"), N_("No route to host"),
    N_("Name or service not known"), N_("Temporary failure in name resolution"),
    N_("No address associated with hostname"), N_("nodename nor servname provided, or not known"),
    N_("Expecting value"), N_("Expecting property name enclosed in double quotes"),
    N_("Expecting ',' delimiter"), N_("Expecting ':' delimiter"), N_("Extra data"),
    N_("Unterminated string starting at"), N_("Invalid control character at"),
    N_("File is not a zip file"), N_("no media type"),
    N_("invalid start byte"), N_("invalid continuation byte"), N_("unexpected end of data"),
    N_("Bad Request"), N_("Unauthorized"), N_("Forbidden"), N_("Not Found"),
    N_("Method Not Allowed"), N_("Request Timeout"), N_("Gone"), N_("Too Many Requests"),
    N_("Internal Server Error"), N_("Bad Gateway"), N_("Service Unavailable"),
    N_("Gateway Timeout"), N_("Unprocessable Content"), N_("Content Too Large"),
    N_("loopback"), N_("link-local"), N_("unspecified"), N_("multicast"), N_("private"),
    N_("reserved"), N_("non-global"), N_("documentation"),
)  # fmt: skip


@lru_cache(maxsize=len(TEMPLATES))
def _pattern(template: str) -> re.Pattern[str]:
    """A template as a regular expression whose groups are its fields. An input field
    holds no ": " (a URL, a host, a name do not), so "cannot fetch: host does not resolve"
    is a fetch that failed, not a host named "cannot fetch: host"."""
    parts = re.split(r"\{([a-z_]+)\}", template)
    return re.compile(
        "".join(
            re.escape(part)
            if n % 2 == 0
            else f"(?P<{part}>.+?)"
            if part in SENTENCE_FIELDS
            else f"(?P<{part}>(?:(?!: ).)+?)"
            for n, part in enumerate(parts)
        ),
        re.DOTALL,
    )


def _fitted(message: str) -> str | None:
    for template in TEMPLATES:
        found = _pattern(template).fullmatch(message)
        if found is None:
            continue
        fields = {
            name: said(value) if name in SENTENCE_FIELDS else value
            for name, value in found.groupdict().items()
        }
        return gettext(template).format(**fields)
    translated = gettext(message)
    return translated if translated != message else None


def said(message: object) -> str:
    """``message`` in the request's language: its template's translation with the input
    kept, else the message as it is (in its head ``something: `` kept, the rest said)."""
    text = str(message)
    if not text:
        return text
    fitted = _fitted(text)
    if fitted is not None:
        return fitted
    # "file.txt:3: invalid JSON (…)", "https://host/page: cannot fetch: …"
    for head in re.finditer(r": ", text):
        rest = _fitted(text[head.end() :])
        if rest is not None:
            return text[: head.end()] + rest
    return text
