# The expert models moved to the experts app with their tables (experts 0001 adds them to its state): this
# migration only removes them from grading's state, then relabels their content types, so permissions and
# admin history stay attached, and the audit events that name them. The database tables are untouched.

from django.conf import settings
from django.db import migrations

MODELS = ('expertprofile', 'expertassignment', 'expertgrade', 'expertcriteriongrade')


def _relabel(apps, old, new):
    ContentType = apps.get_model('contenttypes', 'ContentType')
    Permission = apps.get_model('auth', 'Permission')
    LogEntry = apps.get_model('admin', 'LogEntry')
    AuditEvent = apps.get_model('studyapp', 'AuditEvent')
    User = apps.get_model(settings.AUTH_USER_MODEL)
    grants = (apps.get_model('auth', 'Group').permissions.through, User.user_permissions.through)
    for model in MODELS:
        AuditEvent.objects.filter(object_type=f'{old}.{model}').update(object_type=f'{new}.{model}')
        source = ContentType.objects.filter(app_label=old, model=model).first()
        if source is None:
            continue
        # A content type already under the new label (created by migrate's post-migrate step after a reverse
        # migration) is folded into the old one first, so nothing attached to either is lost.
        stale = ContentType.objects.filter(app_label=new, model=model).first()
        if stale is not None:
            LogEntry.objects.filter(content_type=stale).update(content_type=source)
            for permission in Permission.objects.filter(content_type=stale):
                kept = Permission.objects.filter(content_type=source, codename=permission.codename).first()
                if kept is None:
                    permission.content_type = source
                    permission.save(update_fields=['content_type'])
                    continue
                for through in grants:
                    owner = [f.attname for f in through._meta.concrete_fields if f.attname not in ('id', 'permission_id')]
                    for row in through.objects.filter(permission=permission).values(*owner):
                        through.objects.get_or_create(permission=kept, **row)
                permission.delete()
            stale.delete()
        source.app_label = new
        source.save(update_fields=['app_label'])
    ContentType.objects.clear_cache()


def to_experts(apps, schema_editor):
    _relabel(apps, 'grading', 'experts')


def to_grading(apps, schema_editor):
    _relabel(apps, 'experts', 'grading')


class Migration(migrations.Migration):

    dependencies = [
        ('admin', '0003_logentry_add_action_flag_choices'),
        ('auth', '0012_alter_user_first_name_max_length'),
        ('contenttypes', '0002_remove_content_type_name'),
        ('experts', '0001_initial'),
        ('grading', '0007_judge_run_budget_reservation'),
        ('studyapp', '0001_initial'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[],
            state_operations=[
                migrations.DeleteModel(name='ExpertCriterionGrade'),
                migrations.DeleteModel(name='ExpertGrade'),
                migrations.DeleteModel(name='ExpertAssignment'),
                migrations.DeleteModel(name='ExpertProfile'),
            ],
        ),
        migrations.RunPython(to_experts, to_grading),
    ]
