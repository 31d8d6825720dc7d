"""What the model is sent: the run's messages rebuilt from its rows (conversation.py), the context
window that estimates a request and compacts old tool results to fit the budget (window.py), and
one driver's requests fitted into that budget with the tools it offers (request_fit.py)."""
