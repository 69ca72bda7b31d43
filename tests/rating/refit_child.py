"""Run by test_refresh_faults in a process of its own: a refit that writes its participants' rows on connections
of their own, says so in a file, and then hangs in its leverages until the test kills it."""

from __future__ import annotations

import sys
import time
from pathlib import Path


def main(study_id: int, signal_file: Path) -> None:
    import django

    django.setup()
    import rating.fit as fit_module
    from rating.services import refresh

    refresh.SEPARATE_MIN_ROWS = 1  # the study is small; write it as a large one is written
    original_write = refresh._participants_write

    def write(snapshot, *args, **kwargs):
        original_write(snapshot, *args, **kwargs)
        signal_file.write_text(str(snapshot.pk))

    def hang(*args, **kwargs):
        while True:
            time.sleep(1)

    refresh._participants_write = write
    fit_module._dense_leverages = hang
    refresh.posterior_refresh(study_id=study_id)


if __name__ == "__main__":
    main(int(sys.argv[1]), Path(sys.argv[2]))
