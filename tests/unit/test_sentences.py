"""Sentence conversion: every seed rule at, under and over its threshold, lists, tables, punkt data."""

from __future__ import annotations

import importlib.metadata

import nltk
import pytest

import pipeline.punkt
from pipeline.punkt import PunktMissingError, ensure_punkt, punkt_data_dir
from pipeline.sentences import first_sentences, join_short, split_long, split_sentences
from schemas.settings import SplitSettings

SEED = SplitSettings(keep_lists=False, keep_tables=False)


def words(n: int, word: str = "abcd") -> str:
    """A text of exactly ``n`` characters without sentence punctuation."""
    text = (f"{word} " * (n // (len(word) + 1) + 1))[:n]
    return text[:-1] + "x" if text.endswith(" ") else text


# --- punkt data ---------------------------------------------------------------------------------


def test_punkt_comes_from_the_installed_wheel_and_is_added_once() -> None:
    path = ensure_punkt()
    assert path == punkt_data_dir()
    assert (path / "tokenizers" / "punkt_tab" / "english").is_dir()
    ensure_punkt.cache_clear()
    ensure_punkt()
    assert nltk.data.path.count(str(path)) == 1


def test_missing_package_says_how_to_install_it(monkeypatch: pytest.MonkeyPatch) -> None:
    def missing(name: str) -> importlib.metadata.Distribution:
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(pipeline.punkt.importlib.metadata, "distribution", missing)
    with pytest.raises(PunktMissingError, match=r"install llama-index-core==0\.14\.25 --no-deps"):
        punkt_data_dir()


def test_trained_punkt_keeps_abbreviations() -> None:
    text = "Dr. Smith works at Acme Inc. in the U.S. and likes it there. He moved there in 2019 with family."
    assert split_sentences(text, SEED) == [
        "Dr. Smith works at Acme Inc. in the U.S. and likes it there.",
        "He moved there in 2019 with family.",
    ]


# --- seed rule 2: over max_sentence_chars -------------------------------------------------------


@pytest.mark.parametrize("length", [499, 500])
def test_sentence_at_or_under_max_is_kept(length: int) -> None:
    text = words(length - 25) + "\n\n" + words(23)
    assert len(text) == length
    assert split_sentences(text, SEED) == [text]


def test_sentence_over_max_splits_on_blank_lines() -> None:
    first, second = words(300), words(200, "efgh")
    text = first + "\n\n" + second  # 502 characters
    assert len(text) == 502
    assert split_sentences(text, SEED) == [first, second]


def test_part_over_max_splits_on_newlines_then_chunks() -> None:
    a, b = words(300), words(260, "efgh")
    long_line = "w" * 1100
    text = a + "\n" + b + "\n\n" + words(100, "mnop") + "\n\n" + long_line
    out = split_sentences(text, SEED)
    assert out == [a, b, words(100, "mnop"), "w" * 500, "w" * 500, "w" * 100]


def test_split_long_boundaries() -> None:
    assert split_long("x" * 500, 500) == ["x" * 500]
    assert split_long("x" * 501, 500) == ["x" * 500, "x"]
    assert split_long("x" * 1000, 500) == ["x" * 500, "x" * 500]
    assert split_long("x" * 499, 500) == ["x" * 499]
    # chunks are stripped: no chunk starts or ends with the space the cut fell on
    assert split_long("a" * 499 + " " + "b" * 10, 500) == ["a" * 499, "b" * 10]


def test_part_of_exactly_max_after_blank_line_split_is_not_split_further() -> None:
    exact = words(250) + "\n" + words(249)  # 500 characters with a newline inside
    text = exact + "\n\n" + words(50)
    assert split_sentences(text, SEED) == [exact, words(50)]


# --- seed rule 3: under min_sentence_chars ------------------------------------------------------


def test_sentence_at_min_stays_alone() -> None:
    assert len("Twenty chars here ok") == 20
    assert join_short(["Twenty chars here ok", "A second sentence here."], 20) == [
        "Twenty chars here ok",
        "A second sentence here.",
    ]


def test_sentence_under_min_joins_next() -> None:
    assert len("Nineteen chars here") == 19
    assert join_short(["Nineteen chars here", "A second sentence here."], 20) == [
        "Nineteen chars here A second sentence here."
    ]


def test_short_sentences_accumulate_until_min() -> None:
    assert join_short(["Yes.", "No.", "Maybe.", "It is long enough now."], 20) == [
        "Yes. No. Maybe. It is long enough now."
    ]


def test_short_last_sentence_joins_previous() -> None:
    assert join_short(["A first sentence here.", "Short."], 20) == ["A first sentence here. Short."]


def test_lone_short_text_stays() -> None:
    assert join_short(["Short."], 20) == ["Short."]


def test_seed_rules_through_nltk() -> None:
    text = "Hi there. This sentence is long enough to stand. Bye."
    assert split_sentences(text, SEED) == ["Hi there. This sentence is long enough to stand. Bye."]
    text = "This first sentence is long enough. Ok. This third sentence is long enough."
    assert split_sentences(text, SEED) == [
        "This first sentence is long enough.",
        "Ok. This third sentence is long enough.",
    ]


def test_split_then_join_order() -> None:
    # a 501-character sentence splits into a 500 chunk and a 1-character tail that joins the chunk
    text = "x" * 501
    assert split_sentences(text, SEED) == ["x" * 500 + " x"]


def test_empty_and_none() -> None:
    assert split_sentences("", SEED) == []
    assert split_sentences("   \n ", SEED) == []
    assert split_sentences(None) == []


def test_first_sentences() -> None:
    text = "One sentence is here. Two sentences are here. Three sentences are here."
    assert first_sentences(text, 2) == "One sentence is here. Two sentences are here."
    assert first_sentences(text, 5) == text


# --- lists ----------------------------------------------------------------------------------------


def test_bulleted_list_stays_with_its_intro() -> None:
    text = "Our plans come in several sizes:\n- Basic costs 5 dollars\n* Pro costs 10 dollars\n\nThat is all."
    assert split_sentences(text) == [
        "Our plans come in several sizes:\n- Basic costs 5 dollars\n* Pro costs 10 dollars That is all."
    ]


def test_numbered_list_with_blank_lines_and_continuations() -> None:
    text = (
        "The introduction is a sentence. To reset the router:\n\n1. Unplug it\n\n2) Hold the button"
        "\n   for ten seconds\n3. Plug it back in\nThe lights will blink for a while."
    )
    assert split_sentences(text) == [
        "The introduction is a sentence.",
        "To reset the router:\n1. Unplug it\n2) Hold the button for ten seconds\n3. Plug it back in",
        "The lights will blink for a while.",
    ]


def test_list_without_intro_is_split_by_seed_rules() -> None:
    text = "- the first item is long enough\n- second\n- the third item is long enough"
    assert split_sentences(text) == [
        "- the first item is long enough",
        "- second - the third item is long enough",
    ]


def test_lists_off_gives_the_seed_split() -> None:
    text = "Steps are: 1. Mix the flour well. 2. Add water slowly. 3. Bake it for an hour."
    seed = split_sentences(text, SEED)
    assert seed != [text]
    assert split_sentences(text, SplitSettings(keep_lists=False)) == seed


def test_inline_enumeration_after_colon() -> None:
    text = "The steps are: 1. Mix the flour. 2. Add water. 3. Bake it. Then serve it warm to guests."
    assert split_sentences(text) == [
        "The steps are: 1. Mix the flour. 2. Add water. 3. Bake it.",
        "Then serve it warm to guests.",
    ]


def test_inline_enumeration_needs_a_colon() -> None:
    text = "He came 1. time to the office today. Then he left for home again."
    assert split_sentences(text) == split_sentences(text, SEED)


def test_long_list_is_cut_between_items_repeating_the_intro() -> None:
    intro = "The following products are on sale this week:"
    items = [f"- product number {i} " + words(80) for i in range(8)]
    text = intro + "\n" + "\n".join(items)
    out = split_sentences(text)
    assert len(out) > 1
    assert all(chunk.startswith(intro + "\n") and len(chunk) <= 500 for chunk in out)
    assert [line for chunk in out for line in chunk.split("\n")[1:]] == items


def test_list_item_too_long_for_its_intro_is_split_with_the_intro() -> None:
    intro = "Details follow:"
    item = "- " + words(700)
    out = split_sentences(intro + "\n" + item)
    assert all(chunk.startswith(intro + "\n") and len(chunk) <= 500 for chunk in out)
    assert len(out) == 2


# --- tables ---------------------------------------------------------------------------------------


def test_table_rows_carry_their_header() -> None:
    text = "Model | Price\n--- | ---\nX | 5"
    assert split_sentences(text) == ["Model: X; Price: 5"]


def test_table_with_pipes_empty_cells_and_text_around() -> None:
    text = (
        "Prices are listed below in the table.\n\n| Model | Price | Stock |\n|:---|---:|:-:|\n"
        "| X | 5 | yes |\n| Y |  | no |\n\nPrices may change without notice."
    )
    assert split_sentences(text) == [
        "Prices are listed below in the table.",
        "Model: X; Price: 5; Stock: yes",
        "Model: Y; Stock: no",
        "Prices may change without notice.",
    ]


def test_table_rows_are_not_joined_by_the_short_rule() -> None:
    text = "A | B\n--- | ---\n1 | 2\n3 | 4"
    assert split_sentences(text) == ["A: 1; B: 2", "A: 3; B: 4"]


def test_tables_off_treats_the_table_as_text() -> None:
    text = "Model | Price\n--- | ---\nX | 5"
    assert split_sentences(text, SplitSettings(keep_tables=False)) == [text]


def test_horizontal_rule_is_not_a_table() -> None:
    text = "Some text line that is long.\n---\nMore text that is also long."
    assert split_sentences(text) == split_sentences(text, SEED)


def test_list_right_after_a_table_has_no_intro() -> None:
    text = "A | B\n--- | ---\n1 | 2\n- the first item is long enough\n- the second item is long enough"
    assert split_sentences(text) == [
        "A: 1; B: 2",
        "- the first item is long enough",
        "- the second item is long enough",
    ]


def test_list_intro_is_only_the_last_sentence_before_it() -> None:
    text = "The router has four ports and a switch. The switch has two positions:\n- on\n- off"
    assert split_sentences(text) == [
        "The router has four ports and a switch.",
        "The switch has two positions:\n- on\n- off",
    ]
