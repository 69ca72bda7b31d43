"""Bounds on what one extraction may read, so a hostile or huge upload cannot exhaust a worker."""

from __future__ import annotations

from dataclasses import dataclass

RATIO_FLOOR = 2**20  # small members may compress far beyond any ratio (a sheet of zeros) and are harmless
SPILL_BYTES = 16 * 2**20  # file-like uploads above this are spooled to disk instead of held in memory
CHUNK_BYTES = 2**20


@dataclass(frozen=True)
class ExtractLimits:
    """Bounds that keep one hostile or huge upload from exhausting a worker or the judge's context."""

    max_chars: int = 400_000  # judge budget in characters (~4 characters per token)
    max_file_bytes: int = 200 * 2**20
    max_zip_members: int = 500
    max_zip_total_bytes: int = 500 * 2**20  # uncompressed, per top-level archive
    max_zip_ratio: float = 100.0  # uncompressed:compressed, per member above 1 MiB
    max_zip_depth: int = 3
    max_images: int = 8
    max_image_bytes: int = 5 * 2**20
    max_xlsx_cells: int = 200_000
    # Workbooks up to this size go through openpyxl's full loader; larger ones use the one-pass stream.
    xlsx_full_load_bytes: int = 512 * 2**10
