"""memlab.memory.text: the one place that says what a word and a token are."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from memlab.memory.lexical import terms
from memlab.memory.text import STOPWORDS, content_words, estimate_tokens, words


def test_words_are_lowercased_unicode_word_runs() -> None:
    assert words("Größe: 42 km, déjà-vu_ok!") == ["größe", "42", "km", "déjà", "vu_ok"]
    assert words("") == []
    assert words("  ...  ") == []


def test_content_words_drop_stopwords_and_keep_order_and_repeats() -> None:
    assert content_words("We deploy the API and the API gateway") == [
        "deploy",
        "api",
        "api",
        "gateway",
    ]
    assert content_words("what is it?") == []


def test_stopwords_are_lowercase_single_words() -> None:
    assert STOPWORDS
    for w in STOPWORDS:
        assert w == w.lower() and words(w) == [w]


@given(st.text())
def test_content_words_is_words_minus_stopwords(text: str) -> None:
    assert content_words(text) == [w for w in words(text) if w not in STOPWORDS]


@given(st.text())
def test_bm25_terms_are_stemmed_content_words(text: str) -> None:
    # The lexical index (and pgvector's terms column) split text the same way.
    assert len(terms(text)) == len(content_words(text))


def test_estimate_tokens_is_ceil_chars_over_four() -> None:
    assert estimate_tokens("") == 0
    assert estimate_tokens("a") == 1
    assert estimate_tokens("abcd") == 1
    assert estimate_tokens("abcde") == 2
