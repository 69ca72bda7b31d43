"""Turn uploaded deliverables into the text and images an LLM judge reads.

Judges see nothing but what this package produces, so it aims for completeness (formulas beside cached
values, link targets, speaker notes, tables) while treating every upload as hostile: a limit breach or a
parse failure becomes a part with a reason, never an exception, and every cut is marked in the text.
No Django imports: the grading pipeline, expert views and benches all call it directly.
"""

from grading.extract.dispatch import extract_file, extract_files
from grading.extract.limits import ExtractLimits
from grading.extract.results import TRUNCATION_NOTICE, ExtractedImage, ExtractedPart, Extraction

__all__ = [
    "TRUNCATION_NOTICE",
    "ExtractLimits",
    "ExtractedImage",
    "ExtractedPart",
    "Extraction",
    "extract_file",
    "extract_files",
]
