"""The one answer every expert draft autosave gives (grade, comparison, ToM gold code), so the shared page script
(static/js/expert-autosave.js) reads the same replies everywhere."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from django.http import JsonResponse
from django.utils import timezone

from experts.exceptions import ExpertError


def draft_autosave_reply(save: Callable[[], Any], *,
                         not_editable: tuple[type[ExpertError], ...] = ()) -> JsonResponse:
    """Run a draft save and answer the page: 409 when the answer can no longer change (submitted or withdrawn:
    saving again cannot help, the script stops), 400 with the reason for a bad payload, else the saved time."""
    try:
        saved = save()
    except not_editable as exc:
        return JsonResponse({"error": exc.message}, status=409)
    except ExpertError as exc:
        return JsonResponse({"error": exc.message}, status=400)
    except json.JSONDecodeError:
        return JsonResponse({"error": "The body is not JSON."}, status=400)
    except ValueError as exc:
        return JsonResponse({"error": str(exc)}, status=400)
    return JsonResponse({"ok": True, "saved_at": timezone.now().isoformat(),
                         "time_spent_seconds": saved.time_spent_seconds})
