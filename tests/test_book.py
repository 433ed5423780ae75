"The book builds offline (nbdev processing + smalldocs): a page per notebook, in the sidebar, with maths and a figure."

import ast
import json
import shutil
import re
from pathlib import Path

import pytest

try:
    import smalldocs  # noqa: F401  (fedrepro.book renders with it)
except ImportError:
    pytest.skip(
        "smalldocs is not importable (pip install -e '.[dev]'); the offline book cannot be built",
        allow_module_level=True,
    )

ROOT = Path(__file__).resolve().parents[1]
NBS = ROOT / "nbs"
# `$x$` or `$$x$$` as smalldocs (markdown-it dollarmath) reads it: no space inside the dollars, no digit after the
# closing one
MATH = re.compile(r"(?<![\\$])\$\$[^$]+?\$\$|(?<![\\$])\$(?=\S)[^$\n]+?(?<=\S)\$(?!\d)")


def chapters() -> list[Path]:
    "The notebooks of the book, as nbdev finds them: nbs/*.ipynb and nbs/repro/*.ipynb, without _ or . files."
    nbs = sorted(NBS.glob("*.ipynb")) + sorted(NBS.glob("repro/*.ipynb"))
    return [p for p in nbs if not p.name.startswith(("_", "."))]


def page_of(nb: Path) -> Path:
    "The page smalldocs writes for a notebook: nbs/00_core.ipynb -> _docs/00_core.html."
    return nb.relative_to(NBS).with_suffix(".html")


def has_math(nb: Path) -> bool:
    "Whether a markdown cell nbdev keeps has maths (nbdev turns the first `# title` cell into front matter)."
    cells = [c for c in json.loads(nb.read_text(encoding="utf-8"))["cells"] if c["cell_type"] == "markdown"]
    srcs = ["".join(c["source"]) for c in cells]
    title = next((i for i, s in enumerate(srcs) if re.search(r"^#\s+\S", s, re.M)), None)
    return any(MATH.search(s) for i, s in enumerate(srcs) if i != title)


def test_every_chapter_has_a_page(site):
    missing = [str(page_of(nb)) for nb in chapters() if not (site / page_of(nb)).is_file()]
    assert not missing, f"no page in _docs for: {missing}"
    assert (site / "index.html").is_file()


def test_every_chapter_is_in_the_sidebar(site):
    index = (site / "index.html").read_text(encoding="utf-8")
    sidebar = index[index.find('id="quarto-sidebar"') :]
    missing = [str(page_of(nb)) for nb in chapters() if f'href="{page_of(nb).as_posix()}"' not in sidebar]
    assert not missing, f"not in the sidebar (check the globs in _quarto.yml): {missing}"
    if any(nb.parent.name == "repro" for nb in chapters()):
        assert (
            "Reproduction jobs" in sidebar
        )  # each paper's jobs in a section of their own (tests/test_browser.py checks where)


def test_the_readmes_links_are_pages_of_the_book(site):
    "README.md, the landing page exported, links chapters as nbs/NAME.ipynb: each is a page of the book."
    links = re.findall(r"\]\((?![a-z]+:)([^)\s#]+)\)", (ROOT / "README.md").read_text(encoding="utf-8"))
    chapters_linked = [link for link in links if link.startswith("nbs/") and link.endswith(".ipynb")]
    assert chapters_linked, "the README links no chapter"
    assert [link for link in chapters_linked if not (site / page_of(ROOT / link)).is_file()] == []
    assert [link for link in links if not (ROOT / link).exists()] == [], "a README link names no file of the project"


def test_math_is_typeset(site):
    with_math = [nb for nb in chapters() if has_math(nb)]
    assert with_math, "no notebook in nbs/ has $...$ or $$...$$ maths in a markdown cell"
    for nb in with_math:
        html = (site / page_of(nb)).read_text(encoding="utf-8")
        # smalldocs writes maths as Pandoc does for KaTeX: <span class="math inline">\(..\)</span>,
        # <span class="math display">\[..\]</span>
        assert re.search(r'<span class="math (inline|display)">\\[(\[]', html), f"{page_of(nb)}: no maths markup"
        # and loads KaTeX with its auto-render, which typesets those spans in the browser: the copy in the book, not a
        # CDN
        up = "../" * (len(page_of(nb).parts) - 1)
        for asset in ("katex.min.css", "katex.min.js", "contrib/auto-render.min.js"):
            assert re.search(rf'(href|src)="{re.escape(up)}site_libs/katex/{re.escape(asset)}"', html), (
                f"{page_of(nb)}: KaTeX {asset} not loaded from site_libs/katex/"
            )
            assert (site / "site_libs" / "katex" / asset).is_file(), f"site_libs/katex/{asset} is missing"
        assert not re.search(r'(src|href)="https?://cdn\.jsdelivr\.net/', html), (
            f"{page_of(nb)}: still loads something from cdn.jsdelivr.net"
        )


