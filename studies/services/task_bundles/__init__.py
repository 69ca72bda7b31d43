"""Import and export task bundles (docs/task-bundles.md): one service behind the API and the commands.

An import reads a bundle folder, a folder of bundles, a ZIP of one or many bundles, or a GDPval-style table
(CSV/JSONL) with its reference files beside it. Every problem — invalid fields, unknown sectors or
occupations, unsafe archive members, oversize or mistyped files, repeated UUIDs — is collected first and
raised together as :class:`TaskBundleInvalid`; only a clean import writes, in one transaction, keyed by the
task UUID so importing the same bundle again updates the task instead of duplicating it.
"""

from studies.services.task_bundles.exporting import ExportReport, task_bundles_export
from studies.services.task_bundles.importing import ImportReport, TaskOutcome, task_bundles_import

__all__ = ["ExportReport", "ImportReport", "TaskOutcome", "task_bundles_export", "task_bundles_import"]
