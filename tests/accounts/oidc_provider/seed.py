"""`python -m tests.accounts.oidc_provider.seed` with JSON on stdin: creates the provider's tables
if needed, its client and its people, or changes them (a person's groups, as an administrator of
the identity provider would).

    {"client": {"client_id", "client_secret", "redirect_uri", "post_logout_redirect_uri"},
     "users": [{"username", "password", "email", "groups": [...]}]}
"""

import json
import os
import sys


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.accounts.oidc_provider.settings")
    import django

    django.setup()
    from django.contrib.auth.models import Group, User
    from django.core.management import call_command
    from oauth2_provider.models import Application

    given = json.load(sys.stdin)
    call_command("migrate", verbosity=0, interactive=False)
    client = given.get("client")
    if client:
        Application.objects.filter(client_id=client["client_id"]).delete()
        Application.objects.create(
            name="agentsite",
            client_id=client["client_id"],
            client_secret=client["client_secret"],
            client_type=Application.CLIENT_CONFIDENTIAL,
            authorization_grant_type=Application.GRANT_AUTHORIZATION_CODE,
            redirect_uris=client["redirect_uri"],
            post_logout_redirect_uris=client["post_logout_redirect_uri"],
            algorithm=Application.RS256_ALGORITHM,
            skip_authorization=True,
        )
    for person in given.get("users", []):
        user, _ = User.objects.get_or_create(username=person["username"])
        user.email = person.get("email", "")
        if "password" in person:
            user.set_password(person["password"])
        user.save()
        user.groups.set([Group.objects.get_or_create(name=name)[0] for name in person.get("groups", [])])


if __name__ == "__main__":
    main()
