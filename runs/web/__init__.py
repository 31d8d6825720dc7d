"""The web layer, thin over the rest: pages (views/), the REST API (api/, the token endpoints
included), websockets (consumers/), forms, URLs and middleware."""
