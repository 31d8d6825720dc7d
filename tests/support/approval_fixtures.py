"""People and a parked approval, shared by the approval queue's HTTP and websocket tests."""
import pytest
from django.contrib.auth.models import Group, User

from runs.models import Approval
from runs.supervision.approvals import decide


def make_user(name: str, group: str | None) -> User:
    user = User.objects.create_user(name, password="pw-" + name)
    if group:
        user.groups.add(Group.objects.get(name=group))
    return user


def pending_approval(run) -> Approval:
    return Approval.objects.get(run=run, status=Approval.Status.PENDING)


@pytest.fixture
def no_dispatch(monkeypatch):
    """No worker here: a decision must not enqueue the run."""
    dispatched = []
    monkeypatch.setattr(decide, "run_dispatch", lambda run_id: dispatched.append(run_id))
    return dispatched


@pytest.fixture
def alice(demo_data):
    return make_user("alice", "operators")


@pytest.fixture
def bob(demo_data):
    return make_user("bob", "operators")


@pytest.fixture
def viewer(demo_data):
    return make_user("victor", "viewers")
