"""The project's own top-level packages, for tests that read every source file or the whole import graph."""

PROJECT_PACKAGES = ("studyapp", "console", "journey", "experts", "grading", "surveys", "pairing", "rating", "studies")
