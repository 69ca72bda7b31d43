"""Text a task-page form refused, kept in the worker's session until it is corrected.

The fields that were right are saved at once; a refused one (notes over the limit, a link to the wrong site)
cannot be stored on the episode, yet the worker must not lose it to a reload. It is kept in the session (the
database sessions, so it outlives a restart) per episode and form, with the reason it was refused, and shown
again, marked, on the next visit of the task page. Saving that field successfully forgets it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django import forms
from django.contrib.sessions.backends.base import SessionBase

_SESSION_KEY = "journey.form_drafts"
# Longer text is cut to this before it is kept: the session is read on every request of the worker.
DRAFT_MAX_CHARS = 50_000
DRAFT_CUT_NOTE = (f"Only the first {DRAFT_MAX_CHARS:,} characters of this field are kept if you leave or reload "
                  "this page.")


def _key(episode_id: int, form_name: str) -> str:
    return f"{episode_id}:{form_name}"


def form_draft_keep(session: SessionBase, *, episode_id: int, form_name: str, form: forms.Form) -> None:
    """Keep the form's refused fields (their text and errors) and forget its fields that were saved."""
    kept: dict[str, dict[str, Any]] = {}
    for name in form.fields:
        if name not in form.errors:
            continue
        value = str(form.data.get(name, ""))
        errors = [str(e) for e in form.errors[name]]
        if len(value) > DRAFT_MAX_CHARS:
            value = value[:DRAFT_MAX_CHARS]
            errors.append(DRAFT_CUT_NOTE)
        kept[name] = {"value": value, "errors": errors}
    drafts = dict(session.get(_SESSION_KEY, {}))
    key = _key(episode_id, form_name)
    if kept:
        drafts[key] = kept
    elif drafts.pop(key, None) is None:
        return  # nothing kept before, nothing to keep now: leave the session unwritten
    session[_SESSION_KEY] = drafts


def form_draft_fields(session: SessionBase, *, episode_id: int, form_name: str) -> list[str]:
    """Return the names of the fields a form of this episode still holds unsaved."""
    return sorted(session.get(_SESSION_KEY, {}).get(_key(episode_id, form_name), {}))


def form_draft(session: SessionBase, *, episode_id: int, form_name: str, form_class: type[forms.Form],
               saved: Mapping[str, Any]) -> forms.Form | None:
    """Return the form bound to the saved values with the kept refused text over them, its errors shown again.

    ``None`` when nothing is kept. The form's own checks run again (their counts then match the text shown); a
    reason only a service gave (a link's check may need a network look-up a page view should not repeat) is
    shown as it was stored.
    """
    kept = session.get(_SESSION_KEY, {}).get(_key(episode_id, form_name))
    if not kept:
        return None
    form = form_class(data={**saved, **{name: field["value"] for name, field in kept.items()}})
    form.is_valid()
    for name, field in kept.items():
        if name not in form.fields:
            continue
        own = name in form.errors
        for error in field["errors"]:
            if not own or error == DRAFT_CUT_NOTE:
                form.add_error(name, error)
    return form
