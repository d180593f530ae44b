"""A job's output formats: parsed once from what a submitter wrote, then trusted."""

from __future__ import annotations

import re

import pytest
from pydantic import BaseModel

from pipeline.jobs.formats import FORMATS_PATTERN, KNOWN_FORMATS, Formats
from pipeline.jobs.model import NewJob, SourceKind


def test_formats_are_known_lower_case_unique_and_sorted() -> None:
    assert Formats.parse(" JSON, md,md ") == ("json", "md")
    assert Formats.parse(["text", "chunks"]) == ("chunks", "text")
    assert str(Formats.parse("md,json")) == "json,md"


@pytest.mark.parametrize("text", ["", " , ", "pdf", "md,docx"])
def test_unknown_or_no_formats_are_refused(text: str) -> None:
    with pytest.raises(ValueError, match=r"unknown output format|at least one"):
        Formats.parse(text)


def test_the_published_pattern_accepts_what_parse_accepts() -> None:
    for name in KNOWN_FORMATS:
        assert re.fullmatch(FORMATS_PATTERN, f" {name} ,md")
    assert not re.fullmatch(FORMATS_PATTERN, "md,pdf")


def test_a_parsed_value_is_kept_and_text_is_parsed_in_a_model() -> None:
    parsed = Formats.parse("md")

    class Holder(BaseModel):
        formats: Formats

    assert Holder(formats=parsed).formats is parsed
    assert Holder.model_validate({"formats": "HTML,md"}).formats == ("html", "md")
    assert Holder(formats=parsed).model_dump(mode="json") == {"formats": ["md"]}
    spec = NewJob(source_kind=SourceKind.FILE, source_uri="/a.md", queue="q", formats="json")
    assert isinstance(spec.formats, Formats) and spec.formats == ("json",)
