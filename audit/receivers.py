"""What the audit log listens to: saves and deletions of the models settings.AUDITED_MODELS names
(every path: pages, the API, the admin, commands), changes of a person's groups (their roles) and
of an agent's tools, and sign-ins. Connected once, by AuditConfig.ready."""
from django.apps import apps
from django.contrib.auth import get_user_model
from django.contrib.auth.signals import user_logged_in, user_login_failed
from django.db.models.signals import m2m_changed, post_delete, post_save, pre_save

from audit.context import request_address
from audit.models import AuditEntry
from audit.record import audited, entry_write, masked, shown_repr, snapshot

Action = AuditEntry.Action
_BEFORE = "_audit_before"


def connect() -> None:
    from django.conf import settings

    for key in settings.AUDITED_MODELS:
        model = apps.get_model(key)
        uid = f"audit-{key}"
        pre_save.connect(_before_save, sender=model, dispatch_uid=uid + "-pre")
        post_save.connect(_after_save, sender=model, dispatch_uid=uid + "-post")
        post_delete.connect(_after_delete, sender=model, dispatch_uid=uid + "-delete")
        for field in model._meta.many_to_many:
            if field.name in settings.AUDITED_MODELS[key].get("many", ()):
                m2m_changed.connect(_many_changed, sender=field.remote_field.through, dispatch_uid=f"{uid}-{field.name}")
    user_logged_in.connect(_signed_in, dispatch_uid="audit-signed-in")
    user_login_failed.connect(_sign_in_failed, dispatch_uid="audit-sign-in-failed")


def _kind(model, spec) -> str:
    return spec.get("kind") or model._meta.verbose_name


def _before_save(sender, instance, raw=False, **kwargs):
    spec = audited(sender)
    if raw or spec is None or instance.pk is None:
        return
    stored = sender._base_manager.filter(pk=instance.pk).first()
    setattr(instance, _BEFORE, snapshot(stored, spec) if stored is not None else None)


def _after_save(sender, instance, created, raw=False, **kwargs):
    spec = audited(sender)
    if raw or spec is None:
        return
    after = snapshot(instance, spec)
    before = getattr(instance, _BEFORE, None)
    if hasattr(instance, _BEFORE):
        delattr(instance, _BEFORE)
    if created or before is None:
        entry_write(action=Action.CREATED, kind=_kind(sender, spec), object_id=instance.pk, object_repr=shown_repr(instance, spec),
                    after=masked(after, spec))
        return
    changed = sorted(name for name in after if before.get(name) != after.get(name))
    if not changed:
        return  # a save that changed nothing the log keeps (a timestamp, a counter)
    old = {name: before.get(name) for name in changed}
    new = {name: after[name] for name in changed}
    entry_write(action=Action.UPDATED, kind=_kind(sender, spec), object_id=instance.pk, object_repr=shown_repr(instance, spec),
                before=masked(old, spec, other=new), after=masked(new, spec, other=old))


def _after_delete(sender, instance, **kwargs):
    spec = audited(sender)
    if spec is None:
        return
    entry_write(action=Action.DELETED, kind=_kind(sender, spec), object_id=instance.pk, object_repr=shown_repr(instance, spec),
                before=masked(snapshot(instance, spec), spec))


def _many_changed(sender, instance, action, reverse, model, pk_set, **kwargs):
    """A person's groups (roles) or an agent's tools, added, removed or cleared."""
    if action not in ("post_add", "post_remove", "pre_clear") or reverse:
        return
    owner = type(instance)
    spec = audited(owner)
    if spec is None:
        return
    field = next(f for f in owner._meta.many_to_many if f.remote_field.through is sender)
    if action == "pre_clear":
        names = sorted(str(o) for o in getattr(instance, field.name).all())
        if not names:
            return
        before, after = {field.name: names}, {field.name: []}
    else:
        names = sorted(str(o) for o in model._default_manager.filter(pk__in=pk_set or ()))
        if not names:
            return
        key = "added" if action == "post_add" else "removed"
        before, after = {}, {f"{field.name} {key}": names}
    entry_write(action=Action.UPDATED, kind=_kind(owner, spec), object_id=instance.pk, object_repr=shown_repr(instance, spec),
                before=before, after=after)


def _signed_in(sender, request, user, **kwargs):
    entry_write(action=Action.SIGNED_IN, kind="sign-in", object_id=user.pk, object_repr=user.get_username(),
                detail=_how(request), actor=_as(user, request), address=request_address(request) if request else None)


def _sign_in_failed(sender, credentials, request=None, **kwargs):
    name = str((credentials or {}).get("username", ""))[:150]  # never the password (Django masks it too)
    known = get_user_model()._default_manager.filter(username=name).exists() if name else False
    entry_write(action=Action.SIGN_IN_FAILED, kind="sign-in", object_repr=name,
                detail="an existing account" if known else "no account of that name",
                address=request_address(request) if request is not None else None)


def _as(user, request):
    from audit.context import Actor
    return Actor(user.pk, user.get_username(), "page", request_address(request) if request is not None else None)


def _how(request) -> str:
    path = getattr(request, "path", "") or ""
    return "single sign-on" if "oidc" in path or "sso" in path else "password"
