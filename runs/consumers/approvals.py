from channels.generic.websocket import AsyncJsonWebsocketConsumer


class ApprovalsConsumer(AsyncJsonWebsocketConsumer):
    async def connect(self):
        await self.close()
