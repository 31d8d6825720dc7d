"""``python -m runs.demo_model --host 127.0.0.1 --port 8765 --latency 0``: serve forever."""

from __future__ import annotations

import argparse
import sys

from .server import DemoModelServer


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m runs.demo_model",
        description="Offline, scripted, OpenAI-compatible chat completions server "
        "(a script, not a language model).",
    )
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8765, help="0 picks a free port")
    parser.add_argument("--latency", type=float, default=0.0, help="seconds added before every response")
    args = parser.parse_args(argv)

    server = DemoModelServer(args.host, args.port, args.latency)
    print(f"Offline demo model (a script, not a language model) serving at {server.url}", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
