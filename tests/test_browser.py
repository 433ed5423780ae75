"""The book in a real browser, with the network off: headless Chromium (Debian's `chromium`, driven by Playwright) opens
every page of the built book from file:// and checks that it loads without console errors or failed requests, requests
nothing off the machine, that every link into the book and every image resolves, that KaTeX typeset the maths (and
left no raw `\\(..\\)` or `$..$`), that no code or maths is wider than the window at 1280 px or scrolls
sideways inside itself and no table is wider than the window, and that pages with figures show them. Screenshots of
the landing page and of the report page go to test-output/browser/ (named at the end of the run)."""

import os
import re
import shutil
import subprocess
import time
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest

ROOT = Path(__file__).resolve().parents[1]
SHOTS = ROOT / "test-output" / "browser"
# settings.ini's doc_host + doc_baseurl: a link there is a link into the book
SITE_URL = "https://fedrepro.github.io/fedrepro/"
# `$x$` / `$$x$$` as markdown-it dollarmath reads it (as tests/test_book.py), and the delimiters KaTeX's auto-render
# replaces
DOLLARS = re.compile(r"(?<![\\$])\$\$[^$]+?\$\$|(?<![\\$])\$(?=\S)[^$\n]+?(?<=\S)\$(?!\d)")
RAW_TEX = re.compile(r"\\\(.+?\\\)|\\\[.+?\\\]", re.S)
# Faults known and to be fixed in a chapter this test does not own. Each must still occur (the test says when one is
# gone, so its entry goes too); any other fault fails the test.
WIDE = 'wider than the window at 1280 px: a table'
KNOWN: dict = {}
# what the page gives back: its links, images, maths and the text a reader sees outside code and typeset maths
INSPECT = """() => {
  // code or maths wider than the window or scrolling sideways inside itself, and tables wider than the window
  // (KaTeX's MathML copy is clipped out of sight, and an SVG's shapes are clipped to it)
  const wider = el => { const r = el.getBoundingClientRect(), x = getComputedStyle(el).overflowX;
    if (el.closest('.katex-mathml') || el.ownerSVGElement || !el.closest('pre, code, .math, .katex, table')) {
      return false;
    }
    const scrolls = /auto|scroll/.test(x) && el.scrollWidth > el.clientWidth + 1 && !el.closest('table');
    return r.width > 0 && (r.right > innerWidth + 1 || scrolls); };
  const describe = el => el.closest('table') ? 'a table' :
    `${el.tagName.toLowerCase()}${el.className ? '.' + String(el.className).trim().split(/\\s+/)[0] : ''} ` +
    `(${Math.round(Math.max(el.getBoundingClientRect().right, el.scrollWidth))} px: ` +
    `${JSON.stringify((el.textContent || '').trim().slice(0, 40))})`;
  const skip = el => !el || el.closest('pre, code, script, style, noscript, textarea, .katex, .sourceCode');
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  const text = []; let n;
  while ((n = walker.nextNode())) if (!skip(n.parentElement)) text.push(n.nodeValue);
  return {
    links: [...document.querySelectorAll('a[href]')].map(a => a.href),
    images: [...document.querySelectorAll('img')].map(i => { const r = i.getBoundingClientRect();
      return {src: i.currentSrc || i.src, loaded: i.complete && i.naturalWidth > 0,
              width: r.width, height: r.height}; }),
    math: document.querySelectorAll('span.math').length,
    katex: document.querySelectorAll('.katex').length,
    katexErrors: [...document.querySelectorAll('.katex-error')].map(e => e.textContent.slice(0, 80)),
    text: text.join(' '),
    wide: [...new Set([...document.querySelectorAll('body *')].filter(wider).map(describe))].slice(0, 5),
  };
}"""

sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed (pip install -e '.[dev]')")


def _install_chromium() -> str:
    "Debian's chromium, apt-installed when missing and we are root; otherwise skip, saying why."
    if exe := shutil.which("chromium"):
        return exe
    if os.geteuid() != 0:
        pytest.skip("chromium is not installed and only root can apt-get install it: apt-get install -y chromium")
    if not shutil.which("apt-get"):
        pytest.skip("chromium is not installed and there is no apt-get to install it with (a Debian package: chromium)")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    for cmd in (["apt-get", "update"], ["apt-get", "install", "-y", "chromium"]):
        r = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=1200)
        if r.returncode:
            tail = (r.stderr or r.stdout).strip().splitlines()[-1:] or ["no output"]
            pytest.skip(f"chromium could not be installed: `{' '.join(cmd)}` exited {r.returncode}: {tail[0]}")
    if exe := shutil.which("chromium"):
        return exe
    pytest.skip("apt-get install -y chromium succeeded but no chromium is on the PATH")


