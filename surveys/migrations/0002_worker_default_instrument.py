"""Create the default survey instrument (collabskill-attitudes v1) from surveys/fixtures/default_instrument.json."""

import json
from pathlib import Path

from django.db import migrations

FIXTURE = Path(__file__).resolve().parent.parent / "fixtures" / "default_instrument.json"


def create_default_instrument(apps, schema_editor):
    Instrument = apps.get_model("surveys", "Instrument")
    Question = apps.get_model("surveys", "Question")
    data = json.loads(FIXTURE.read_text(encoding="utf-8"))
    instrument, created = Instrument.objects.get_or_create(
        slug=data["slug"], version=data["version"],
        defaults={"title": data["title"], "post_prefix": data["post_prefix"], "is_active": True},
    )
    if not created:
        return
    for item in data["questions"]:
        options = item["options"]
        if item["kind"] == "has" and not options:
            options = {"levels": data["has_levels"]}
        Question.objects.create(
            instrument=instrument, code=item["code"], order=item["order"], kind=item["kind"], phases=item["phases"],
            construct=item["construct"], text=item["text"], post_text=item["post_text"], help_text=item["help_text"],
            options=options, required=item["required"],
        )


def remove_default_instrument(apps, schema_editor):
    Instrument = apps.get_model("surveys", "Instrument")
    Question = apps.get_model("surveys", "Question")
    data = json.loads(FIXTURE.read_text(encoding="utf-8"))
    # By primary key and without the deletion collector: the collector follows reverse relations into models
    # of this historical state rendered at different times and refuses them ("must be Instrument instance").
    unused = list(Instrument.objects.filter(slug=data["slug"], version=data["version"], responses__isnull=True)
                  .values_list("pk", flat=True))
    Question.objects.filter(instrument_id__in=unused)._raw_delete(schema_editor.connection.alias)
    Instrument.objects.filter(pk__in=unused)._raw_delete(schema_editor.connection.alias)


class Migration(migrations.Migration):
    dependencies = [("surveys", "0001_initial")]
    operations = [migrations.RunPython(create_default_instrument, remove_default_instrument)]
