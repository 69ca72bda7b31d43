"""The admin names every model in words: no "rowss", "criterions" or other plural Django makes by adding an s."""

from __future__ import annotations

from django.contrib import admin

from rating.models import PendingRatingRows


def test_no_admin_model_is_named_with_a_doubled_or_invented_plural():
    wrong = []
    for model in admin.site._registry:
        single, plural = str(model._meta.verbose_name), str(model._meta.verbose_name_plural)
        if plural.endswith(("ss", "criterions")) or (single.endswith("s") and plural == f"{single}s"):
            wrong.append(f"{model.__name__}: {plural!r}")
    assert wrong == []
    assert PendingRatingRows._meta.verbose_name_plural == "pending rating rows"
