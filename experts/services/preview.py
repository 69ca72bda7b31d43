"""The grading page's deliverable preview: the text the judges saw, else the files extracted now and cached.

Extraction is work on the stored files, so it runs here rather than in a selector.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable
from typing import Any

from django.core.cache import cache

from experts import comparison_selectors
from experts import selectors as sel
from experts.models import ComparisonPlacement
from experts.selectors import DeliverablePreview
from grading.services.extraction import extraction_limits, stored_files_extract
from studies.models import Episode

logger = logging.getLogger(__name__)

PREVIEW_MAX_CHARS = 200_000


def deliverable_preview(episode: Episode) -> DeliverablePreview:
    """The deliverables' text as judges saw it (stored extraction), else extracted now and cached."""
    return _preview(sel.stored_deliverable_text(episode), lambda: list(sel.deliverable_files(episode)),
                    f"episode {episode.pk}")


def placement_preview(placement: ComparisonPlacement) -> DeliverablePreview:
    """The same preview for a comparison's shown deliverable (an episode's or a solo-agent run's files)."""
    files = comparison_selectors.placement_files(placement)
    shown = _preview(comparison_selectors.placement_extraction(placement), lambda: files,
                     f"comparison placement {placement.pk}")
    for part in shown.parts:  # stored names may hint at the arm: the page shows the neutral ones
        part.name = comparison_selectors.shown_part_name(part.name, files)
    return shown


def _preview(content: dict[str, Any] | None, load_files: Callable[[], list[Any]], label: str) -> DeliverablePreview:
    if not content:
        files = load_files()
        if not files:
            return DeliverablePreview()
        # Keyed by content: the same bytes always give the same preview.
        key = "expert-preview:" + hashlib.sha256("|".join(f"{f.name}:{f.sha256}:{f.size}" for f in files)
                                                 .encode()).hexdigest()
        content = cache.get(key)
        if content is None:
            try:
                result = stored_files_extract([(f.name, f.file) for f in files],
                                              limits=extraction_limits(max_chars=PREVIEW_MAX_CHARS))
            except Exception:  # a broken upload must not take the grading page down with it
                logger.exception("preview extraction failed for %s", label)
                return DeliverablePreview(error="The files could not be read for preview; download them instead.")
            content = result.to_json()
            cache.set(key, content, timeout=24 * 3600)
    return sel.preview_from_extraction(content)

