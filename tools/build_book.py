"""Build the book: nbdev-process `nbs/` into `_proc/`, put `_quarto.yml` beside it, render, move the site to `_docs/`.

    python tools/build_book.py            # offline, with smalldocs (pure Python, no Quarto needed)
    python tools/build_book.py --quarto   # the same, rendered by Quarto instead
    python tools/build_book.py --results repro_out   # reproduction pages show the jobs just run into repro_out/

It calls nbdev's `proc_nbs` rather than the `nbdev_proc_nbs` command, because that command first tries to
install Quarto (curl + sudo) when it is missing, and writes `nbs/_quarto.yml` and `nbs/nbdev.yml`.
"""

import argparse
import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PROC, DOCS, CONFIG = ROOT / "_proc", ROOT / "_docs", ROOT / "_quarto.yml"


def fail(msg: str) -> None:
    sys.exit(f"build_book: {msg}")


def process() -> None:
    "Process every notebook of `nbs/` into `_proc/` with nbdev's docs processors (front matter, show_doc, #| hide, ...)."
    from nbdev.serve import proc_nbs

    shutil.rmtree(PROC, ignore_errors=True)  # from scratch, so that deleted notebooks do not linger
    try:
        proc_nbs(force=True)
    except Exception as e:  # e.g. an exported or import cell that fails when nbdev runs it for show_doc
        fail(f"nbdev could not process the notebooks: {type(e).__name__}: {e}")
    shutil.copy(CONFIG, PROC / "_quarto.yml")  # replaces any nbs/_quarto.yml that proc_nbs copied


def use_results(results: Path) -> None:
    "Show the reproduction notebooks as executed in `results` (by `fedrepro reproduce`) instead of as committed."
    import nbdev.serve_drv
    from nbdev.serve import FilterDefaults

    for nb in sorted(results.glob("*.ipynb")):
        if (ROOT / "nbs" / "repro" / nb.name).exists():
            nbdev.serve_drv.main((nb, PROC / "repro" / nb.name, FilterDefaults))
            print(f"build_book: repro/{nb.name} shows the results in {results}")


def render_quarto() -> None:
    if not shutil.which("quarto"):
        fail("quarto is not on PATH; run without --quarto to render with smalldocs")
    if rc := subprocess.run(["quarto", "render", "--no-cache"], cwd=PROC).returncode:
        fail(f"quarto render failed (exit code {rc})")


def render_smalldocs() -> None:
    try:
        from smalldocs.config import BuildError, ConfigError
        from smalldocs.site import build
    except ImportError:
        fail("smalldocs is not installed: pip install -e '.[dev]'")
    try:
        site = build(PROC, quiet=True)
    except (ConfigError, BuildError, OSError, ValueError) as e:
        fail(f"smalldocs render failed: {e}")
    for w in site.warnings:  # smalldocs names a page after its source and ignores the output-file that nbdev adds
        if not w.endswith("output-file is not read by smalldocs"):
            print(f"smalldocs warning: {w}", file=sys.stderr)
    print(f"build_book: smalldocs rendered {len(site.pages)} page(s)")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quarto", action="store_true", help="render with Quarto instead of smalldocs")
    p.add_argument("--results", type=Path, help="a `fedrepro reproduce --out` folder whose executed notebooks the book shows")
    args = p.parse_args()
    results = args.results.resolve() if args.results else None  # relative to where the user stands
    os.chdir(ROOT)  # nbdev finds settings.ini from the working folder
    if not CONFIG.is_file():
        fail(f"{CONFIG} is missing")
    process()
    if results:
        use_results(results)
    render_quarto() if args.quarto else render_smalldocs()
    shutil.rmtree(DOCS, ignore_errors=True)
    shutil.move(PROC / "_docs", DOCS)  # output-dir is _docs inside _proc, as with nbdev_docs
    if not (DOCS / "index.html").is_file():
        fail(f"no {DOCS / 'index.html'}: is there an nbs/index.ipynb?")
    print(f"build_book: wrote {DOCS}")


if __name__ == "__main__":
    main()
