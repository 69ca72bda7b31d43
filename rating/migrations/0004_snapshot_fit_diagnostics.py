from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('rating', '0003_rating_observation_task_uuid'),
    ]

    operations = [
        migrations.AddField(
            model_name='ratingsnapshot',
            name='fit',
            field=models.JSONField(blank=True, default=dict, help_text='Fitted hyperparameters and their uncertainty, level, likelihood and fit diagnostics.'),
        ),
        migrations.AlterField(
            model_name='ratingsnapshot',
            name='config',
            field=models.JSONField(default=dict, help_text='The rating model it was computed with (rating.fit.ModelSpec.to_dict()).'),
        ),
    ]
