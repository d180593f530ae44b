"""A job's conversion options: checked and normalized at submission, resolved at the worker."""

from __future__ import annotations

import pytest

from errors import InvalidOption
from pipeline.jobs.options import check_options, server_options


def test_options_are_stored_normalized_and_unset_ones_left_out() -> None:
    given = {"pages": " 1 - 5 ", "ocr_lang": "en,de", "text_layer_only": "true", "password_env": ""}
    assert check_options(given) == {"pages": "1-5", "ocr_lang": "en,de", "text_layer_only": True}
    assert check_options({"pages": None, "text_layer_only": False}) == {}
    assert check_options(None) == {}
    assert check_options({"pages": "3"}) == {"pages": "3"}
    assert check_options({"pages": "5-2"}) == {"pages": "2-5"}  # either order, one run
    assert check_options({"pages": "4-4"}) == {"pages": "4"}


@pytest.mark.parametrize(
    "options",
    [
        {"pages": "0-2"},
        {"pages": "2-0"},
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
        check_options(options)
    assert caught.value.code == "E110" and not caught.value.retryable


def test_the_password_is_read_from_the_workers_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    stored = check_options({"password_env": "REPORT_PW", "pages": "1-2"})
    assert stored == {"password_env": "REPORT_PW", "pages": "1-2"}  # the name only
    monkeypatch.setenv("REPORT_PW", "s3cret")
    assert server_options(stored) == {"pages": "1-2", "password": "s3cret"}
    monkeypatch.delenv("REPORT_PW")
    with pytest.raises(InvalidOption, match=r"\$REPORT_PW, which is not set") as caught:
        server_options(stored)
    assert "s3cret" not in str(caught.value.to_dict())
