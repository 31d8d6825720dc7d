"""The pure parts of the trace export: ids derived from the run, and what a model failure leaves as."""

from runs.observability.tracing.values import error_type, model_failures, run_span_id, span_id, trace_id


def test_a_runs_ids_are_the_same_in_every_process_of_a_site_and_differ_between_sites(settings):
    settings.ARGS_HASH_KEY = "site-one"
    ours = (trace_id(7), run_span_id(7), span_id(7, "step", 1))
    assert ours == (trace_id(7), run_span_id(7), span_id(7, "step", 1))
    assert trace_id(7) != trace_id(8) and run_span_id(7) != span_id(7, "step", 1)
    assert 0 < trace_id(7) < 2**128 and 0 < run_span_id(7) < 2**64
    settings.ARGS_HASH_KEY = "site-two"  # another install sending to the same collector
    assert trace_id(7) != ours[0] and run_span_id(7) != ours[1]


def test_a_model_failure_leaves_as_its_model_and_a_kind_of_error_never_its_text():
    models = ["llama3:8b", "llama3", "gpt-4o"]
    errors = [
        "llama3:8b: HTTP 500: upstream said SECRET-TEXT",
        "llama3: timed out",
        "gpt-4o: connection failed: [Errno 111] SECRET-HOST refused",
        "gpt-4o: BadResponse: the response has no choices",
        "gpt-4o: tool_choice required refused (HTTP 400: no); retried with auto",
        "other: HTTP 429: slow down",
    ]
    assert model_failures(errors, models) == [
        ("llama3:8b", "500"),
        ("llama3", "timeout"),
        ("gpt-4o", "connection_error"),
        ("gpt-4o", "BadResponse"),
        ("gpt-4o", "tool_choice_refused"),
        ("unknown", "429"),
    ]
    assert error_type("the answer is larger than 100 bytes") == "error"
