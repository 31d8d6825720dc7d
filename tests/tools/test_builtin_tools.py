"""The built-in demo tools' handlers and verifiers, called directly (as the executor calls them)."""
from decimal import Decimal

import pytest

from toolsapp.executors.base import ToolContext, ToolError
from toolsapp.executors.python import PYTHON_HANDLERS
from toolsapp.models import Order, Ticket, WeatherReport
from toolsapp.verifiers import VERIFIERS

pytestmark = pytest.mark.django_db


def handler(name):
    return PYTHON_HANDLERS[name]


def ctx(key="key-1", customer="acme", run_id=1, call_id="call_1"):
    return ToolContext(run_id=run_id, call_id=call_id, idempotency_key=key, customer=customer)


@pytest.fixture
def orders():
    rows = {}
    for order_id, customer, item, status in [
        ("ORD-9001", "acme", "Standing desk", "open"),
        ("ORD-9002", "acme", "Monitor arm", "shipped"),
        ("ORD-9003", "globex", "Office chair", "open"),
    ]:
        rows[order_id] = Order.objects.create(
            order_id=order_id, customer=customer, item=item, total=Decimal("10.50"), status=status
        )
    return rows


TICKET = {"title": "[TEST] Login page is slow", "body": "Takes 30 s to load", "priority": "high"}


# --- get_weather ----------------------------------------------------------------------------------


def test_get_weather_returns_the_stored_report_case_insensitively():
    WeatherReport.objects.create(city="Testville", temperature_c=21.5, conditions="fog")
    result = handler("get_weather")({"city": "  testVILLE "}, ctx())
    assert result == {"city": "Testville", "temperature_c": 21.5, "conditions": "fog"}


def test_get_weather_unknown_city_is_a_tool_error_listing_known_cities():
    WeatherReport.objects.create(city="Testville", temperature_c=21.5, conditions="fog")
    with pytest.raises(ToolError) as info:
        handler("get_weather")({"city": "Atlantis"}, ctx())
    assert "Atlantis" in str(info.value) and "Testville" in str(info.value)


# --- tickets ----------------------------------------------------------------------------------------


def test_create_ticket_creates_one_ticket_with_the_run_and_key():
    result = handler("create_ticket")(TICKET, ctx(key="k-create", run_id=42))
    assert result["created"] is True
    ticket = Ticket.objects.get(pk=result["ticket_id"])
    assert (ticket.title, ticket.body, ticket.priority) == (TICKET["title"], TICKET["body"], "high")
    assert ticket.idempotency_key == "k-create" and ticket.created_by_run == 42


def test_create_ticket_same_key_returns_the_earlier_ticket():
    first = handler("create_ticket")(TICKET, ctx(key="k-same"))
    again = handler("create_ticket")({**TICKET, "title": "[TEST] something else"}, ctx(key="k-same"))
    assert again["ticket_id"] == first["ticket_id"]
    assert again["created"] is False
    assert Ticket.objects.count() == 1
    assert Ticket.objects.get().title == TICKET["title"]


def test_create_ticket_same_arguments_with_another_key_returns_the_earlier_ticket():
    first = handler("create_ticket")(TICKET, ctx(key="k-a"))
    again = handler("create_ticket")(dict(TICKET), ctx(key="k-b", run_id=2))
    assert again["ticket_id"] == first["ticket_id"] and again["created"] is False
    assert Ticket.objects.count() == 1


def test_create_ticket_different_arguments_and_key_make_a_new_ticket():
    first = handler("create_ticket")(TICKET, ctx(key="k-a"))
    second = handler("create_ticket")({**TICKET, "priority": "low"}, ctx(key="k-b"))
    assert second["created"] is True and second["ticket_id"] != first["ticket_id"]
    assert Ticket.objects.count() == 2


def test_create_ticket_requires_the_test_prefix():
    with pytest.raises(ToolError, match=r"\[TEST\] "):
        handler("create_ticket")({**TICKET, "title": "Login page is slow"}, ctx())
    assert not Ticket.objects.exists()


def test_get_ticket_returns_the_ticket():
    ticket = Ticket.objects.create(title="[TEST] a", body="b", priority="low")
    assert handler("get_ticket")({"ticket_id": ticket.pk}, ctx()) == {
        "ticket_id": ticket.pk,
        "title": "[TEST] a",
        "body": "b",
        "priority": "low",
    }


def test_get_ticket_missing_is_a_tool_error():
    with pytest.raises(ToolError, match="999999 does not exist"):
        handler("get_ticket")({"ticket_id": 999999}, ctx())


def test_search_tickets_finds_by_words_in_title_or_body_newest_first():
    older = Ticket.objects.create(title="[TEST] Printer jam", body="tray two", priority="low")
    newer = Ticket.objects.create(title="[TEST] Network down", body="the printer cannot be reached", priority="high")
    Ticket.objects.create(title="[TEST] Coffee", body="machine empty", priority="low")
    result = handler("search_tickets")({"query": "printer"}, ctx())
    assert [t["ticket_id"] for t in result["tickets"]] == [newer.pk, older.pk]


def test_search_tickets_with_only_short_words_finds_nothing():
    Ticket.objects.create(title="[TEST] a b", body="of to", priority="low")
    assert handler("search_tickets")({"query": "a b of"}, ctx()) == {"tickets": []}


