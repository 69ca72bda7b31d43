"""The grade ledger's families stripped and lower-cased, as they are now written.

Judge families always were; an agent family written with capitals or spaces matched no judge, so its
self-preference term was silently never considered. Only such rows change.
"""

from django.db import migrations
from django.db.models import Q
from django.utils import timezone


def normalise(apps, schema_editor) -> None:
    GradeObservation = apps.get_model("rating", "GradeObservation")
    rows = GradeObservation.objects.filter(~Q(agent_family="") | ~Q(grader_family="")).only(
        "pk", "agent_family", "grader_family"
    )
    for row in rows.iterator(chunk_size=2000):
        agent_family, grader_family = row.agent_family.strip().lower(), row.grader_family.strip().lower()
        if (agent_family, grader_family) != (row.agent_family, row.grader_family):
            # updated_at moves too: the ledger's fingerprint reads it, so the study's model is refitted.
            GradeObservation.objects.filter(pk=row.pk).update(
                agent_family=agent_family, grader_family=grader_family, updated_at=timezone.now()
            )


class Migration(migrations.Migration):

    dependencies = [
        ("rating", "0010_snapshot_participants_removed_at"),
        ("studyapp", "0014_agent_family_normalised"),
    ]

    # The original spelling is not kept: reversing leaves the normalised families in place.
    operations = [migrations.RunPython(normalise, migrations.RunPython.noop)]
