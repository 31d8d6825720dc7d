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


def test_the_model_a_span_names_is_the_one_asked_for_the_answer_not_the_first_of_the_list():
    from runs.observability.tracing.values import model_answering

    models = ["gpt-4o", "llama3", "mistral"]
    assert model_answering([], models) == "gpt-4o"
    assert model_answering(["gpt-4o: HTTP 503: down"], models) == "llama3"
    assert model_answering(["gpt-4o: HTTP 503: down", "llama3: timed out"], models) == "mistral"
    # Asked again after these: the same model answered.
    assert model_answering(["gpt-4o: HTTP 503: down",
                            "llama3: tool_choice required refused (HTTP 500: no); retried with auto"], models) == "llama3"
    assert model_answering(["gpt-4o: the conversation is too long for its context (HTTP 400: long); older results "
                            "summarised harder and asked again"], models) == "gpt-4o"
    assert model_answering(["mistral: HTTP 500: x"], models) is None  # none after the last: the texts do not say
    assert model_answering(["other: HTTP 500: x"], models) is None


def test_the_conversation_id_names_the_installation_and_never_its_key():
    from runs.observability.tracing.values import conversation_id, installation_id

    assert conversation_id(7, "site-one") == f"{installation_id('site-one')}-7"
    assert conversation_id(7, "site-one") != conversation_id(7, "site-two")
    assert len(installation_id("site-one")) == 16 and "site-one" not in conversation_id(7, "site-one")


def test_a_failed_tool_calls_reason_is_in_our_words_never_its_error_text():
    from runs.observability.tracing.values import tool_failure

    assert tool_failure("unknown tool 'TASK-SECRET'; available tools: a, b") == "no tool of the run by that name"
    assert tool_failure("invalid arguments at $.to: 'SECRET' is not of type 'integer'") == (
        "arguments refused by the tool's schema")
    assert tool_failure("the tool timed out after 30 seconds") == "timed out"
    assert tool_failure("the tool failed with an unexpected KeyError") == "the tool raised KeyError"
    assert tool_failure("card 4111 declined by SECRET-BANK") == "the tool reported an error"