class Browser:
    """One headless Chromium with the network off: names resolve nowhere, and any request that is not file:// is
    aborted and recorded."""

    def __init__(self, exe: str):
        self.pw = sync_api.sync_playwright().start()
        self.browser = self.pw.chromium.launch(executable_path=exe, args=["--host-resolver-rules=MAP * ~NOTFOUND"])
        self.context = self.browser.new_context(viewport={"width": 1280, "height": 900})
        self.off_machine: list[str] = []
        self.context.route(re.compile(r"^(?!file:|data:|blob:|about:)"), self._abort)
        self.page = self.context.new_page()
        self.console: list[str] = []
        self.failed: list[str] = []
        self.page.on(
            "console",
            lambda m: (
                m.type == "error" and self.console.append(f"console error: {m.text} ({m.location.get('url', '')})")
            ),
        )
        self.page.on("pageerror", lambda e: self.console.append(f"script error: {e}"))
        self.page.on("requestfailed", lambda r: self.failed.append(f"request failed: {r.url} ({r.failure})"))
        self.page.on(
            "request",
            lambda r: r.url.startswith(("file:", "data:", "blob:", "about:")) or self.off_machine.append(r.url),
        )

    def _abort(self, route):
        self.off_machine.append(route.request.url)
        route.abort()

    def visit(self, page: Path) -> dict:
        """Open `page`, wait until it and its fonts are loaded, and give what INSPECT finds, with the errors and
        requests it caused."""
        self.console.clear(), self.failed.clear(), self.off_machine.clear()
        self.page.goto(page.resolve().as_uri(), wait_until="load")
        self.page.evaluate("document.fonts.ready.then(() => true)")
        found = self.page.evaluate(INSPECT)
        return {**found, "errors": [*self.console, *self.failed], "off_machine": list(dict.fromkeys(self.off_machine))}

    def close(self):
        self.context.close(), self.browser.close(), self.pw.stop()


@pytest.fixture(scope="session")
def browser():
    b = Browser(_install_chromium())
    yield b
    b.close()


_ids: dict[Path, set[str]] = {}


def _ids_of(page: Path) -> set[str]:
    if page not in _ids:
        _ids[page] = set(re.findall(r'\bid="([^"]+)"', page.read_text(encoding="utf-8", errors="replace")))
    return _ids[page]


def problems(page: Path, docs: Path, found: dict) -> list[str]:
    "What is wrong with `page` (a file of the book `docs`), from what the browser `found` on it; [] when nothing is."
    out = [*found["errors"], *(f"requested off the machine: {u}" for u in found["off_machine"])]
    for href in dict.fromkeys(found["links"]):
        url = urlsplit(href)
        if href.startswith(SITE_URL):
            out.append(f"links to the published book, not to its page here: {href}")
        elif url.scheme == "file":
            target = Path(unquote(url.path))
            if target.is_dir():
                target = target / "index.html"
            if docs.resolve() not in target.resolve().parents:
                out.append(f"links out of the book: {href}")
            elif not target.is_file():
                out.append(f"broken link: {href}")
            elif url.fragment and target.suffix == ".html" and unquote(url.fragment) not in _ids_of(target):
                out.append(
                    f"broken anchor: {href} (no id={unquote(url.fragment)!r} in {target.relative_to(docs.resolve())})"
                )
    for img in found["images"]:
        if not img["loaded"]:
            out.append(f"image does not load: {img['src'][:120]}")
    if found["images"] and not any(i["loaded"] and i["width"] > 0 and i["height"] > 0 for i in found["images"]):
        out.append(f"none of its {len(found['images'])} images is visible (a zero rendered box)")
    if found["math"] and not found["katex"]:
        out.append(f"{found['math']} maths spans and no .katex element: KaTeX did not typeset")
    out += [f"KaTeX could not typeset: {e}" for e in found["katexErrors"]]
    out += [f"wider than the window at 1280 px: {w}" for w in found["wide"]]
    for pat in (RAW_TEX, DOLLARS):
        out += [f"raw maths left in the text: {m.group(0)[:80]!r}" for m in pat.finditer(found["text"])]
    return out


