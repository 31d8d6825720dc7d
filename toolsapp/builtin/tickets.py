import re

from django.db import IntegrityError, transaction
from django.db.models import Q

from toolsapp.executors.base import ToolError
from toolsapp.executors.python import python_handler
from toolsapp.models import Ticket
from toolsapp.verifiers import verifier


def _ticket_data(ticket: Ticket) -> dict:
    return {"ticket_id": ticket.pk, "title": ticket.title, "body": ticket.body, "priority": ticket.priority}


@python_handler("search_tickets", read_only=True)
def search_tickets(args, ctx):
    words = [w for w in re.findall(r"\w+", args["query"]) if len(w) > 2][:8]
    query = Q()
    for word in words:
        query |= Q(title__icontains=word) | Q(body__icontains=word)
    tickets = Ticket.objects.filter(query).order_by("-pk")[:10] if words else []
    return {"tickets": [{"ticket_id": t.pk, "title": t.title, "priority": t.priority} for t in tickets]}


@python_handler("create_ticket")
def create_ticket(args, ctx):
    title = args["title"]
    if not title.startswith("[TEST] "):
        raise ToolError('title must start with "[TEST] " on this demo installation')
    # Idempotent twice over: a retried call (same key) and a model that asks again with the same
    # arguments both get the first ticket back instead of a duplicate.
    existing = (
        Ticket.objects.filter(idempotency_key=ctx.idempotency_key).first()
        or Ticket.objects.filter(title=title, body=args["body"], priority=args["priority"]).first()
    )
    if existing:
        return {**_ticket_data(existing), "created": False}
    try:
        with transaction.atomic():
            ticket = Ticket.objects.create(
                title=title,
                body=args["body"],
                priority=args["priority"],
                idempotency_key=ctx.idempotency_key,
                created_by_run=ctx.run_id,
            )
    except IntegrityError:  # another delivery of the same call got there first
        ticket = Ticket.objects.get(idempotency_key=ctx.idempotency_key)
        return {**_ticket_data(ticket), "created": False}
    return {**_ticket_data(ticket), "created": True}


@python_handler("get_ticket", read_only=True)
def get_ticket(args, ctx):
    ticket = Ticket.objects.filter(pk=args["ticket_id"]).first()
    if ticket is None:
        raise ToolError(f"ticket {args['ticket_id']} does not exist")
    return _ticket_data(ticket)


@verifier("ticket_exists")
def ticket_exists(*, run_id, answer, customer=""):
    ids = [int(n) for n in re.findall(r"#(\d+)", answer or "")]
    if not ids:
        return False, "the answer names no ticket number (#N); create the ticket and give its number"
    missing = [i for i in ids if not Ticket.objects.filter(pk=i).exists()]
    if missing:
        return False, f"ticket(s) {', '.join(f'#{i}' for i in missing)} named in the answer do not exist"
    return True, ""
