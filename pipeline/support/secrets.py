"""Masking secrets wherever doclane shows a text: one masker, one setting.

A secret reaches a text in three shapes, and each has its mask:

- a URL: its password (``scheme://user:***@host``), the values of its secret query parameters
  (those whose name names a secret, ``X-Amz-Signature``, ``access_token``, and those named by
  ``DOCLANE_SECRET_QUERY_PARAMS``: a CDN's ``Policy``); :meth:`Masker.text` masks them in
  place, :func:`mask_address` drops the user info (and the query) of an address shown
  as a place (an MCP endpoint, Redis);
- a header or any ``name=value`` / ``name: value`` pair whose name names a secret
  (``Authorization: Bearer ***``, ``api_key=***``);
- a secret known by its value (a presigned URL as submitted, an OAuth client secret), replaced
  by its shown form wherever it is quoted, whatever the patterns make of it.

The :class:`Masker` is built once per process from :class:`SecretSettings` (``process_masker``);
sources, the job store's texts (a job's source, events and errors), logging and the API all use
it, so a secret masked in one place is masked in all.
"""

from __future__ import annotations

import copy
import functools
import os
import re
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any, TypeVar

from pydantic import AliasChoices, Field

from pipeline.support.settings import CommaList, Section, environment_values

if TYPE_CHECKING:
    from errors import PipelineError

    E = TypeVar("E", bound=PipelineError)

#: What the patterns show instead of the secret.
MASK = "***"
#: What a secret known by its value shows instead (as pydantic's ``SecretStr`` shows itself).
SECRET_SHOWN = "**********"

_URL_START = re.compile(r"[a-zA-Z][a-zA-Z0-9+.-]*://")
_URL_CREDENTIALS = re.compile(
    r"(?P<scheme>[a-zA-Z][a-zA-Z0-9+.-]*://)(?P<user>[^:/@\s]*):[^@/\s]+@"
)
#: Words that name a secret, also inside longer names (DOCLANE_MCP_API_KEY, X-Amz-Signature).
_SECRET_WORD = r"(?:api[-_]?key|access[-_]?key|token|passw(?:or)?d|secret|signature|sig|credential)"
#: Query parameters of presigned or tokenised URLs: ?access_token=..., &X-Amz-Signature=...
_QUERY_SECRET = re.compile(rf"(?i)([?&][^=&\s#]*{_SECRET_WORD}[^=&\s#]*=)[^&\s#]+")
#: Authorization schemes and their credential: Bearer xyz, Basic dXNlcjpwYXNz.
_AUTH_SCHEME = re.compile(r"(?i)\b(bearer|basic|digest|token)\s+[A-Za-z0-9._~+/=-]{4,}")
#: name=value, name: value, "name": "value", 'name': 'value' where the name names a secret.
_KEY_VALUE = re.compile(
    rf"(?i)([A-Za-z0-9_-]*(?:{_SECRET_WORD}|authorization)[A-Za-z0-9_-]*)"
    r"(['\"]?\s*[:=]\s*['\"]?)(?!\*\*\*)[^\s'\",;}&]+"
)

#: A word that each of the three patterns above needs: one cheap search spares most log lines
#: their three substitutions (100-200 us a line, several lines a job).
_SECRET_HINT = re.compile(rf"(?i){_SECRET_WORD}|authorization|bearer|basic|digest")


class SecretSettings(Section):
    """What counts as a secret besides what its name says."""

    #: Query parameters whose values are secrets, besides those whose name says so
    #: (``X-Amz-Signature``, ``sig``, ``token`` ...): a CDN's ``Policy``, ``Key-Pair-Id``.
    #: A URL carrying any is kept whole only for the worker that fetches it; everywhere else
    #: (the job row's source, status, events, errors, logs) the values show as ``***``.
    secret_query_params: CommaList[str] = Field(
        (),
        validation_alias=AliasChoices("DOCLANE_SECRET_QUERY_PARAMS", "secret_query_params"),
    )


def _params_pattern(names: Iterable[str]) -> re.Pattern[str] | None:
    """A pattern for the values of the query parameters ``names`` (any case), or None."""
    cleaned = sorted({name.strip() for name in names if name.strip()})
    if not cleaned:
        return None
    alternatives = "|".join(re.escape(name) for name in cleaned)
    return re.compile(rf"(?i)([?&](?:{alternatives})=)(?!\*\*\*)[^&\s#]+")


