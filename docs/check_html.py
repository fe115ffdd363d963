"""Check a built site: every tutorial page and the architecture page show their figures,
and every page of the API reference was built.

``python docs/check_html.py OUT`` after ``sphinx-build -b html docs OUT`` (CI and
``tox -e docs`` run it): each ``<img>`` of those pages must point to a PNG or SVG file that
exists in OUT, each tutorial must have at least one, and so must the architecture page
(the two diagrams); each page that docs/apigen.py wrote (one per part, class, function and
Tensor member) must have its HTML page. Exits non-zero naming what is missing.
"""

import html.parser
import sys
from pathlib import Path
from urllib.parse import unquote, urlparse


class _Images(html.parser.HTMLParser):
    def __init__(self):
        super().__init__()
        self.sources = []

    def handle_starttag(self, tag, attrs):
        src = dict(attrs).get("src") if tag == "img" else None
        if src and not urlparse(src).scheme:
            self.sources.append(unquote(src))


def figures(page: Path) -> list[Path]:
    parser = _Images()
    parser.feed(page.read_text(encoding="utf-8"))
    return [(page.parent / src).resolve() for src in parser.sources]


def check(out: Path) -> list[str]:
    problems = []
    pages = sorted((out / "tutorials").glob("plot_*.html")) + [out / "architecture.html"]
    if len(pages) < 2:
        problems.append(f"{out}: no tutorial page was built")
    for page in pages:
        if not page.exists():
            problems.append(f"{page}: missing")
            continue
        found = [f for f in figures(page) if f.suffix in (".png", ".svg")]
        if not found:
            problems.append(f"{page.relative_to(out)}: no PNG or SVG figure")
        missing = [f for f in found if not f.exists()]
        problems += [f"{page.relative_to(out)}: {f} does not exist" for f in missing]
    return problems + reference_pages(out)


def reference_pages(out: Path, source: Path = Path(__file__).parent / "api") -> list[str]:
    """The API pages written before the build (``source``) that have no HTML page."""
    written = [p.relative_to(source).with_suffix(".html") for p in source.rglob("*.rst")]
    if len(written) < 1000:
        return [f"{source}: the API reference has {len(written)} pages; was it generated?"]
    return [f"{out / 'api' / page}: missing" for page in written
            if not (out / "api" / page).exists()]


if __name__ == "__main__":
    problems = check(Path(sys.argv[1]))
    print("\n".join(problems) or "every tutorial and diagram figure and every API page is there")
    sys.exit(1 if problems else 0)
