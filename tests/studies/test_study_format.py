"""p-values on staff pages read as numbers, never as 8.19e-216 or a false 0.0000."""

from __future__ import annotations

from django.template import Context, Template

from studies.templatetags.study_format import pvalue


def test_tiny_p_values_read_as_below_the_shown_precision():
    assert pvalue(8.19e-216) == "< 0.0001"
    assert pvalue(0.0) == "< 0.0001"
    assert pvalue(0.03127) == "0.0313"
    assert pvalue(1.0) == "1.0000"


def test_missing_values_show_a_dash():
    assert pvalue(None) == "—" and pvalue(float("nan")) == "—" and pvalue("") == "—"


def test_the_filter_works_in_templates():
    html = Template("{% load study_format %}{{ p|pvalue }}").render(Context({"p": 8.19e-216}))
    assert html == "&lt; 0.0001"
