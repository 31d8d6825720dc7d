"""The history's filter indexes end with the id as well (see Run.Meta.indexes): the new ones are
built before the old ones go, so no filter is ever without an index."""

from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('runs', '0028_agent_stream_answers'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.AddIndex(
            model_name='run',
            index=models.Index(fields=['status', '-created_at', '-id'], name='run_status_created_id'),
        ),
        migrations.AddIndex(
            model_name='run',
            index=models.Index(fields=['stop_reason', '-created_at', '-id'], name='run_stop_created_id'),
        ),
        migrations.AddIndex(
            model_name='run',
            index=models.Index(fields=['agent', '-created_at', '-id'], name='run_agent_created_id'),
        ),
        migrations.RemoveIndex(
            model_name='run',
            name='runs_run_status_f151c0_idx',
        ),
        migrations.RemoveIndex(
            model_name='run',
            name='runs_run_stop_re_8f265f_idx',
        ),
        migrations.RemoveIndex(
            model_name='run',
            name='runs_run_agent_i_64687a_idx',
        ),
    ]
