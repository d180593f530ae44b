"""The object store: a thin, typed layer over boto3's S3 client, for sources and results.

Credentials, region and endpoint come from AWS's usual environment names, read by boto3
itself (``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY``, ``AWS_DEFAULT_REGION``,
``AWS_ENDPOINT_URL`` for an S3-compatible server, or any other way boto3 finds them), so
doclane never holds or prints a secret of its own. With an endpoint set, buckets are addressed
by path (``http://host:port/bucket/key``), which every S3-compatible server serves.

Methods raise botocore's exceptions; the callers translate them (``failures.py``), because the
same failure means E111 for a source and E402 for the result store.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, BinaryIO, Final, Protocol

from pipeline.objects.address import ObjectAddress

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client

#: Bytes read from an object's body at a time.
READ_CHUNK: Final = 1 << 20
#: Objects deleted per request (S3's own limit for DeleteObjects).
DELETE_BATCH: Final = 1000
#: Objects from this size on are uploaded in parts of this size, a few at a time.
MULTIPART_BYTES: Final = 8 * 1024 * 1024


class Sink(Protocol):
    """Where an object's bytes go (a file, or nothing when only the hash is wanted)."""

    def write(self, data: bytes, /) -> object: ...


class TooLarge(Exception):
    """The body passed the cap while it streamed; the caller says which limit."""


@dataclass(frozen=True, slots=True)
class ObjectInfo:
    key: str
    size: int
    modified: datetime


def client_from_environment() -> S3Client:
    """boto3's S3 client as the environment describes it (path-style with an endpoint)."""
    # boto3 is a tenth of a second to import: loaded by the first process that meets S3.
    import boto3
    from botocore.config import Config

    endpoint = os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL")
    config = Config(
        connect_timeout=5,
        read_timeout=60,
        retries={"max_attempts": 3, "mode": "standard"},
        s3={"addressing_style": "path" if endpoint else "auto"},
        # Sign plain requests: not every S3-compatible server checks the newer CRC trailers.
        request_checksum_calculation="when_required",
        response_checksum_validation="when_required",
    )
    return boto3.session.Session().client("s3", config=config)


class ObjectStore:
    """One per process (the client keeps a connection pool and is safe across threads)."""

    def __init__(
        self, client: S3Client | None = None, *, multipart_bytes: int = MULTIPART_BYTES
    ) -> None:
        from boto3.s3.transfer import TransferConfig

        self.client = client if client is not None else client_from_environment()
        self._transfer = TransferConfig(
            multipart_threshold=multipart_bytes, multipart_chunksize=multipart_bytes
        )

    def head(self, address: ObjectAddress) -> ObjectInfo:
        reply = self.client.head_object(Bucket=address.bucket, Key=address.key)
        return ObjectInfo(address.key, reply["ContentLength"], reply["LastModified"])

    def listing(self, address: ObjectAddress, *, start_after: str = "") -> Iterator[ObjectInfo]:
        """Every object whose key starts with the address's key (after ``start_after``), in key
        order, a page at a time (a prefix of a million objects is never held in memory)."""
        pages = self.client.get_paginator("list_objects_v2").paginate(
            Bucket=address.bucket, Prefix=address.key, StartAfter=start_after
        )
        for page in pages:
            for item in page.get("Contents", []):
                yield ObjectInfo(item["Key"], item["Size"], item["LastModified"])

    def read_into(self, address: ObjectAddress, out: Sink, *, max_bytes: int) -> tuple[str, int]:
        """Stream the object into ``out``, hashing it on the way: (sha256 hex, size).
        :class:`TooLarge` as soon as more than ``max_bytes`` arrived."""
        body = self.client.get_object(Bucket=address.bucket, Key=address.key)["Body"]
        digest = hashlib.sha256()
        size = 0
        try:
            for chunk in body.iter_chunks(READ_CHUNK):
                size += len(chunk)
                if size > max_bytes:
                    raise TooLarge(size)
                digest.update(chunk)
                out.write(chunk)
        finally:
            body.close()
        return digest.hexdigest(), size

    def upload(self, address: ObjectAddress, data: BinaryIO) -> None:
        """Upload ``data`` (multipart from :data:`MULTIPART_BYTES` on); the object exists, whole,
        when this returns, and not at all when it raises (S3 commits an object at its end)."""
        self.client.upload_fileobj(data, address.bucket, address.key, Config=self._transfer)

    def delete(self, bucket: str, keys: Iterable[str]) -> int:
        """Delete ``keys`` (a missing one is no error), a thousand per request; how many."""
        batch: list[str] = []
        deleted = 0
        for key in keys:
            batch.append(key)
            if len(batch) == DELETE_BATCH:
                deleted += self._delete_batch(bucket, batch)
                batch = []
        if batch:
            deleted += self._delete_batch(bucket, batch)
        return deleted

    def _delete_batch(self, bucket: str, keys: list[str]) -> int:
        self.client.delete_objects(
            Bucket=bucket, Delete={"Objects": [{"Key": k} for k in keys], "Quiet": True}
        )
        return len(keys)
