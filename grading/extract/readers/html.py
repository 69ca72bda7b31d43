"""HTML reduced to its visible text, keeping link and image targets."""

from __future__ import annotations

import re
from html.parser import HTMLParser


def looks_like_html(text: str) -> bool:
    start = text[:512].lstrip().lower()
    return start.startswith(("<!doctype html", "<html"))


class _HTMLText(HTMLParser):
    """Visible text plus link and image targets; scripts and styles are dropped."""

    _SKIP = frozenset({"script", "style", "noscript", "template", "head"})
    _BLOCK = frozenset(
        {
            "p",
            "div",
            "br",
            "li",
            "tr",
            "h1",
            "h2",
            "h3",
            "h4",
            "h5",
            "h6",
            "table",
            "section",
            "article",
            "header",
            "footer",
            "ul",
            "ol",
            "pre",
            "blockquote",
            "hr",
            "title",
            "dt",
            "dd",
        }
    )

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.out: list[str] = []
        self.skip = 0
        self.links: list[str | None] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        attr = dict(attrs)
        if tag in self._SKIP and tag != "head":
            self.skip += 1
        elif tag in self._BLOCK:
            self.out.append("\n")
        elif tag in ("td", "th"):
            self.out.append(" | ")
        if tag == "a":
            self.links.append(attr.get("href"))
        elif tag == "img" and not self.skip:
            src = attr.get("src") or ""
            shown = "" if src.startswith("data:") else f" {src}"
            self.out.append(f"[image: {attr.get('alt') or ''}{shown}]")

    def handle_endtag(self, tag: str) -> None:
        if tag in self._SKIP and tag != "head":
            self.skip = max(0, self.skip - 1)
        elif tag == "a" and self.links:
            href = self.links.pop()
            if href and not href.lower().startswith(("javascript:", "#")):
                self.out.append(f" ({href})")
        elif tag in self._BLOCK:
            self.out.append("\n")

    def handle_data(self, data: str) -> None:
        if not self.skip:
            self.out.append(data)


def html_to_text(html: str) -> str:
    parser = _HTMLText()
    parser.feed(html)
    parser.close()
    lines = (re.sub(r"[ \t\r\f\v]+", " ", line).strip() for line in "".join(parser.out).split("\n"))
    return re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).strip()
