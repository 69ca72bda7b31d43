"""Sample session files written for these tests, one per agent format (see samples/)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from grading.transcripts import FileTranscript, parse_log

SAMPLES = Path(__file__).parent / "samples"


@pytest.fixture
def parse_sample() -> Callable[[str], FileTranscript]:
    def parse(name: str) -> FileTranscript:
        with (SAMPLES / name).open("rb") as handle:
            return parse_log(name, handle)

    return parse
