# The expert models moved here from the grading app with their tables: this migration only adds them to
# the experts app's state (grading 0008 removes them from grading's state); the database is untouched.

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):

    initial = True

    dependencies = [
        ('grading', '0007_judge_run_budget_reservation'),
        ('studyapp', '0010_study_partial_panel_policy'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[],
            state_operations=[
                migrations.CreateModel(
                    name='ExpertProfile',
                    fields=[
                        ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                        ('bio', models.TextField(blank=True)),
                        ('is_active', models.BooleanField(default=True)),
                        ('created_at', models.DateTimeField(auto_now_add=True)),
                        ('invited_by', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to=settings.AUTH_USER_MODEL)),
                        ('sectors', models.ManyToManyField(blank=True, related_name='experts', to='studyapp.sector')),
                        ('user', models.OneToOneField(on_delete=django.db.models.deletion.CASCADE, related_name='expert_profile', to=settings.AUTH_USER_MODEL)),
                    ],
                    options={
                        'db_table': 'grading_expertprofile',
                    },
                ),
                migrations.CreateModel(
                    name='ExpertAssignment',
                    fields=[
                        ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                        ('role', models.CharField(choices=[('primary', 'Primary grade'), ('second', 'Second grade (agreement)'), ('adjudication', 'Adjudication'), ('gold', 'Gold check')], default='primary', max_length=16)),
                        ('status', models.CharField(choices=[('assigned', 'Assigned'), ('in_progress', 'In progress'), ('submitted', 'Submitted'), ('cancelled', 'Cancelled')], db_index=True, default='assigned', max_length=16)),
                        ('assigned_at', models.DateTimeField(auto_now_add=True)),
                        ('assigned_by', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to=settings.AUTH_USER_MODEL)),
                        ('episode', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='expert_assignments', to='studyapp.episode')),
                        ('expert', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='assignments', to='experts.expertprofile')),
                    ],
                    options={
                        'db_table': 'grading_expertassignment',
                        'ordering': ['-assigned_at'],
                        'constraints': [models.UniqueConstraint(fields=('episode', 'expert'), name='uniq_expert_per_episode')],
                    },
                ),
                migrations.CreateModel(
                    name='ExpertGrade',
                    fields=[
                        ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                        ('attempt', models.PositiveSmallIntegerField(default=1, help_text='Attempt k when re-attempts are recorded.')),
                        ('status', models.CharField(choices=[('draft', 'Draft'), ('submitted', 'Submitted')], default='draft', max_length=16)),
                        ('overall', models.CharField(blank=True, choices=[('accept', 'Acceptable deliverable'), ('revise', 'Needs revision'), ('reject', 'Unacceptable')], max_length=16)),
                        ('feedback', models.TextField(blank=True)),
                        ('score', models.FloatField(blank=True, help_text='0–100 rubric score: passed / evaluated.', null=True)),
                        ('time_spent_seconds', models.PositiveIntegerField(default=0)),
                        ('started_at', models.DateTimeField(auto_now_add=True)),
                        ('submitted_at', models.DateTimeField(blank=True, null=True)),
                        ('assignment', models.OneToOneField(on_delete=django.db.models.deletion.CASCADE, related_name='grade', to='experts.expertassignment')),
                        ('episode', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='expert_grades', to='studyapp.episode')),
                        ('expert', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='grades', to='experts.expertprofile')),
                        ('rubric', models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='expert_grades', to='grading.rubric')),
                    ],
                    options={
                        'db_table': 'grading_expertgrade',
                        'ordering': ['-started_at'],
                    },
                ),
                migrations.CreateModel(
                    name='ExpertCriterionGrade',
                    fields=[
                        ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                        ('verdict', models.CharField(choices=[('pass', 'Pass'), ('fail', 'Fail'), ('skip', 'Skip (cannot evaluate)')], max_length=8)),
                        ('feedback', models.TextField(blank=True)),
                        ('criterion', models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='expert_verdicts', to='grading.criterion')),
                        ('grade', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='criterion_grades', to='experts.expertgrade')),
                    ],
                    options={
                        'db_table': 'grading_expertcriteriongrade',
                        'constraints': [models.UniqueConstraint(fields=('grade', 'criterion'), name='uniq_expert_verdict')],
                    },
                ),
            ],
        ),
    ]
