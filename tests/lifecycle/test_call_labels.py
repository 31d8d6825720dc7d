"""A call's name, the same on every page: tool, arguments in short (masked as shown), step."""
from runs.lifecycle.call_labels import ARGUMENTS_CHARS, arguments_in_short, call_label
from toolsapp.sensitive import MASK


def test_a_label_names_the_tool_its_arguments_in_short_and_its_step():
    label = call_label(tool="get_weather", arguments='{\n  "city": "Lagos",\n  "days": 3\n}', step=2)
    assert label == {"tool": "get_weather", "arguments": '(city="Lagos", days=3)', "step": "step 2",
                     "text": 'get_weather(city="Lagos", days=3) · step 2'}


def test_nested_values_fold_long_ones_are_cut_and_masked_ones_stay_masked():
    assert arguments_in_short({"filters": {"a": 1}, "ids": [1, 2], "none": [], "card": MASK, "ok": True}) == (
        'filters={…}, ids=[…], none=[], card="••••", ok=true')
    assert arguments_in_short({"note": "x" * 40}) == 'note="' + "x" * 23 + '…"'
    short = arguments_in_short({f"key{n}": n for n in range(20)})
    assert len(short) == ARGUMENTS_CHARS and short.endswith("…")


def test_arguments_that_cannot_be_read_are_an_ellipsis_and_a_call_without_a_step_has_none():
    assert call_label(tool="t", arguments="(not valid JSON; hidden because this tool has sensitive fields)", step=None)["text"] == "t(…)"
    assert call_label(tool="t", arguments="{}", step=1)["text"] == "t() · step 1"
