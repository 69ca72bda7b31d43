"""The progress table keeps a share and its "%" on one line, however narrow the column."""

from __future__ import annotations

import re

from django.template.loader import render_to_string


def test_the_graded_share_never_wraps_its_percent_sign():
    html = render_to_string("console/_progress_table.html", {"rows": [{"percent": 100, "label": "Agent X"}]})
    assert "100&nbsp;%" in html
    assert not re.search(r"\d %", html)
