"""What changed inside two values: words removed and added, keys added, removed and changed."""
from runs.lifecycle.value_changes import MAX_TOKENS, json_object, key_changes, word_changes


def test_word_changes_mark_whole_words_and_each_side_joins_back_to_its_text():
    old, new = "The weather in Lagos is hot today.", "The weather in London is cold today."
    changes = word_changes(old, new)
    assert [text for kind, text in changes["old"] if kind == "removed"] == ["Lagos", "hot"]
    assert [text for kind, text in changes["new"] if kind == "added"] == ["London", "cold"]
    assert "".join(text for _, text in changes["old"]) == old
    assert "".join(text for _, text in changes["new"]) == new


def test_an_empty_side_and_texts_too_long_to_compare_are_changed_whole():
    assert word_changes("", "new words") == {"old": [], "new": [("added", "new words")]}
    long = "word " * (MAX_TOKENS + 1)
    assert word_changes(long, "other") == {"old": [("removed", long)], "new": [("added", "other")]}


def test_key_changes_at_any_depth_in_the_old_order_then_the_added():
    old = {"city": "Lagos", "filters": {"days": 3, "tags": ["a"]}, "gone": 1}
    new = {"city": "London", "filters": {"days": 3, "tags": ["a", "b"]}, "extra": None}
    assert key_changes(old, new) == [
        {"path": "city", "change": "changed", "old": '"Lagos"', "new": '"London"'},
        {"path": "gone", "change": "removed", "old": "1", "new": ""},
        {"path": "filters.tags[1]", "change": "added", "old": "", "new": '"b"'},
        {"path": "extra", "change": "added", "old": "", "new": "null"},
    ]


def test_only_a_whole_json_object_is_compared_by_keys():
    assert json_object('{"a": 1}') == {"a": 1}
    assert json_object('{"a": 1, "b": "cut her') is None and json_object("[1]") is None and json_object("") is None
