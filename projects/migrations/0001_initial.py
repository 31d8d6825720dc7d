from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):
    initial = True

    dependencies = [
        ("auth", "0012_alter_user_first_name_max_length"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.CreateModel(
            name="Project",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("name", models.CharField(max_length=100, unique=True)),
                ("slug", models.SlugField(unique=True)),
                ("description", models.TextField(blank=True)),
                ("created_at", models.DateTimeField(auto_now_add=True)),
            ],
            options={"ordering": ["name"]},
        ),
        migrations.CreateModel(
            name="Membership",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("project", models.ForeignKey(on_delete=models.deletion.CASCADE, related_name="memberships", to="projects.project")),
                ("role", models.ForeignKey(
                    help_text="Its permissions apply in this project only (viewers, operators or admins).",
                    on_delete=models.deletion.PROTECT, related_name="+", to="auth.group")),
                ("user", models.ForeignKey(on_delete=models.deletion.CASCADE, related_name="memberships", to=settings.AUTH_USER_MODEL)),
            ],
            options={"ordering": ["project__name", "user__username"]},
        ),
        migrations.AddField(
            model_name="project",
            name="members",
            field=models.ManyToManyField(blank=True, related_name="projects", through="projects.Membership", to=settings.AUTH_USER_MODEL),
        ),
        migrations.AddConstraint(
            model_name="membership",
            constraint=models.UniqueConstraint(fields=("project", "user"), name="one_role_per_project"),
        ),
    ]
