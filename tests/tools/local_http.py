"""A real HTTP server on a loopback address, served from a thread, for tests that need one."""
import threading
from http.server import ThreadingHTTPServer


class LocalServer:
    """Subclasses build their request handler and call `serve(handler, host)`; `stop()` ends it."""

    def serve(self, handler, host: str = "127.0.0.1", port: int = 0) -> None:
        self.httpd = ThreadingHTTPServer((host, port), handler)
        self.httpd.daemon_threads = True
        self.port = self.httpd.server_address[1]
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
