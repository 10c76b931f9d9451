"""Words the admin shows that come from data, not from its templates: statuses, dismiss
reasons, roles, run states and triggers, crawl outcomes and reasons, what adding a work did,
kinds of differences, notice stages. Marked here (``N_``) so the extraction puts them in
the catalogs; the templates translate them where they show them (``_(label)``), and a test
checks that this list keeps up with the tracker's."""

from __future__ import annotations

from .i18n import N_

WORDS: tuple[str, ...] = (
    # tracker.enforcement: timeline steps and outcomes, alert events, delivery states,
    # where a notice's proposed recipients come from
    N_("Found"), N_("Reviewed"), N_("Alerted"), N_("Notice not sent"),
    N_("Delisting requested"), N_("Delisting re-checked"), N_("Re-checked"),
    N_("Back to new"), N_("Delivered"), N_("Waiting to be retried"), N_("Recorded by hand"),
    N_("E-mailed"), N_("Requested"), N_("Delisted"), N_("Still listed"),
    N_("New findings"), N_("Confirmed findings"), N_("Notices past their deadline"),
    N_("Copies still there after the deadline"), N_("Crawl runs that failed"),
    N_("Registrar's abuse contact (RDAP)"), N_("Hosting network's abuse contact (RDAP)"),
    N_("The site's own contact"), N_("Added by the reviewer"),
    # tracker.findings.status.LABELS
    N_("New"), N_("Confirmed"), N_("Notice sent"), N_("Removed"), N_("Dismissed"),
    N_("Licensed"),
    # tracker.findings.workflow.DISMISS_REASONS
    N_("False positive"), N_("Licensed or permitted"), N_("Quotation or fair use"), N_("Other"),
    # tracker.accounts.users.ROLES
    N_("viewer"), N_("reviewer"), N_("admin"),
    # run states (tracker.campaigns.runs) and triggers
    N_("queued"), N_("starting"), N_("running"), N_("scanning"), N_("finished"), N_("failed"),
    N_("cancelled"),
    N_("manual"), N_("schedule"),
    # outcomes of a crawled URL and a run's figures (admin.campaigns.figures)
    N_("skipped"), N_("Skipped"), N_("Failed"), N_("fetched"), N_("changed"),
    N_("new findings"),
    # what adding a work did (tracker.masters.library.AddResult.status)
    N_("added"), N_("unchanged"), N_("updated"), N_("duplicate"),
    # kinds of work the library's metadata commonly names (the testbed's too)
    N_("novel"), N_("news"), N_("news-like"), N_("essay"), N_("article"), N_("chapter"),
    N_("book"), N_("poem"),
    # tracker.findings.differences.KIND_LABELS
    N_("Synonym"), N_("Traditional form"), N_("Homophone"), N_("Changed"),
    N_("Added on the page"), N_("Left out of the copy"),
    # tracker.findings.deadlines: STAGE_LABELS and OUTCOME_LABELS
    N_("Awaiting the deadline"), N_("Deadline passed, not re-checked"),
    N_("Still there after the deadline"), N_("Removed after a notice"), N_("Still there"),
    N_("Could not be fetched"),
    # tracker.campaigns.outcomes.run_health: why a run is green, amber or red
    N_("the run failed"), N_("fetched nothing: %(num)s × %(reason)s"),
    N_("fetched nothing: the seeds gave no page and no error"),
    N_("mostly failed: %(failed)s URLs failed, %(fetched)s fetched; main reason "
       "%(num)s × %(reason)s"),
    N_("%(fetched)s fetched; %(failed)s failed"), N_("%(fetched)s fetched"),
    N_("stopped by %(by)s at %(at)s; %(fetched)s fetched"),
    N_("%(fetched)s fetched; %(failed)s failed, and %(expected)s as expected (%(why)s)"),
    N_("%(fetched)s fetched; %(expected)s failed as expected (%(why)s)"),
    # copytrack.commands.demo.AS_BUILT: why the demo's run expects its failures
    N_("links to pages the test web does not have, and its deliberate server errors"),
    N_("the search engine failed: %(error)s"),
    N_("nothing searched: today's query budget is spent (%(over_budget)s queries wait "
       "for tomorrow)"),
    N_("no new site found: %(asked)s queries asked, %(cached)s answered from the cache, "
       "%(known)s results on sites already crawled or licensed"),
    # tracker.campaigns.outcomes.REASONS
    N_("the host name does not resolve (DNS)"),
    N_("too slow: no answer within the download timeout"),
    N_("the server refused the connection"),
    N_("the compressed body is corrupt"),
    N_("refused by the site's robots.txt"),
    N_("the host is on a private network (not allowed)"),
    N_("redirected outside the campaign's domains"),
    N_("over the size cap (DOWNLOAD_MAXSIZE, 3 MB)"),
    N_("over the size cap once decompressed"),
    N_("too many redirects"),
    N_("headers over the cap (COPYTRACK_MAX_HEADER_BYTES, COPYTRACK_MAX_HEADERS)"),
    N_("headers not all sent within COPYTRACK_HEADER_SECONDS"),
    N_("redirects to itself (or back along its own redirects)"),
    N_("links over the per-page limit, not followed"),
    N_("links that are not usable URLs"),
    N_("a sitemap that cannot be read"),
    N_("fetched recently: not fetched again (the campaign's refetch days)"),
    N_("not a web page (its media type)"),
    N_("an empty page"),
    N_("binary content, not text"),
    N_("text that does not decode"),
    N_("no article text found on the page"),
    N_(
        "no text in the page as served: its scripts may write it (turn on the campaign's "
        "rendering in a browser)"
    ),
    N_("fetched, but rendering it in the browser failed or ran out of time"),
    N_("extracting its text took too long"),
    N_("dropped by the crawler"),
    N_("a book download that cannot be read (damaged, or over the size cap)"),
    N_("an image over COPYTRACK_OCR_MAX_BYTES, not read"),
    N_(
        "an image with more pixels than COPYTRACK_OCR_MAX_PIXELS (a decompression bomb?), "
        "not read"
    ),
    N_("an image OCR gave up on after COPYTRACK_OCR_CPU_SECONDS"),
    N_("an image that cannot be decoded"),
    N_("an image Tesseract failed on (is it installed?)"),
    N_("images over the per-page limit (COPYTRACK_OCR_IMAGES), not read"),
    N_(
        "fetched, but could not be stored (a server down or its disk full): the run failed; "
        "run it again once the servers are back"
    ),
)  # fmt: skip
