"""The approval queue's reads: the cards of waiting calls and the recent decisions (cards.py),
which controls a card offers (card_controls.py), the supervision facts both read (facts.py), a
call's arguments as lines (argument_lines.py), and which new cards to announce to a person
(announcements.py)."""
