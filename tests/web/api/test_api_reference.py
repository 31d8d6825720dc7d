"""The API reference (/api/docs/): for signed-in people, Swagger UI from this site's own files over
this site's schema; nothing on the page names another host to load from."""
import json
import re

from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse

LOADED = re.compile(r'<(?:script|link|img)\b[^>]*\b(?:src|href)="([^"]+)"')


def test_the_reference_loads_only_this_site_s_files(db):
    client = Client()
    client.force_login(User.objects.create_user("rita", password="pw-long-enough-1"))
    html = client.get(reverse("api_docs")).content.decode()
    loaded = LOADED.findall(html)
    assert "/static/vendor/swagger-ui-5.33.1/swagger-ui-bundle.js" in loaded
    assert all(url.startswith("/") and not url.startswith("//") for url in loaded), loaded
    schema_url = re.search(r'data-schema-url="([^"]+)"', html).group(1).replace("&amp;", "&")
    schema = client.get(schema_url)
    assert schema.status_code == 200 and "/api/v1/approvals/" in json.loads(schema.content)["paths"]


def test_signed_out_people_are_sent_to_sign_in(db):
    response = Client().get(reverse("api_docs"))
    assert response.status_code == 302 and response["Location"].startswith(reverse("login"))
