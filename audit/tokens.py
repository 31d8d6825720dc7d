"""API tokens seen from a new address: the first use of a token from each address is an audit
entry. One read per request at most, and none once this process has seen the pair."""
from django.db import IntegrityError, transaction

from audit.context import Actor
from audit.models import AuditEntry, KnownAddress
from audit.record import entry_write


def token_used(*, token_id: int, token_repr: str, user, address: str | None) -> None:
    if not address or _seen(token_id, address):
        return
    try:
        with transaction.atomic():
            _, new = KnownAddress.objects.get_or_create(token_id=token_id, address=address)
            if new:
                entry_write(action=AuditEntry.Action.TOKEN_NEW_ADDRESS, kind="api token", object_id=token_id,
                            object_repr=token_repr, detail=f"first use from {address}",
                            actor=Actor(user.pk, user.get_username(), "api", address), address=address)
    except IntegrityError:
        return  # another request recorded it first
    _remember(token_id, address)


_known: set[tuple[int, str]] = set()


def _seen(token_id: int, address: str) -> bool:
    return (token_id, address) in _known


def _remember(token_id: int, address: str) -> None:
    if len(_known) > 50_000:
        _known.clear()
    _known.add((token_id, address))

