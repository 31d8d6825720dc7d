from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from accounts.services import api_token_create


class Command(BaseCommand):
    help = "Create an API token for a user and print its key (shown this once)."

    def add_arguments(self, parser):
        parser.add_argument("username")
        parser.add_argument("--name", default="from the command line")
        parser.add_argument(
            "--days", type=int, default=None, help="Lifetime in days (default API_TOKEN_DAYS; 0 never expires)."
        )

    def handle(self, *args, username, name, days, **options):
        user = get_user_model().objects.filter(username=username).first()
        if user is None:
            raise CommandError(f"No user named {username!r}.")
        if days is not None and days < 0:
            raise CommandError("--days must be 0 (never expires) or more.")
        token, key = api_token_create(user=user, name=name, days=days)
        expiry = f"expires {token.expires_at:%Y-%m-%d %H:%M} UTC" if token.expires_at else "never expires"
        self.stderr.write(f"Token {token.prefix}… for {username}, {expiry}. Keep the key: it is not stored.")
        self.stdout.write(key)
