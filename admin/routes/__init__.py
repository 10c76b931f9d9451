"""The admin's routers, one module per area; ``api`` is the JSON API under /api/v1."""
