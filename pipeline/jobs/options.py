"""A job's conversion options: parsed at submission, stored with the job, given to the server.

The options a submitter may set (``doclane submit --pages 1-5 --ocr-lang en --text-layer-only
--password-env NAME``, the API's ``options`` and upload fields, the console's upload) are few,
and each door parses them once into :class:`ConversionOptions`, so a bad page range is refused
at once (E110) instead of failing every attempt on a worker. They are stored with the job in a
normal form (``"1-5"``, not ``" 1 - 5"``: :meth:`ConversionOptions.stored`), so they are part of
dedup's key and of a bulk retry as they are.

A password is never stored: the job keeps the *name* of an environment variable
(``password_env``), and the worker reads its value just before the call
(:func:`server_options`). It is therefore never in a job row, an event, a log line or an answer.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from errors import InvalidOption

PAGES = "pages"
OCR_LANG = "ocr_lang"
TEXT_LAYER_ONLY = "text_layer_only"
PASSWORD_ENV = "password_env"
OPTION_NAMES = (PAGES, OCR_LANG, TEXT_LAYER_ONLY, PASSWORD_ENV)

#: The forms each option takes, as patterns the API's schema publishes too (one fact, two uses).
PAGES_PATTERN = r"^[1-9][0-9]{0,5}(-[1-9][0-9]{0,5})?$"
LANGS_PATTERN = r"^[A-Za-z][A-Za-z0-9_+-]{0,31}(,[A-Za-z][A-Za-z0-9_+-]{0,31}){0,7}$"
ENV_NAME_PATTERN = r"^[A-Za-z_][A-Za-z0-9_]{0,127}$"

_LANGS = re.compile(LANGS_PATTERN)
_ENV_NAME = re.compile(ENV_NAME_PATTERN)
_TRUE = {"true", "1", "yes", "on"}
_FALSE = {"false", "0", "no", "off"}


class ConversionOptions(BaseModel):
    """A job's conversion options, parsed: made by :meth:`parse` (or a pydantic model holding
    one, as the API's body does) and trusted after. E110 names the first value that is not
    valid: raised as it is through pydantic, so the API answers it with its code like the CLI.
    A name that is no option is E110 from :meth:`parse`; in a pydantic body it is a field the
    schema does not have (``extra="forbid"``), a malformed request.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    pages: str | None = Field(
        default=None,
        max_length=100,
        json_schema_extra={"pattern": PAGES_PATTERN},
        description="One run of pages: 1-5 or 3.",
    )
    ocr_lang: str | None = Field(
        default=None,
        max_length=300,
        json_schema_extra={"pattern": LANGS_PATTERN},
        description="OCR language(s): en or en,de.",
    )
    text_layer_only: bool = False
    password_env: str | None = Field(
        default=None,
        max_length=128,
        json_schema_extra={"pattern": ENV_NAME_PATTERN},
        description="The workers' environment variable holding the password (never the "
        "password itself).",
    )

    @model_validator(mode="before")
    @classmethod
    def _checked(cls, given: Any) -> Any:
        if isinstance(given, Mapping):
            return _checked(given)
        return given

    @classmethod
    def parse(cls, options: Mapping[str, Any] | None) -> ConversionOptions:
        """The options a submitter gave (text or values, unset ones None or empty)."""
        given = dict(options or {})
        for name in given:
            if name not in OPTION_NAMES:
                raise InvalidOption(
                    f"unknown conversion option {name!r} (known: {', '.join(OPTION_NAMES)})",
                    detail={"option": name},
                )
        return cls.model_validate(given)

    @classmethod
    def from_stored(cls, stored: Mapping[str, Any]) -> ConversionOptions:
        """A job's options as the store keeps them (:meth:`stored` made them): trusted."""
        return cls.model_construct(**stored)

    def stored(self) -> dict[str, Any]:
        """The form a job keeps: unset options left out, so a job submitted without options
        and one with empty ones deduplicate alike."""
        return self.model_dump(exclude_defaults=True)

    def __bool__(self) -> bool:
        return bool(self.stored())


def _checked(options: Mapping[str, Any]) -> dict[str, Any]:
    """The options in their stored form; E110 naming the first value that is not valid. A name
    that is no option is left for the model to refuse."""
    checked: dict[str, Any] = {}
    for name, value in options.items():
        if name not in OPTION_NAMES:
            checked[name] = value
            continue
        if value is None or value == "":
            continue
        if name == PAGES:
            checked[PAGES] = page_range(str(value))
        elif name == OCR_LANG:
            checked[OCR_LANG] = _matching(name, str(value).strip(), _LANGS, "a language code")
        elif name == TEXT_LAYER_ONLY:
            if _flag(value):
                checked[TEXT_LAYER_ONLY] = True
        else:
            checked[PASSWORD_ENV] = _matching(
                name, str(value).strip(), _ENV_NAME, "an environment variable's name"
            )
    return checked


def page_range(text: str) -> str:
    """``"1-5"`` or ``"3"``: one run of pages numbered from 1; E110 otherwise.

    One run only: docling.rs takes no lists (``1,3`` is its own error), and a submitter is
    better told now than by every attempt's failure. A run's first page comes first: ``5-2``
    is refused (E110), not read as pages 2 to 5, since a reversed run is more often a slip
    than a wish (the API's schema cannot order the ends, so this check is the one that does).
    """
    cleaned = text.replace(" ", "")
    if not re.fullmatch(PAGES_PATTERN, cleaned):
        raise InvalidOption(
            f"invalid page range {text!r}: give one run of pages from 1, as N or N-M (3, 1-5)",
            detail={"option": PAGES, "value": text[:100]},
        )
    first, _, last = cleaned.partition("-")
    low, high = int(first), int(last or first)
    if low > high:
        raise InvalidOption(
            f"page range {cleaned!r} is reversed: give its first page first ({high}-{low})",
            detail={"option": PAGES, "value": text[:100]},
        )
    return str(low) if low == high else f"{low}-{high}"


def last_page(pages: str) -> int:
    """The last page a stored run (:func:`page_range`'s form) asks for."""
    return int(pages.rpartition("-")[2])


def server_options(options: Mapping[str, Any]) -> dict[str, Any]:
    """What the server is given for a job's stored options: the password read now, from the
    variable the job names (E110 when this worker does not have it)."""
    given = {name: value for name, value in options.items() if name != PASSWORD_ENV}
    variable = options.get(PASSWORD_ENV)
    if variable:
        secret = os.environ.get(str(variable))
        if not secret:
            raise InvalidOption(
                f"the job's password is in ${variable}, which is not set on this worker",
                detail={"option": PASSWORD_ENV, "variable": str(variable)},
            )
        given["password"] = secret
    return given


def _flag(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in _TRUE | _FALSE:
        return text in _TRUE
    raise InvalidOption(
        f"text_layer_only must be true or false, not {str(value)[:40]!r}",
        detail={"option": TEXT_LAYER_ONLY},
    )


def _matching(name: str, value: str, pattern: re.Pattern[str], what: str) -> str:
    if not pattern.fullmatch(value):
        raise InvalidOption(f"{name} must be {what}, not {value[:60]!r}", detail={"option": name})
    return value
