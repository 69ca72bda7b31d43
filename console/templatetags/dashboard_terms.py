"""``{% term "key" %}``: a glossary link whose hover title is the plain explanation of a statistical term."""

from __future__ import annotations

from django import template
from django.urls import reverse
from django.utils.html import format_html
from django.utils.safestring import SafeString

from console.dashboard.glossary import parameter_label, term_get

register = template.Library()


@register.simple_tag
def term(key: str, label: str = "") -> SafeString:
    """Return the term (or ``label``) linked to its glossary entry, with the plain explanation as its title."""
    entry = term_get(key)
    url = f"{reverse('dashboard:glossary')}#term-{entry.key}"
    return format_html('<a class="dash-term" href="{}" title="{}">{}</a>', url, entry.plain, label or entry.term)


@register.simple_tag
def parameter(name: str) -> SafeString:
    """Return a rating-model parameter's readable label linked to its entry, the technical name beside it."""
    label, key = parameter_label(name)
    if not key:
        return format_html("<code>{}</code>", name)
    return format_html('{} <code class="dash-muted">{}</code>', term(key, label), name)
