"""A fresh channel layer object per test that runs consumers over channels-redis."""

from channels import DEFAULT_CHANNEL_LAYER
from channels.layers import channel_layers


def fresh_channel_layer() -> None:
    """Make the next get_channel_layer() a new layer object, so consumers start from clean state.

    channels-redis 4.3 keeps per-channel asyncio locks on the layer object; a receive cancelled
    while it waits for one (a consumer whose socket closes just after a message) leaves that lock
    behind, bound to the event loop it ran on. Each async_to_sync call in a test runs a new event
    loop, so a later test that received on the same layer object failed with "bound to a
    different event loop". A server has one event loop per process and never meets it.
    """
    channel_layers.backends.pop(DEFAULT_CHANNEL_LAYER, None)
