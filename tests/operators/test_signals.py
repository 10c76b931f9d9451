"""What a capture says about who runs its site: accounts in its HTML, its redirect, its
address, a distinctive favicon and its template's skeleton (no crawl, no servers)."""

from __future__ import annotations

from tests.operators.web import SITES, OperatorWeb
from tracker.operators.signals import Signal, accounts, page_signals

TRACKERS = b"""<html><head>
<script async src="https://www.googletagmanager.com/gtag/js?id=G-7XK2M9QW1Z"></script>
<script>gtag('config', 'G-7XK2M9QW1Z'); ga('create', 'UA-4521987-3', 'auto');</script>
<script>(function(w,d,s,l,i){})(window,document,'script','dataLayer','GTM-W3N8PK');</script>
<script async src="https://pagead2.googlesyndication.com/pagead/js/adsbygoogle.js?client=ca-pub-8123456789012345"></script>
<script>var _hmt=_hmt||[];(function(){var hm=document.createElement("script");
hm.src="https://hm.baidu.com/hm.js?5f3c1e2d4b6a79880c1d2e3f4a5b6c7d";})();</script>
<script src="https://s4.cnzz.com/z_stat.php?id=1280012345&web_id=1280012345"></script>
<script charset="UTF-8" id="LA_COLLECT" src="//sdk.51.la/js-sdk-pro.min.js"></script>
<script>LA.init({id:"JgKq7xYz2AbC",ck:"JgKq7xYz2AbC"})</script>
</head><body><p>UA-1 is no account, nor is G-1, nor pub-12.</p></body></html>"""


def test_the_accounts_of_every_service_are_read_and_nothing_else():
    assert accounts(TRACKERS) == {
        "ga:UA-4521987", "ga4:G-7XK2M9QW1Z", "gtm:GTM-W3N8PK",
        "adsense:pub-8123456789012345", "baidu:5f3c1e2d4b6a79880c1d2e3f4a5b6c7d",
        "cnzz:1280012345", "51la:JgKq7xYz2AbC",
    }  # fmt: skip
    assert accounts(b"<script src='//js.users.51.la/21048888.js'></script>") == {"51la:21048888"}


def signals(host: str, path: str, **page: object) -> set[Signal]:
    web = OperatorWeb(ports={s.host: 80 for s in SITES})
    site = next(s for s in SITES if s.host == host)
    html = web.page(site, path)[2].encode()
    return set(page_signals({"url": f"http://{host}{path}", **page}, html))


def test_one_template_gives_one_skeleton_whatever_the_article_and_another_differs():
    def template(host: str, path: str) -> str:
        return next(s.value for s in signals(host, path) if s.kind == "template")

    assert template("alpha.test", "/a/0.html") == template("alpha.test", "/a/1.html")
    assert template("alpha.test", "/a/0.html") == template("beta.test", "/a/2.html")
    assert template("gamma.test", "/a/3.html") != template("alpha.test", "/a/0.html")
    assert template("omega.test", "/a/4.html") != template("gamma.test", "/a/3.html")
    # A bare page has no template worth a tie.
    bare = page_signals({"url": "http://x.test/"}, b"<html><body><p>text</p></body></html>")
    assert not [s for s in bare if s.kind == "template"]


def test_favicons_redirects_and_addresses():
    alpha = signals("alpha.test", "/m/0.html", ip="127.0.0.2",
                    redirected_from=["http://delta.test/a/0.html"])  # fmt: skip
    assert {Signal("favicon", "/static/op7/fav.ico"), Signal("redirect", "alpha.test"),
            Signal("ip", "127.0.0.2")} <= alpha  # fmt: skip
    gamma = signals("gamma.test", "/a/3.html")  # its icon is /favicon.ico: everyone's
    assert not [s for s in gamma if s.kind in ("favicon", "redirect", "ip")]
