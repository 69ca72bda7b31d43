"""Agent families stored as judges' families are: stripped and lower-cased, so the two match."""

from django.db import migrations, models


def normalise(apps, schema_editor) -> None:
    Agent = apps.get_model("studyapp", "Agent")
    for agent in Agent.objects.all().only("pk", "family"):
        family = (agent.family or "").strip().lower()
        if family != agent.family:
            Agent.objects.filter(pk=agent.pk).update(family=family)


class Migration(migrations.Migration):

    dependencies = [
        ('studyapp', '0013_merge_outside_expertise_and_expert_gate'),
    ]

    operations = [
        migrations.AlterField(
            model_name='agent',
            name='family',
            field=models.CharField(blank=True, help_text="Model family the agent's work comes from (anthropic, openai, google, …); a judge of the same family may favour it. Stored lower-case without surrounding spaces, as judges' families are. Left blank in the admin, it is filled in from the model version, product and name.", max_length=32),
        ),
        # The original spelling is not kept: reversing leaves the normalised families in place.
        migrations.RunPython(normalise, migrations.RunPython.noop),
    ]