def test_nothing_is_loaded_from_the_network(site):
    """Every script, stylesheet, font, image and frame is in the book (the build checks it too; this keeps the check
    from being dropped)."""
    from fedrepro.book import remote_assets

    assert remote_assets(site) == []


def test_a_figure_is_shown(site):
    for page in sorted(site.rglob("*.html")):
        html = page.read_text(encoding="utf-8")
        if re.search(r'<img\b[^>]*\bsrc="data:image/png;base64,[A-Za-z0-9+/]{100}', html):
            return
        for src in re.findall(r'<img\b[^>]*\bsrc="([^":]+\.png)"', html):
            if (page.parent / src).is_file():
                return
    pytest.fail("no page shows a PNG figure (a saved matplotlib output, or a .png file beside the page)")


def test_prose_is_prose_not_headings(site):
    """One title per page: markdown cells that still carry a script's '# ' line prefixes would render every line as a
    heading."""
    for nb in chapters():
        html = (site / page_of(nb)).read_text(encoding="utf-8")
        main = html[html.find("<main") :]
        assert len(re.findall(r"<h1\b", main)) <= 1, f"{page_of(nb)}: several <h1> in the page body"


def test_the_report_is_judged_on_the_results_it_is_given(tmp_path):
    """`fedrepro book --results DIR` first executes the report chapter on DIR: an artefact found there is read from
    there, at its scale, which the page's first output says, with the verdicts that evidence changes; papermill's
    parameters cell is not shown."""
    from fedrepro.book import execute_report
    from fedrepro.repro import committed_results

    for name in ("fedgc_table3.csv", "fedgc_table3_seeds.csv"):
        shutil.copy(committed_results() / name, tmp_path / name)
    table = (tmp_path / "fedgc_table3.csv").read_text(encoding="utf-8")
    (tmp_path / "fedgc_table3.csv").write_text(table.replace(",mini,", ",smoke,"), encoding="utf-8")
    nb = json.loads(execute_report(ROOT, tmp_path).read_text(encoding="utf-8"))
    shown = [o for c in nb["cells"] for o in c.get("outputs", []) if o.get("output_type") != "stream"]
    callout = "".join(shown[0].get("data", {}).get("text/html", ""))  # the page's first output says where from
    assert 'id="evidence-callout"' in callout, callout[:500]
    assert "this run at smoke: 1 artefact" in callout and "committed mini run at mini: " in callout, callout[:500]
    assert "differ from those on the committed runs" in callout or "Every verdict is as on" in callout, callout
    (injected,) = [c for c in nb["cells"] if "injected-parameters" in c["metadata"].get("tags", [])]
    assert "".join(injected["source"]).startswith("#| echo: false"), "the page would show papermill's parameters"


def calls_when_run(tree: ast.AST) -> list[str]:
    "The names of what a cell calls when it runs, not inside the functions or lambdas it only defines."
    if isinstance(tree, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
        return []
    here = [ast.unparse(tree.func)] if isinstance(tree, ast.Call) else []
    return here + [name for child in ast.iter_child_nodes(tree) for name in calls_when_run(child)]


def test_building_the_book_runs_no_chapters_checks():
    """In a notebook that exports or shows docs, nbdev's processing executes the exports, the `show_doc` cells and every
    cell with an import in it. A cell that imports and then checks would run its checks again at each `fedrepro book`
    (the Flower chapter's simulation took 13 s of it): keep imports in cells of their own, as nbdev's FAQ advises."""
    export = {'export', 'exports', 'exporti', 'exec_doc'}
    mixed = []
    for nb in chapters():
        text = nb.read_text(encoding='utf-8')
        if not re.search(r'#\|\s*export|show_doc\(', text):
            continue  # nbdev executes nothing in it
        for cell in json.loads(text)['cells']:
            source = ''.join(cell['source'])
            directives = {line[2:].split(':')[0].strip() for line in source.splitlines() if line.startswith('#|')}
            if cell['cell_type'] != 'code' or directives & export or re.search(r'^#\|\s*eval:\s*false', source, re.M):
                continue
            tree = ast.parse('\n'.join(l for l in source.splitlines() if not l.lstrip().startswith('%')))
            if any(isinstance(n, (ast.Import, ast.ImportFrom)) for n in ast.walk(tree)):
                mixed += [f'{nb.name}: {source[:60]!r}'] if set(calls_when_run(tree)) - {'show_doc'} else []
    assert not mixed, mixed
