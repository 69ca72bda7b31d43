"""Staff-written markdown (setup guides, consent texts) rendered to HTML that cannot run script."""

from __future__ import annotations

from functools import lru_cache

import markdown as _markdown
import nh3
from django.utils.safestring import SafeString, mark_safe

_ALLOWED_TAGS = {
    "a", "abbr", "b", "blockquote", "br", "code", "dd", "del", "details", "div", "dl", "dt", "em",
    "h1", "h2", "h3", "h4", "h5", "h6", "hr", "i", "kbd", "li", "ol", "p", "pre", "s", "span", "strong",
    "sub", "summary", "sup", "table", "tbody", "td", "th", "thead", "tr", "ul",
}
_ALLOWED_ATTRIBUTES = {
    "a": {"href", "title"},
    "abbr": {"title"},
    "td": {"align"},
    "th": {"align"},
    "code": {"class"},
    "ol": {"start"},
}


def render_markdown(text: str) -> SafeString:
    """Return sanitised HTML for markdown text; raw HTML in the source is cleaned, not trusted."""
    return _render(text or "")


@lru_cache(maxsize=512)
def _render(text: str) -> SafeString:
    # Cached by the text itself: setup guides are rendered on every task page view but rarely change.
    html = _markdown.markdown(text, extensions=["fenced_code", "tables", "sane_lists"], output_format="html")
    cleaned = nh3.clean(
        html,
        tags=_ALLOWED_TAGS,
        attributes=_ALLOWED_ATTRIBUTES,
        url_schemes={"http", "https", "mailto"},
        link_rel="noopener noreferrer nofollow",
    )
    # Safe because nh3 removed every tag, attribute and URL scheme outside the allow-lists above.
    return mark_safe(cleaned)  # noqa: S308
