"""Writing audit entries: what an object was before and after a change, as plain data, with its
secrets masked (settings.AUDITED_MODELS says which fields are secret and which are noise)."""
import ipaddress
import json
from urllib.parse import urlsplit

from django.conf import settings
from django.core.serializers.json import DjangoJSONEncoder

from audit.context import current_actor, current_door
from audit.models import AuditEntry

MASK = "••••"
MAX_VALUE_CHARS = 2000  # of one field's value in an entry; longer text is cut and says so


def model_key(model) -> str:
    return f"{model._meta.app_label}.{model.__name__}"


def audited(model) -> dict | None:
    """The audit settings of this model ({"secret": [...], "ignore": [...], "url": [...], "kind": ...}),
    or None when its changes are not audited."""
    return settings.AUDITED_MODELS.get(model_key(model))


def snapshot(instance, spec: dict) -> dict:
    """Every concrete field of `instance` but the ignored ones, as JSON values."""
    values = {}
    for field in instance._meta.concrete_fields:
        name = field.attname
        if name in spec.get("ignore", ()) or field.primary_key:
            continue
        values[name] = _plain(getattr(instance, name))
    return values


def _plain(value):
    value = json.loads(json.dumps(value, cls=DjangoJSONEncoder, default=str))
    if isinstance(value, str) and len(value) > MAX_VALUE_CHARS:
        return value[:MAX_VALUE_CHARS] + f"… ({len(value)} characters)"
    return value


def masked(values: dict, spec: dict, *, other: dict | None = None) -> dict:
    """`values` with secrets replaced: a secret field reads "••••" (or "•••• (changed)" when it
    differs from `other`); a URL field keeps only its scheme and host (URLs carry tokens)."""
    shown = dict(values)
    for name in spec.get("secret", ()):
        if name in shown:
            changed = other is not None and other.get(name) != values.get(name)
            shown[name] = f"{MASK} (changed)" if changed else (MASK if values.get(name) not in ("", None, {}, []) else "")
    for name in spec.get("url", ()):
        if isinstance(shown.get(name), str) and shown[name]:
            parts = urlsplit(shown[name])
            shown[name] = f"{parts.scheme}://{parts.hostname or ''}/{MASK}" if parts.scheme else MASK
    return shown


def _address(value) -> str | None:
    """An address the column can hold, or None (a proxy's "unknown", a port appended...)."""
    try:
        return str(ipaddress.ip_address(str(value).strip())) if value else None
    except ValueError:
        return None


def shown_repr(instance, spec: dict) -> str:
    """The object's name for the log, with any secret or URL field's value in it masked as in
    the entry's values (a webhook is named by its URL, which can be a credential)."""
    text = str(instance)
    values = {name: getattr(instance, name, None) for name in (*spec.get("secret", ()), *spec.get("url", ()))}
    shown = masked(values, spec)
    for name, value in values.items():
        if isinstance(value, str) and len(value) >= 4 and value in text:
            text = text.replace(value, str(shown.get(name) or MASK))
    return text


def entry_write(*, action: str, kind: str, object_id="", object_repr: str = "", before: dict | None = None,
                after: dict | None = None, detail: str = "", actor=None, address: str | None = None,
                via: str = "") -> AuditEntry:
    actor = actor or current_actor()
    return AuditEntry.objects.create(
        actor_id=actor.user_id if actor else None, actor_name=actor.name if actor else "",
        via=via or (actor.via if actor else current_door()), address=_address(address or (actor.address if actor else None)),
        action=action, kind=kind, object_id=str(object_id or "")[:64], object_repr=str(object_repr)[:300],
        before=before or {}, after=after or {}, detail=detail,
    )
