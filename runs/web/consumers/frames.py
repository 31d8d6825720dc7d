"""Reading websocket frames: a frame that is not JSON, or JSON nested deeper than 64 levels,
becomes None (the consumer answers with an error) instead of an exception that drops the socket."""
from channels.generic.websocket import AsyncJsonWebsocketConsumer

from hosting.text import loads


class BoundedJsonConsumer(AsyncJsonWebsocketConsumer):
    @classmethod
    async def decode_json(cls, text_data):
        try:
            return loads(text_data)
        except ValueError:
            return None
