"""A job's conversion options: parsed and normalized at submission, resolved at the worker."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from errors import InvalidOption
from pipeline.jobs.options import ConversionOptions, last_page, server_options


def stored_form(given: dict[str, object] | None) -> dict[str, object]:
    return ConversionOptions.parse(given).stored()


def test_options_are_stored_normalized_and_unset_ones_left_out() -> None:
    given = {"pages": " 1 - 5 ", "ocr_lang": "en,de", "text_layer_only": "true", "password_env": ""}
    assert stored_form(given) == {"pages": "1-5", "ocr_lang": "en,de", "text_layer_only": True}
    assert stored_form({"pages": None, "text_layer_only": False}) == {}
    assert stored_form(None) == {}
    assert stored_form({"pages": "3"}) == {"pages": "3"}
    assert stored_form({"pages": "4-4"}) == {"pages": "4"}


@pytest.mark.parametrize(
    "options",
    [
        {"pages": "0-2"},
        {"pages": "2-0"},
        {"pages": "5-2"},  # reversed: a slip more often than a wish, so not reordered
        {"pages": "1-2\n"},
        {"pages": "1,3"},
        {"pages": "a-b"},
        {"pages": "-3"},
        {"ocr_lang": "en;rm -rf"},
        {"text_layer_only": "maybe"},
        {"password_env": "NOT A NAME"},
        {"password": "plain"},  # never the password itself
        {"dpi": 300},
    ],
)
def test_a_bad_option_is_e110(options: dict[str, object]) -> None:
    with pytest.raises(InvalidOption) as caught:
        stored_form(options)
    assert caught.value.code == "E110" and not caught.value.retryable


def test_a_reversed_range_says_so_and_how_to_write_it() -> None:
    with pytest.raises(
        InvalidOption, match=r"'5-2' is reversed: give its first page first \(2-5\)"
    ):
        stored_form({"pages": " 5 - 2"})
    assert last_page("2-5") == 5 and last_page("7") == 7


def test_the_password_is_read_from_the_workers_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    stored = stored_form({"password_env": "REPORT_PW", "pages": "1-2"})
    assert stored == {"password_env": "REPORT_PW", "pages": "1-2"}  # the name only
    monkeypatch.setenv("REPORT_PW", "s3cret")
    assert server_options(stored) == {"pages": "1-2", "password": "s3cret"}
    monkeypatch.delenv("REPORT_PW")
    with pytest.raises(InvalidOption, match=r"\$REPORT_PW, which is not set") as caught:
        server_options(stored)
    assert "s3cret" not in str(caught.value.to_dict())


def test_options_travel_parsed_and_come_back_from_the_store_as_they_were() -> None:
    options = ConversionOptions(pages=" 2 - 5 ", text_layer_only="yes")  # type: ignore[arg-type]
    assert (options.pages, options.text_layer_only) == ("2-5", True)
    assert options and not ConversionOptions()
    stored = options.stored()
    assert ConversionOptions.from_stored(stored) == options
    with pytest.raises(ValidationError):  # frozen: trusted after parsing, as nothing changes it
        options.pages = "1,3"  # type: ignore[misc]


def test_a_bad_option_in_a_pydantic_body_is_still_e110() -> None:
    """The API's body holds a ConversionOptions: pydantic lets E110 through as it is, so the
    API answers with the code the CLI prints."""
    from pydantic import BaseModel

    class Body(BaseModel):
        options: ConversionOptions

    with pytest.raises(InvalidOption):
        Body.model_validate({"options": {"pages": "1,3"}})
