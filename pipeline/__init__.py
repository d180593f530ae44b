"""doclane's library: the MCP client, resilience, the job store, submission and admin queries.

This package knows nothing of Celery; ``workers/`` adapts it. Import the parts from their
sub-packages (``pipeline.mcp``, ``pipeline.store``, ...): importing ``pipeline`` alone is cheap.
"""

from __future__ import annotations

__version__ = "0.1.0"
