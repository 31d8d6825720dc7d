"""Outgoing notifications: the webhook outbox (webhooks.py), a delivery row written with the event
that causes it and sent by a task, the webhooks settings page's receivers, and the bodies of the
events. The e-mails of escalations, expiry warnings and budget warnings are sent where those are
decided (runs/supervision/approvals/, runs/controls/), alongside a webhook each."""
