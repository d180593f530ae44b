"""Object storage (S3 and S3-compatible servers): ``s3://`` sources and the result store.

::

    store = ObjectStore()                                  # boto3's client from AWS_* names
    address = ObjectAddress.parse("s3://docs/in/")         # E104 when malformed
    for info in store.listing(address): ...                   # every object under the prefix
    sha256, size = store.read_into(address.child(key), out, max_bytes=...)
    store.upload(address.child(key), data)                 # multipart when large
    store.delete("docs", keys)

``client``: ``ObjectStore``, ``ObjectInfo``, ``TooLarge``; ``address``: ``ObjectAddress``,
``is_object_address``; ``failures``: ``ObjectError``. This ``__init__`` imports nothing
(docs/architecture.md): importers name the module.

Import rules: ``errors``, boto3/botocore only. Callers translate botocore's exceptions with
:func:`.failures.source_error` (E111, E112, E107) or :func:`.failures.result_store_error` (E402).
"""