def test_checker_catches_what_it_should(browser, tmp_path):
    "The checks can fail: a small synthetic book with one of each fault, and a clean page beside it."
    (tmp_path / "sub").mkdir()
    (tmp_path / "ok.png").write_bytes(_png())
    (tmp_path / "good.html").write_text(
        '<html><body><p id="here">fine <a href="sub/other.html#x">ok</a> <a href="#here">self</a></p>'
        '<img src="ok.png" width="20" height="20"></body></html>'
    )
    (tmp_path / "sub" / "other.html").write_text(
        '<html><body><h1 id="x">other</h1><a href="../good.html">back</a></body></html>'
    )
    (tmp_path / "bad.html").write_text(
        '<html><head><script src="https://cdn.jsdelivr.net/npm/katex@0.16.11/dist/katex.min.js"></script></head><body>'
        '<a href="missing.html">a</a> <a href="sub/other.html#nowhere">b</a> <a href="https://fedrepro.github.io/fedrepro/repro.html">c</a>'
        '<img src="gone.png"> <p>raw $x^2$ and \\(y\\)</p><span class="math inline">\\(z\\)</span>'
        f'<pre style="overflow-x: auto">{"x" * 400}</pre><p><code style="display: block; width: 1500px">wide</code></p>'
        '<table style="width: 1500px"><tr><td>wide</td></tr></table>'
        '<script>console.error("boom")</script></body></html>'
    )
    good = problems(tmp_path / "good.html", tmp_path, browser.visit(tmp_path / "good.html"))
    assert good == [], good
    assert problems(tmp_path / "sub" / "other.html", tmp_path, browser.visit(tmp_path / "sub" / "other.html")) == []
    bad = "\n".join(problems(tmp_path / "bad.html", tmp_path, browser.visit(tmp_path / "bad.html")))
    for fault in (
        "requested off the machine: https://cdn.jsdelivr.net/npm/katex@0.16.11/dist/katex.min.js",
        "broken link: file://",
        "missing.html",
        "broken anchor:",
        "#nowhere",
        "links to the published book",
        "image does not load:",
        "gone.png",
        "console error: boom",
        "raw maths left in the text: '$x^2$'",
        "raw maths left in the text: '\\\\(y\\\\)'",
        "KaTeX did not typeset",
        "wider than the window at 1280 px: pre (",
        "wider than the window at 1280 px: code (1508 px: \"wide\")",
        WIDE,
    ):
        assert fault in bad, f"not caught: {fault}\n{bad}"


def test_a_table_of_column_groups_too_wide_is_cut_into_tables_that_fit(browser, tmp_path):
    """nbs/fit_wide.html on a paper's layout too wide for 1280 px even at 70 %: cut between its column groups into
    tables that fit, each with the row labels, every cell kept once and in order."""
    import pandas as pd

    settings = [f'setting {i}' for i in range(6)]
    columns = pd.MultiIndex.from_product([settings, [f'metric {j}' for j in range(4)]], names=['setting', 'metric'])
    cells = [[f'{k}{i:02d}' * 5 for i in range(24)] for k in range(3)]  # no place to break a line
    df = pd.DataFrame(cells, index=pd.Index(['FedAvg', 'FedProx', 'FedGC'], name='method'), columns=columns)
    script = (ROOT / 'nbs' / 'fit_wide.html').read_text(encoding='utf-8')
    (tmp_path / 'wide.html').write_text(f'<html><body><main>{df.to_html()}</main>{script}</body></html>')
    found = browser.visit(tmp_path / 'wide.html')
    tables = browser.page.evaluate(
        "[...document.querySelectorAll('table')].map(t => [...t.rows].map(r => [...r.cells].map(c => c.textContent)))"
    )
    assert found['wide'] == [] and found['errors'] == [], found
    assert len(tables) > 1 and all(len(t) == len(tables[0]) for t in tables), tables
    assert [g for t in tables for g in t[0][1:]] == settings  # the groups, in order, each whole in one table
    for k, method in enumerate(df.index):
        rows = [t[-3 + k] for t in tables]
        assert all(r[0] == method for r in rows) and [c for r in rows for c in r[1:]] == cells[k], rows


def _png() -> bytes:
    "A 2x2 PNG, written without a library."
    import struct
    import zlib

    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    raw = b"".join(b"\x00" + b"\xff\x00\x00" * 2 for _ in range(2))
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", struct.pack(">IIBBBBB", 2, 2, 8, 2, 0, 0, 0))
        + chunk(b"IDAT", zlib.compress(raw))
        + chunk(b"IEND", b"")
    )


