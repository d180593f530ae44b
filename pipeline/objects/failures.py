"""Translating botocore's exceptions into the catalog's codes, at the boundary.

Messages name the address and S3's error code, never a credential: botocore's own messages
hold none, but the access key id of a refused request is left out all the same, since it
appears in some servers' error bodies.
"""

from __future__ import annotations

from typing import Final

from botocore.exceptions import BotoCoreError, ClientError, NoCredentialsError

from errors import (
    InputError,
    ObjectAccessDenied,
    ObjectNotFound,
    PipelineError,
    ResultStoreUnavailable,
    SourceUnavailable,
)

_MISSING: Final = frozenset({"NoSuchBucket", "NoSuchKey", "NotFound", "404"})
_DENIED: Final = frozenset(
    {
        "AccessDenied",
        "403",
        "Forbidden",
        "InvalidAccessKeyId",
        "SignatureDoesNotMatch",
        "AllAccessDisabled",
        "AccountProblem",
    }
)

#: What a call of the object store may raise, for ``except`` clauses.
ObjectError = (ClientError, BotoCoreError)


def s3_code(exc: ClientError) -> str:
    return str(exc.response.get("Error", {}).get("Code", ""))


def http_status(exc: ClientError) -> int:
    return int(exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0))


def source_error(exc: Exception, address: str) -> InputError:
    """What a failed read of an ``s3://`` source means: E111, E112 or E107 (for now)."""
    if isinstance(exc, ClientError):
        code, status = s3_code(exc), http_status(exc)
        detail = {"source": address, "s3_code": code, "http_status": status}
        if code in _MISSING or status == 404:
            return ObjectNotFound(
                f"{address}: no such bucket or key ({code})", detail={**detail, "transient": False}
            )
        if code in _DENIED or status == 403:
            return ObjectAccessDenied(
                f"{address}: access denied ({code})", detail={**detail, "transient": False}
            )
        if status >= 500 or status in (408, 429) or code in ("SlowDown", "RequestTimeout"):
            return SourceUnavailable(
                f"{address}: the object store failed for now ({code}, HTTP {status})",
                detail={**detail, "transient": True},
            )
        return ObjectNotFound(
            f"{address}: the object store refused the request ({code}, HTTP {status})",
            detail={**detail, "transient": False},
        )
    if isinstance(exc, NoCredentialsError):
        return ObjectAccessDenied(
            f"{address}: no credentials for the object store (set AWS_ACCESS_KEY_ID and "
            "AWS_SECRET_ACCESS_KEY)",
            detail={"source": address, "reason": "no credentials", "transient": False},
        )
    return SourceUnavailable(
        f"{address}: the object store could not be reached ({type(exc).__name__})",
        detail={"source": address, "transient": True, "cause": type(exc).__name__},
    )


def result_store_error(exc: Exception, address: str, action: str) -> PipelineError:
    """What a failed write or read of the result store means: E402 (retryable)."""
    code = s3_code(exc) if isinstance(exc, ClientError) else type(exc).__name__
    return ResultStoreUnavailable(
        f"{action} {address}: the result store failed ({code})",
        detail={"address": address, "cause": code},
    )
