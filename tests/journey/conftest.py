"""Shared settings for the study-flow tests."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def _invitation_links_unthrottled(settings):
    """Flows open invitation links many times from one test address; the throttle has its own tests."""
    settings.JOIN_THROTTLE_RATE = "100000/min"