class Masker:
    """Masks secrets in texts: URL passwords, secret query parameters, auth headers and
    ``name=value`` pairs whose name names a secret, and the secrets it was told by value."""

    __slots__ = ("_extra_params", "_known", "secret_query_params")

    def __init__(
        self, secret_query_params: Iterable[str] = (), known: Mapping[str, str] | None = None
    ) -> None:
        self.secret_query_params = tuple(secret_query_params)
        self._extra_params = _params_pattern(self.secret_query_params)
        self._known = {secret: shown for secret, shown in (known or {}).items() if secret}

    def knowing(self, secret: str | None, shown: str = SECRET_SHOWN) -> Masker:
        """This masker, also replacing ``secret`` (quoted exactly) by ``shown``: a presigned URL
        by its masked form, an OAuth client secret should a server echo it."""
        if not secret:
            return self
        masker = copy.copy(self)  # the compiled patterns are shared; one is made per job
        masker._known = {**self._known, secret: shown}
        return masker

    def text(self, text: str) -> str:
        """``text`` (a source, a URL, a message, a log line) with every secret masked."""
        text = mask_known(text, self._known)
        if "@" in text:
            text = _URL_CREDENTIALS.sub(rf"\g<scheme>\g<user>:{MASK}@", text)
        # Most lines name no secret word, and then none of the three other patterns can match.
        hinted = _SECRET_HINT.search(text) is not None
        if hinted:
            text = _QUERY_SECRET.sub(rf"\1{MASK}", text)
        if self._extra_params is not None:
            text = self._extra_params.sub(rf"\1{MASK}", text)
        if not hinted:
            return text
        text = _AUTH_SCHEME.sub(rf"\1 {MASK}", text)
        return _KEY_VALUE.sub(rf"\1\2{MASK}", text)

    def value(self, value: Any) -> Any:
        """``value`` with every string in it masked (mappings, lists and tuples walked)."""
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, Mapping):
            return {key: self.value(item) for key, item in value.items()}
        if isinstance(value, list | tuple):
            return [self.value(item) for item in value]
        return value

    def error(self, error: E) -> E:
        """``error`` with its message and detail masked, before it is stored or shown."""
        error.reword(self.value(error.message))
        error.detail = self.value(error.detail)
        return error


#: Secrets boto3 reads from the environment for the object store: known by value, so a text that
#: quotes one (an exception, a debug line) never shows it.
OBJECT_STORE_SECRETS = ("AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN")


def load_masker(settings: SecretSettings) -> Masker:
    """A masker from ``settings``, knowing the object store's secrets of the environment by
    value."""
    masker = Masker(settings.secret_query_params)
    for name in OBJECT_STORE_SECRETS:
        masker = masker.knowing(os.environ.get(name))
    return masker


def mask_known(text: str, known: Mapping[str, str]) -> str:
    """``text`` with each secret of ``known`` (quoted exactly) replaced by its shown form; the
    patterns are not applied, for a message whose words must stay as they are."""
    for secret, shown in known.items():
        if secret:
            text = text.replace(secret, shown)
    return text


@functools.cache
def process_masker() -> Masker:
    """The masker of this process, from the environment, read once: for code that masks texts
    far from where settings are handed around (a job's stored errors and events). It reads
    its own section of the environment, as the settings tree would, so that a log line masked
    before the process has built its tree is masked all the same."""
    return load_masker(SecretSettings.model_validate(environment_values(SecretSettings)))


def mask_address(url: str) -> str:
    """An address shown as a place (an MCP endpoint, Redis): ``url`` without its user info, so
    its password, nor its query and fragment, where a token or a Redis password may ride.
    Text that does not start as a URL does (``scheme://``: a stdio command, ``stdio:...``) is
    returned as it is."""
    match = _URL_START.match(url)
    if match is None:
        return url
    rest = url[match.end() :].split("#", 1)[0].split("?", 1)[0]
    return f"{match.group()}{rest.rsplit('@', 1)[-1]}"
