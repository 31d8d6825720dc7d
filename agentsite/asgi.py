import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "agentsite.settings")
django_asgi_app = get_asgi_application()

from channels.auth import AuthMiddlewareStack  # noqa: E402
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402

from agentsite.websocket_origin import SameOriginOnly  # noqa: E402
from runs.web.routing import websocket_urlpatterns  # noqa: E402

application = ProtocolTypeRouter(
    {
        "http": django_asgi_app,
        # Every websocket route: opened only by a page of this very origin (scheme, host and port).
        "websocket": SameOriginOnly(AuthMiddlewareStack(URLRouter(websocket_urlpatterns))),
    }
)