def test_every_page_in_the_browser(site, browser, artifacts):
    pages = sorted(site.rglob("*.html"))
    assert len(pages) > 10, f"only {len(pages)} pages in {site}"
    start, bad, known, with_math, with_figures = time.monotonic(), {}, set(), 0, 0
    for page in pages:
        found, name = browser.visit(page), page.relative_to(site).as_posix()
        with_math += bool(found["katex"])
        with_figures += any(i["width"] > 0 for i in found["images"])
        ps = problems(page, site, found)
        known |= {(name, p) for p in ps if (name, p) in KNOWN}
        if ps := [p for p in ps if (name, p) not in KNOWN]:
            bad[name] = ps
        if page.name in ("index.html", "18_report.html") and page.parent == site:
            SHOTS.mkdir(parents=True, exist_ok=True)
            shot = SHOTS / page.with_suffix(".png").name
            browser.page.screenshot(path=str(shot), full_page=True)
            artifacts.append(f"browser screenshot: {shot}")
    if not (site / "18_report.html").is_file():
        artifacts.append("browser screenshot: no 18_report.html in the book yet, so no report screenshot")
    report = "\n".join(f"{page}: {p}" for page, ps in bad.items() for p in ps[:10])
    assert not bad, f"{len(bad)} of {len(pages)} pages have problems in the browser:\n{report}"
    gone = [f"{page}: {fault}" for page, fault in KNOWN if (page, fault) not in known]
    assert not gone, "fixed, so take them out of KNOWN in tests/test_browser.py: " + "; ".join(gone)
    artifacts += [f"browser: known fault, {page}: {fault} ({why})" for (page, fault), why in KNOWN.items()]
    assert with_math, "no page has maths typeset by KaTeX"
    assert with_figures, "no page shows a figure"
    artifacts.append(
        f"browser: {len(pages)} pages checked in {time.monotonic() - start:.0f} s "
        f"({with_math} with maths typeset, {with_figures} with figures shown), no request left the machine"
    )


def test_search_works_offline(site, browser):
    """The search box of a page opened from disk finds pages (its index comes as search.js where a file:// page
    cannot fetch search.json), and its first result opens a page of the book."""
    browser.visit(site / "14_fedssd.html")
    box = browser.page.locator(".smalldocs-search input").first
    box.click()
    box.type("credibility matrix")
    first = browser.page.locator(".smalldocs-search-results a.search-result").first
    first.wait_for(timeout=10_000)
    assert browser.page.locator(".smalldocs-search-results a.search-result").count() > 1
    first.click()
    browser.page.wait_for_load_state("load")
    target = Path(unquote(urlsplit(browser.page.url).path))
    assert target.is_file() and site.resolve() in target.resolve().parents, browser.page.url
    assert not browser.console and not browser.failed and not browser.off_machine, (
        browser.console,
        browser.failed,
        browser.off_machine,
    )


# The sidebar groups the book by kind (_quarto.yml): these sections, from the top. Each paper's section is named after
# it and holds its chapter, NN_<paper>.html, and its reproduction jobs, repro/<paper>_*.html, in a section of their own.
SECTIONS = [
    "Getting started",
    "The library",
    "Methods and baselines",
    "The papers",
    "Privacy",
    "Costs",
    "Scale-out and Flower",
    "The report",
]
# the sidebar as the page shows it: each entry a page (its link) or a section (its title, open or not, its entries)
SIDEBAR = """() => {
  const walk = ul => [...ul.children].filter(li => li.matches('li.sidebar-item')).map(li => {
    const head = li.querySelector(':scope > .sidebar-item-container'), sub = li.querySelector(':scope > ul');
    if (sub) return {section: head.querySelector('.menu-text').textContent.trim(),
                     open: sub.classList.contains('show'), items: walk(sub)};
    const a = head && head.querySelector('a.sidebar-link');
    return {page: a ? a.href : null, active: !!a && a.classList.contains('active')};
  });
  const top = document.querySelector('#quarto-sidebar .sidebar-menu-container > ul');
  return top ? walk(top) : null;
}"""


def _pages(items: list, site: Path) -> list[str]:
    "The pages under sidebar `items`, sections and all, in order, as paths in the book `site`."
    out = []
    for it in items:
        if "section" in it:
            out += _pages(it["items"], site)
        elif it["page"] and it["page"].startswith("file:"):
            out.append(Path(unquote(urlsplit(it["page"]).path)).resolve().relative_to(site.resolve()).as_posix())
    return out


def _sections(items: list) -> list[dict]:
    "Every section under `items`, nested ones too."
    return [s for it in items if "section" in it for s in (it, *_sections(it["items"]))]


