from channels.generic.websocket import AsyncJsonWebsocketConsumer


class RunTimelineConsumer(AsyncJsonWebsocketConsumer):
    async def connect(self):
        await self.close()
