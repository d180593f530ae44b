"""``s3://bucket/key`` addresses: one object, or every object under a prefix (a "folder")."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final

from errors import UrlRefused

SCHEME: Final = "s3://"
#: S3's own bucket naming rules (lower case, digits, dots and hyphens, 3 to 63 characters).
_BUCKET: Final = re.compile(r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$")


def is_object_address(text: str) -> bool:
    return text[: len(SCHEME)].lower() == SCHEME


@dataclass(frozen=True, slots=True)
class ObjectAddress:
    """A bucket and a key; a key that is empty or ends with ``/`` names a prefix."""

    bucket: str
    key: str = ""

    @classmethod
    def parse(cls, text: str) -> ObjectAddress:
        """The address of ``s3://bucket/key``; E104 when it is not one."""
        if not is_object_address(text):
            raise UrlRefused(
                f"{text}: not an s3:// address", detail={"source": text, "reason": "scheme"}
            )
        bucket, _, key = text[len(SCHEME) :].partition("/")
        if not _BUCKET.match(bucket):
            raise UrlRefused(
                f"{text}: {bucket!r} is not a valid bucket name",
                detail={"source": text, "reason": "bucket name"},
            )
        return cls(bucket, key)

    @property
    def is_prefix(self) -> bool:
        return self.key == "" or self.key.endswith("/")

    def child(self, key: str) -> ObjectAddress:
        return ObjectAddress(self.bucket, key)

    def __str__(self) -> str:
        return f"{SCHEME}{self.bucket}/{self.key}"
