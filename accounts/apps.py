from django.apps import AppConfig


class AccountsConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "accounts"
    verbose_name = "Accounts"

    def ready(self):
        from accounts import schema  # noqa: F401  (registers the token scheme with drf-spectacular)
        from projects.routes import PERSONAL_ROUTES

        # The tokens page names a token of the person's own; its views cut to their tokens.
        PERSONAL_ROUTES.add("api_token_revoke")
