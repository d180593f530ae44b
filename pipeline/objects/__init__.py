"""Object storage (S3 and S3-compatible servers): ``s3://`` sources and the result store.

::

    store = ObjectStore()                                  # boto3's client from AWS_* names
    address = ObjectAddress.parse("s3://docs/in/")         # E104 when malformed
    for info in store.listing(address): ...                   # every object under the prefix
    sha256, size = store.read_into(address.child(key), out, max_bytes=...)
    store.upload(address.child(key), data)                 # multipart when large
    store.delete("docs", keys)

Import rules: ``errors``, boto3/botocore only. Callers translate botocore's exceptions with
:func:`source_error` (E111, E112, E107) or :func:`result_store_error` (E402).
"""

from __future__ import annotations

from pipeline.objects.address import SCHEME, ObjectAddress, is_object_address
from pipeline.objects.client import (
    ObjectInfo,
    ObjectStore,
    TooLarge,
    client_from_environment,
)
from pipeline.objects.failures import ObjectError, result_store_error, source_error

__all__ = [
    "SCHEME",
    "ObjectAddress",
    "ObjectError",
    "ObjectInfo",
    "ObjectStore",
    "TooLarge",
    "client_from_environment",
    "is_object_address",
    "result_store_error",
    "source_error",
]
