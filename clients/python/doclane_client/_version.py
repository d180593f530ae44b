"""The client's version, in one place: its major is the version of the API it speaks.

The API states its version as its OpenAPI document's ``info.version`` ("1", the ``/v1`` of every
path); a client ``1.x.y`` speaks that API. ``tests/client/test_openapi_drift.py`` holds the two
together, so a new API version cannot ship beside a client that still claims the old one.
"""

__version__ = "1.0.0"

#: The API version this client speaks (``info.version`` of the API's OpenAPI document).
API_VERSION = __version__.split(".", 1)[0]
