"""Tools from MCP servers: the client, discovery into the registry and a demo server (the executor
is toolsapp.executors.mcp).

Nothing here may import Django at module level: `demo_server` runs as a plain subprocess.
"""

# Where the executor puts a call's idempotency key in the request `_meta` (a vendor-prefixed key,
# as the MCP spec asks); servers that know it can make retried side effects harmless.
IDEMPOTENCY_META_KEY = "io.agentsite/idempotency-key"
