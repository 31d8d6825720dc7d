import re

from django.db import transaction
from django.utils import timezone

from toolsapp.executors.base import ToolError
from toolsapp.executors.python import python_handler
from toolsapp.models import Order
from toolsapp.verifiers import verifier


def _order_for(order_id: str, customer: str) -> Order:
    order = Order.objects.filter(order_id=order_id.strip().upper()).first()
    # The same message for "missing" and "someone else's", so ids of other customers do not leak.
    if order is None or order.customer != customer:
        raise ToolError(f"order {order_id} not found for this customer")
    return order


def _order_data(order: Order) -> dict:
    return {
        "order_id": order.order_id,
        "item": order.item,
        "total": str(order.total),
        "status": order.status,
    }


@python_handler("lookup_order", read_only=True)
def lookup_order(args, ctx):
    return _order_data(_order_for(args["order_id"], ctx.customer))


@python_handler("cancel_order")
def cancel_order(args, ctx):
    with transaction.atomic():
        _order_for(args["order_id"], ctx.customer)
        order = Order.objects.select_for_update().get(order_id=args["order_id"].strip().upper())
        if order.status == Order.Status.CANCELLED:
            # A repeated key gets the first outcome back; anything else learns it is already done.
            first = order.cancel_idempotency_key == ctx.idempotency_key
            return {**_order_data(order), "cancelled": first, "already_cancelled": not first}
        if order.status == Order.Status.SHIPPED:
            raise ToolError(f"order {order.order_id} has shipped and can no longer be cancelled")
        order.status = Order.Status.CANCELLED
        order.cancel_reason = args["reason"]
        order.cancel_idempotency_key = ctx.idempotency_key
        order.cancelled_at = timezone.now()
        order.save()
    return {**_order_data(order), "cancelled": True, "already_cancelled": False}


@verifier("orders_cancelled")
def orders_cancelled(*, run_id, answer, customer=""):
    """An answer that claims a cancellation must match the order's real status."""
    if "cancelled order" not in (answer or "").lower():
        return True, ""
    for order_id in re.findall(r"ORD-\d+", answer):
        order = Order.objects.filter(order_id=order_id, customer=customer).first()
        if order is None or order.status != Order.Status.CANCELLED:
            return False, f"the answer says {order_id} was cancelled, but its status is not cancelled"
    return True, ""
