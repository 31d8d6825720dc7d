"""When two usernames read alike: their skeletons are equal.

A skeleton in the manner of Unicode TR39 (confusable detection), kept small and case-blind: NFKC,
format characters (zero-width and the like) dropped, the common Cyrillic and Greek lookalikes of
Latin letters folded to them, case folded, then the Latin letters and digits that read as one
another (I l 1, O 0, rn m) folded together. It only compares names; no name is stored as its
skeleton. TR39's full table (confusables.txt) would catch more scripts; this one covers the letters
that make Latin-looking names from the keyboards people most likely have.
"""

import unicodedata

# Before case folding, as case matters here: a capital Cyrillic Н looks like H, its small н not like h.
SCRIPT_LOOKALIKES = str.maketrans(
    {
        # Cyrillic
        "А": "a", "В": "b", "Е": "e", "К": "k", "М": "m", "Н": "h", "О": "o", "Р": "p", "С": "c",
        "Т": "t", "У": "y", "Х": "x", "Ѕ": "s", "І": "i", "Ј": "j", "Ԛ": "q", "Ԝ": "w", "Ӏ": "i",
        "а": "a", "е": "e", "о": "o", "р": "p", "с": "c", "у": "y", "х": "x", "ѕ": "s", "і": "i",
        "ј": "j", "ԁ": "d", "һ": "h", "ӏ": "i", "ԛ": "q", "ԝ": "w", "ь": "b", "ѵ": "v",
        # Greek
        "Α": "a", "Β": "b", "Ε": "e", "Ζ": "z", "Η": "h", "Ι": "i", "Κ": "k", "Μ": "m", "Ν": "n",
        "Ο": "o", "Ρ": "p", "Τ": "t", "Υ": "y", "Χ": "x",
        "α": "a", "ο": "o", "ρ": "p", "ν": "v", "ι": "i", "κ": "k", "υ": "u", "χ": "x", "γ": "y",
    }
)  # fmt: skip
# After case folding: capital I is i there, and reads as l and 1.
LATIN_LOOKALIKES = str.maketrans({"i": "l", "1": "l", "|": "l", "ı": "l", "0": "o"})


def username_skeleton(name: str) -> str:
    """What `name` looks like: equal for names a person could take for one another."""
    text = "".join(ch for ch in unicodedata.normalize("NFKC", name) if unicodedata.category(ch) != "Cf")
    return text.translate(SCRIPT_LOOKALIKES).casefold().translate(LATIN_LOOKALIKES).replace("rn", "m")
