"""The run's controls, apart from supervision of its calls: the levers an operator pulls on a
running run (levers.py: pause, resume, stop, a note, each declared once as lever_declaration.py
says, and the page, the API and the socket derive their routes, views and buttons from that;
lever_state.py: what the pages show of them)
and the budgets that hold runs (budgets.py), the raises people ask for and grant
(budget_requests.py) and the warnings when a budget is nearly spent (budget_warnings.py)."""