def test_the_sidebar_is_in_sections(site, browser):
    """The sidebar shows the book's sections in order, every page of the book once, and each paper's jobs under that
    paper, beside its chapter; a job's page opens its way there."""
    browser.visit(site / "index.html")
    tree = browser.page.evaluate(SIDEBAR)
    assert tree, "no sidebar on the landing page"
    assert [it.get("section") for it in tree] == SECTIONS, (
        f"the sidebar's top entries are not the sections {SECTIONS}: "
        f"{[it.get('section') or it.get('page') for it in tree]}"
    )
    heads = browser.page.locator(
        "#quarto-sidebar .sidebar-menu-container > ul > li.sidebar-item-section > .sidebar-item-container .menu-text"
    )
    assert [h.inner_text().strip() for h in heads.all() if h.is_visible()] == SECTIONS, (
        "the sections' titles are not all shown"
    )
    listed = _pages(tree, site)
    book = sorted(
        p.relative_to(site).as_posix() for p in site.rglob("*.html") if "site_libs" not in p.relative_to(site).parts
    )
    twice = sorted({p for p in listed if listed.count(p) > 1})
    assert not twice, f"in the sidebar more than once (two globs in _quarto.yml overlap): {twice}"
    assert sorted(listed) == book, (
        f"pages not in the sidebar: {sorted(set(book) - set(listed))}; "
        f"in it but not in the book: {sorted(set(listed) - set(book))}"
    )
    assert "repro/quickstart.html" in _pages(tree[0]["items"], site), "the quickstart is not under Getting started"

    papers = tree[SECTIONS.index("The papers")]["items"]
    jobs: dict[str, list[str]] = {}
    for p in sorted(site.glob("repro/*_*.html")):
        jobs.setdefault(p.stem.split("_")[0], []).append(p.relative_to(site).as_posix())
    assert jobs, "no reproduction jobs in the book"
    for paper, own in jobs.items():
        (chapter,) = [p.name for p in site.glob(f"[0-9]*_{paper}.html")] or [f"no chapter {paper}.html"]
        holding = [s for s in _sections(papers) if chapter in _pages([i for i in s["items"] if "page" in i], site)]
        assert holding, f"{chapter} is not directly in a section under The papers"
        section = holding[-1]
        assert section["section"].lower() == paper, (
            f"{chapter} is in the section {section['section']!r}, not one named after its paper"
        )
        under = _pages(section["items"], site)
        assert set(own) <= set(under), f"{paper}'s jobs not under its section: {sorted(set(own) - set(under))}"
        others = [p for p in under if p.startswith("repro/") and p not in own]
        assert not others, f"other papers' jobs under {section['section']}: {others}"

    job = jobs[next(iter(jobs))][0]  # a job's page: the sections that hold it are open, its own entry marked
    browser.visit(site / job)
    tree = browser.page.evaluate(SIDEBAR)
    path = []

    def find(items: list) -> bool:
        for it in items:
            if "section" in it and find(it["items"]):
                path.append(it)
                return True
            if it.get("active"):
                return True
        return False

    assert find(tree), f"{job}: no entry of its sidebar is marked as the page"
    assert [s["section"] for s in reversed(path)][:1] == ["The papers"] and all(s["open"] for s in path), (
        f"{job}: the sections that hold it are not open: {[(s['section'], s['open']) for s in reversed(path)]}"
    )
    assert browser.page.locator("#quarto-sidebar a.sidebar-link.active").first.is_visible(), (
        f"{job}: its own entry is not shown in the sidebar"
    )


HEADLINES = """() => {
  const t = document.getElementById('headline-glance');
  if (!t) return null;
  const rows = [...t.tBodies[0].rows].map(tr => ({
    paper: tr.cells[0].innerText.trim(),
    chips: [...tr.cells[1].querySelectorAll('a')].map(a => a.innerText.trim()),
  }));
  return {bottom: t.getBoundingClientRect().bottom + window.scrollY, rows};
}"""


def test_the_report_opens_with_each_papers_headline_claims(site, browser):
    "The report's first screen (1280 × 900) has a row per paper: each claim its abstract makes, with its outcome."
    from fedrepro.core import PAPERS
    from fedrepro.repro import OUTCOMES, report_papers

    report = site / "18_report.html"
    if not report.is_file():
        pytest.skip("no 18_report.html in the book yet")
    browser.visit(report)
    glance = browser.page.evaluate(HEADLINES)
    assert glance, "the report has no table of headline claims (id headline-glance)"
    assert glance["bottom"] <= 900, f"the headline claims end at {glance['bottom']:.0f} px, below the first screen"
    papers = report_papers()
    assert [r["paper"] for r in glance["rows"]] == [list(PAPERS[k].methods)[-1] for k in papers]
    for k, row in zip(papers, glance["rows"]):
        keys, outcomes = zip(*(chip.split(" ", 1) for chip in row["chips"]))
        assert keys == PAPERS[k].headline and all(o in OUTCOMES for o in outcomes), row
