"""What one websocket can make the timeline consumer do: a resume sends a bounded part of a long
history, resumes are rate-limited per connection, and a frame nested too deeply is an error
message, not a dropped socket. On the real ASGI stack and the channels-redis layer."""
from asgiref.sync import async_to_sync

from tests.web.websockets import test_consumer_timeline as timeline
from tests.web.websockets.test_consumer_timeline import TIMEOUT, communicator, replay, stored

finished_run, session_cookie = timeline.finished_run, timeline.session_cookie  # fixtures


def test_a_resume_sends_at_most_the_configured_events_and_says_there_are_more(finished_run, session_cookie, settings):
    settings.RUN_TIMELINE_RESUME_EVENTS = 2
    cookie = session_cookie("viewers")
    expected = stored(finished_run.pk)
    assert len(expected) >= 5

    async def go():
        ws = communicator(finished_run.pk, cookie)
        assert (await ws.connect(timeout=TIMEOUT))[0]
        parts, after = [], 0
        while True:  # as the page does: ask again after "last" while there is more
            events, end = await replay(ws, after)
            parts.append((events, end))
            after = end["last"]
            if not end.get("more"):
                break
        await ws.disconnect()
        return parts

    parts = async_to_sync(go)()
    assert all(len(events) <= 2 for events, _ in parts)
    assert parts[0][1] == {"type": "resumed", "last": 2, "more": True}
    assert [e for events, _ in parts for e in events] == expected
    assert "more" not in parts[-1][1]


def test_resumes_past_the_rate_limit_get_an_error_with_a_retry_time_and_the_socket_stays_open(
    finished_run, session_cookie, settings
):
    settings.RUN_TIMELINE_RESUMES_PER_WINDOW = 3
    cookie = session_cookie("viewers")

    async def go():
        ws = communicator(finished_run.pk, cookie)
        assert (await ws.connect(timeout=TIMEOUT))[0]
        allowed = [await replay(ws, 0) for _ in range(3)]
        await ws.send_json_to({"type": "resume", "after": 0})
        refused = await ws.receive_json_from(timeout=TIMEOUT)
        nothing_read = await ws.receive_nothing(timeout=0.5)
        await ws.send_json_to({"type": "hello"})
        still_open = await ws.receive_json_from(timeout=TIMEOUT)
        await ws.disconnect()
        return allowed, refused, nothing_read, still_open

    allowed, refused, nothing_read, still_open = async_to_sync(go)()
    assert all(events == stored(finished_run.pk) for events, _ in allowed)
    assert refused["type"] == "error" and "too many resumes" in refused["message"]
    assert 1 <= refused["retry_after"] <= 11
    assert nothing_read
    assert still_open["type"] == "error"


def test_a_frame_nested_a_hundred_thousand_levels_deep_is_an_error_and_the_socket_stays_open(
    finished_run, session_cookie
):
    cookie = session_cookie("viewers")

    async def go():
        ws = communicator(finished_run.pk, cookie)
        assert (await ws.connect(timeout=TIMEOUT))[0]
        await ws.send_to(text_data='{"type": "resume", "after": ' + "[" * 100_000 + "]" * 100_000 + "}")
        error = await ws.receive_json_from(timeout=TIMEOUT)
        events, _ = await replay(ws, 0)
        await ws.disconnect()
        return error, events

    error, events = async_to_sync(go)()
    assert error["type"] == "error"
    assert events == stored(finished_run.pk)


def test_the_approvals_socket_answers_a_frame_nested_too_deeply_or_not_json_with_an_error(
    finished_run, session_cookie
):
    from channels.testing import WebsocketCommunicator

    from agentsite.asgi import application

    cookie = session_cookie("operators")

    async def go():
        ws = WebsocketCommunicator(application, "/ws/approvals/",
                                   headers=[(b"origin", timeline.LOCAL), (b"host", timeline.LOCAL_HOST),
                                            (b"cookie", cookie.encode())])
        assert (await ws.connect(timeout=TIMEOUT))[0]
        await ws.send_to(text_data='{"type": "decide", "approval_id": ' + "[" * 100_000 + "]" * 100_000 + "}")
        deep = await ws.receive_json_from(timeout=TIMEOUT)
        await ws.send_to(text_data="not json")
        not_json = await ws.receive_json_from(timeout=TIMEOUT)
        await ws.disconnect()
        return deep, not_json

    deep, not_json = async_to_sync(go)()
    assert deep["type"] == "error" and not_json["type"] == "error"
