"""Webhooks registered on the settings page (admins manage them), in the admins' role."""
import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models

from runs.roles import roles_migrate


class Migration(migrations.Migration):

    dependencies = [
        ('runs', '0024_forks_counted_once'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
        ('toolsapp', '0007_tool_always_ask_critical_edits'),
    ]

    operations = [
        migrations.CreateModel(
            name='Webhook',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('url', models.URLField(max_length=2000, unique=True)),
                ('description', models.CharField(blank=True, help_text='Who receives it, for the people who read this list.', max_length=200)),
                ('enabled', models.BooleanField(default=True)),
                ('created_at', models.DateTimeField(auto_now_add=True)),
                ('created_by', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to=settings.AUTH_USER_MODEL)),
            ],
            options={
                'ordering': ['url'],
            },
        ),
        migrations.RunPython(roles_migrate, migrations.RunPython.noop),
    ]
