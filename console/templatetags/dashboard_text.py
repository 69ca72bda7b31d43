"""``{{ text|code_spans }}``: stored notes and reasons written for a terminal (`manage.py grade --pending`) shown
on a page with their command in ``<code>``, never as raw backticks."""

from __future__ import annotations

import re

from django import template
from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe

register = template.Library()

_SPAN = re.compile(r"`([^`\n]+)`")


@register.filter
def code_spans(text: object) -> SafeString:
    """Escape ``text``, then turn each `span` into <code>span</code> (an unpaired backtick stays as it is)."""
    return mark_safe(_SPAN.sub(r"<code>\1</code>", escape("" if text is None else str(text))))  # noqa: S308
