"""Texts of numbered sentences for the chunking property tests (hypothesis)."""

from hypothesis import strategies as st

WORDS = ["alpha", "beta", "gamma", "delta", "river", "stone", "light", "cloud"]


@st.composite
def numbered_texts(
    draw: st.DrawFn, tag: str = "", most_sentences: int = 16, most_words: int = 14
) -> str:
    """Sentences of `WORDS`, each numbered (with `tag`), so no two chunks are alike."""
    sentences = []
    for number in range(draw(st.integers(2, most_sentences))):
        words = draw(st.lists(st.sampled_from(WORDS), min_size=2, max_size=most_words))
        sentences.append(f"{' '.join(words).capitalize()} {tag}{number}.")
        sentences.append(draw(st.sampled_from([" ", " ", "\n", "\n\n"])))
    return "".join(sentences).strip()