# --- orders -----------------------------------------------------------------------------------------


def test_lookup_order_of_the_customer(orders):
    result = handler("lookup_order")({"order_id": "ord-9001"}, ctx(customer="acme"))
    assert result == {"order_id": "ORD-9001", "item": "Standing desk", "total": "10.50", "status": "open"}


@pytest.mark.parametrize("order_id", ["ORD-9003", "ORD-9999"], ids=["other-customer", "missing"])
def test_lookup_order_of_another_customer_looks_like_a_missing_order(orders, order_id):
    with pytest.raises(ToolError) as info:
        handler("lookup_order")({"order_id": order_id}, ctx(customer="acme"))
    assert str(info.value) == f"order {order_id} not found for this customer"


def test_cancel_order_cancels_an_open_order(orders):
    result = handler("cancel_order")({"order_id": "ORD-9001", "reason": "changed mind"}, ctx(key="k-cancel"))
    assert result["cancelled"] is True and result["already_cancelled"] is False and result["status"] == "cancelled"
    order = Order.objects.get(order_id="ORD-9001")
    assert order.status == "cancelled"
    assert order.cancel_reason == "changed mind"
    assert order.cancel_idempotency_key == "k-cancel"
    assert order.cancelled_at is not None


def test_cancel_order_same_key_returns_the_first_outcome_without_changing_anything(orders):
    cancel = handler("cancel_order")
    first = cancel({"order_id": "ORD-9001", "reason": "first reason"}, ctx(key="k-1"))
    cancelled_at = Order.objects.get(order_id="ORD-9001").cancelled_at
    again = cancel({"order_id": "ORD-9001", "reason": "second reason"}, ctx(key="k-1"))
    assert again == first
    order = Order.objects.get(order_id="ORD-9001")
    assert order.cancel_reason == "first reason" and order.cancelled_at == cancelled_at


def test_cancel_order_another_key_learns_it_was_already_cancelled(orders):
    cancel = handler("cancel_order")
    cancel({"order_id": "ORD-9001", "reason": "first reason"}, ctx(key="k-1"))
    other = cancel({"order_id": "ORD-9001", "reason": "second reason"}, ctx(key="k-2"))
    assert other["cancelled"] is False and other["already_cancelled"] is True
    assert Order.objects.get(order_id="ORD-9001").cancel_idempotency_key == "k-1"


def test_cancel_order_refuses_an_order_of_another_customer(orders):
    with pytest.raises(ToolError) as info:
        handler("cancel_order")({"order_id": "ORD-9003", "reason": "not mine"}, ctx(customer="acme"))
    assert str(info.value) == "order ORD-9003 not found for this customer"
    assert "globex" not in str(info.value) and "chair" not in str(info.value).lower()
    order = Order.objects.get(order_id="ORD-9003")
    assert order.status == "open" and order.cancel_reason == "" and order.cancel_idempotency_key == ""


def test_cancel_order_refuses_a_missing_order(orders):
    with pytest.raises(ToolError, match="ORD-9999 not found for this customer"):
        handler("cancel_order")({"order_id": "ORD-9999", "reason": "ghost"}, ctx())


def test_cancel_order_refuses_a_shipped_order(orders):
    with pytest.raises(ToolError, match="shipped"):
        handler("cancel_order")({"order_id": "ORD-9002", "reason": "too late"}, ctx())
    assert Order.objects.get(order_id="ORD-9002").status == "shipped"


def test_cancel_order_without_a_customer_touches_nothing(orders):
    with pytest.raises(ToolError):
        handler("cancel_order")({"order_id": "ORD-9001", "reason": "anon"}, ctx(customer=""))
    assert Order.objects.get(order_id="ORD-9001").status == "open"


# --- verifiers -----------------------------------------------------------------------------------------


def test_ticket_exists_verifier():
    ticket = Ticket.objects.create(title="[TEST] a", body="b", priority="low")
    verify = VERIFIERS["ticket_exists"]
    assert verify(run_id=1, answer=f"Created ticket #{ticket.pk}.") == (True, "")
    ok, reason = verify(run_id=1, answer="Created the ticket.")
    assert ok is False and "ticket number" in reason
    ok, reason = verify(run_id=1, answer=f"Created #{ticket.pk} and #999999")
    assert ok is False and "#999999" in reason and f"#{ticket.pk}" not in reason


def test_orders_cancelled_verifier_checks_the_real_status(orders):
    verify = VERIFIERS["orders_cancelled"]
    assert verify(run_id=1, answer="Nothing to do.", customer="acme") == (True, "")
    ok, reason = verify(run_id=1, answer="Cancelled order ORD-9001.", customer="acme")
    assert ok is False and "ORD-9001" in reason
    Order.objects.filter(order_id="ORD-9001").update(status="cancelled")
    assert verify(run_id=1, answer="Cancelled order ORD-9001.", customer="acme") == (True, "")
    # Another customer's cancelled order does not count as this customer's.
    Order.objects.filter(order_id="ORD-9003").update(status="cancelled")
    assert verify(run_id=1, answer="Cancelled order ORD-9003.", customer="acme")[0] is False
