"""A subword vocabulary shared by all languages (BPE over language-smoothed samples)."""

from __future__ import annotations

import json
import random
from array import array
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path

from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers

from ptm_core.atomic import atomic_write_text
from ptm_core.tokenization import VocabInfo
from ptm_multilingual.sampling import smoothed_probabilities

# XLM's order of the first ids: <s>=0, </s>=1, <pad>=2, <unk>=3; then <mask>.
SPECIAL_TOKENS = ("<s>", "</s>", "<pad>", "<unk>", "<mask>")
TOKENIZER_FILE = "tokenizer.json"
#: Sentences in the BPE training sample when ``sample_size`` is not given: every sentence
#: drawn once on average up to this many, so memory is bounded on any corpus.
DEFAULT_SAMPLE_SENTENCES = 2_000_000
LANGUAGES_FILE = "languages.json"


def smoothed_sample(
    texts: Mapping[str, Sequence[str]], alpha: float, size: int, seed: int
) -> list[str]:
    """``size`` sentences drawn language by language with ``q_l ∝ (n_l / N)^alpha``.

    Low-resource languages are over-sampled (with repetition) so that BPE merges are not
    all learnt from the largest language (Lample & Conneau, 2019, section 3.1).
    """
    probs = smoothed_probabilities({lang: len(s) for lang, s in texts.items()}, alpha)
    rng = random.Random(seed)
    langs = list(probs)
    chosen = rng.choices(langs, weights=[probs[lang] for lang in langs], k=size)
    return [rng.choice(texts[lang]) for lang in chosen]


def sample_plan(
    counts: Mapping[str, int], alpha: float, size: int, seed: int
) -> dict[str, array[int]]:
    """Which sentences :func:`smoothed_sample` would draw, from the counts alone.

    The draws are the same, in the same random stream: ``size`` languages with
    ``q_l ∝ (n_l / N)^alpha``, then one sentence index in ``[0, n_l)`` per draw. Only the
    indices are held (``size`` integers), never the sentences.

    Args:
        counts: language -> ``n_l``, in the order the texts mapping would have.
        alpha: smoothing exponent.
        size: sentences in the sample.
        seed: seed of the sample.

    Returns:
        language -> sorted sentence indices (repeated when drawn more than once).
    """
    probs = smoothed_probabilities(counts, alpha)
    rng = random.Random(seed)
    langs = list(probs)
    chosen = rng.choices(langs, weights=[probs[lang] for lang in langs], k=size)
    picks: dict[str, array[int]] = {lang: array("q") for lang in langs}
    for lang in chosen:
        # rng.choice(range(n)) consumes the stream exactly as rng.choice(texts[lang]).
        picks[lang].append(rng.choice(range(counts[lang])))
    del chosen
    return {lang: array("q", sorted(p)) for lang, p in picks.items() if len(p)}


def iter_planned_sample(
    streams: Mapping[str, Callable[[], Iterable[str]]], plan: Mapping[str, Sequence[int]]
) -> Iterator[str]:
    """Stream the sentences a :func:`sample_plan` chose, each as often as it was drawn.

    Args:
        streams: language -> a function opening that language's sentences, in the order
            the plan's indices count them.
        plan: :func:`sample_plan`.

    Yields:
        sentences, language by language in stream order (BPE counts words, so the order
        does not change the vocabulary).
    """
    for lang, indices in plan.items():
        position = 0
        for index, sentence in enumerate(streams[lang]()):
            while position < len(indices) and indices[position] == index:
                yield sentence
                position += 1
            if position == len(indices):
                break


def _constant(items: Iterable[str]) -> Callable[[], Iterable[str]]:
    return lambda: items


def _canonical_ids(tokenizer: Tokenizer) -> Tokenizer:
    """Renumber a trained BPE vocabulary: specials first, then the pieces in sorted order.

    The trainer numbers pieces in hash-map order, so two trainings on the same text give
    the same pieces under different ids, and a seeded pre-training run differs from the
    next (the embedding rows land on other pieces). BPE segmentation depends on the
    pieces and the merge list only, so renumbering changes no segmentation.
    """
    state = json.loads(tokenizer.to_str())
    vocab = state["model"]["vocab"]
    pieces = sorted(t for t in vocab if t not in SPECIAL_TOKENS)
    state["model"]["vocab"] = {t: i for i, t in enumerate([*SPECIAL_TOKENS, *pieces])}
    for added in state.get("added_tokens", []):
        added["id"] = state["model"]["vocab"][added["content"]]
    return Tokenizer.from_str(json.dumps(state))


class SharedBPETokenizer:
    """Byte-pair-encoding vocabulary shared across languages (XLM, Lample & Conneau 2019).

    Hugging Face ``tokenizers`` BPE with NFKC (and optional lower-casing) normalisation and
    whitespace/punctuation pre-tokenisation; the special tokens come first
    (:data:`SPECIAL_TOKENS`). The language list travels with the vocabulary because the
    model's language embedding ids index it.

    Args:
        tokenizer: a Hugging Face ``tokenizers.Tokenizer`` holding the special tokens.
        languages: language codes; id ``i`` of the language embedding is ``languages[i]``.
    """

    def __init__(self, tokenizer: Tokenizer, languages: Sequence[str]) -> None:
        missing = [t for t in SPECIAL_TOKENS if tokenizer.token_to_id(t) is None]
        if missing:
            raise ValueError(
                f"tokenizer lacks the special tokens {missing}; train it with "
                "SharedBPETokenizer.train or add them"
            )
        self.tokenizer = tokenizer
        self.languages = list(languages)

    @classmethod
    def train(
        cls,
        texts: Mapping[str, Sequence[str]],
        *,
        vocab_size: int = 8000,
        alpha: float = 0.5,
        sample_size: int | None = None,
        lowercase: bool = True,
        min_frequency: int = 2,
        seed: int = 0,
    ) -> SharedBPETokenizer:
        """Learn BPE merges on a language-smoothed sample of ``texts`` (held in memory).

        Args:
            texts: language -> sentences (monolingual corpora, sides of parallel data).
            vocab_size: size of the vocabulary, special tokens included.
            alpha: smoothing exponent of the sample (1 = proportional).
            sample_size: sentences in the sample; default the total number of sentences,
                at most :data:`DEFAULT_SAMPLE_SENTENCES`.
            lowercase: lower-case before BPE.
            min_frequency: minimum pair count for a merge.
            seed: seed of the sample.
        """
        return cls.train_from_streams(
            {lang: _constant(s) for lang, s in texts.items()},
            {lang: len(s) for lang, s in texts.items()},
            vocab_size=vocab_size,
            alpha=alpha,
            sample_size=sample_size,
            lowercase=lowercase,
            min_frequency=min_frequency,
            seed=seed,
        )

    @classmethod
    def train_from_streams(
        cls,
        streams: Mapping[str, Callable[[], Iterable[str]]],
        counts: Mapping[str, int],
        *,
        vocab_size: int = 8000,
        alpha: float = 0.5,
        sample_size: int | None = None,
        lowercase: bool = True,
        min_frequency: int = 2,
        seed: int = 0,
    ) -> SharedBPETokenizer:
        """Learn BPE merges on a language-smoothed sample read from streams.

        The sample is documented by :func:`sample_plan`: ``sample_size`` draws of a
        language with ``q_l ∝ (n_l / N)^alpha`` and a sentence of it; only the drawn
        indices are held, and each language's stream is read once to fetch them. The
        trainer keeps word counts, never a list of sentences.

        Args:
            streams: language -> a function that opens its sentences (read once).
            counts: language -> number of sentences ``n_l`` (the order sets the draws).
            vocab_size, alpha, lowercase, min_frequency, seed: as :meth:`train`.
            sample_size: sentences in the sample; default ``min(N,``
                :data:`DEFAULT_SAMPLE_SENTENCES` ``)``.
        """
        total = sum(counts.values())
        size = sample_size or min(total, DEFAULT_SAMPLE_SENTENCES)
        plan = sample_plan(counts, alpha, size, seed)
        tokenizer = Tokenizer(models.BPE(unk_token="<unk>", end_of_word_suffix="</w>"))
        steps: list[normalizers.Normalizer] = [normalizers.NFKC()]
        if lowercase:
            steps.append(normalizers.Lowercase())
        tokenizer.normalizer = normalizers.Sequence(steps)
        tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
        tokenizer.decoder = decoders.BPEDecoder(suffix="</w>")
        trainer = trainers.BpeTrainer(
            vocab_size=vocab_size,
            min_frequency=min_frequency,
            special_tokens=list(SPECIAL_TOKENS),
            end_of_word_suffix="</w>",
            show_progress=False,
        )
        tokenizer.train_from_iterator(iter_planned_sample(streams, plan), trainer=trainer)
        return cls(_canonical_ids(tokenizer), sorted(counts))

    @classmethod
    def from_directory(cls, path: str | Path) -> SharedBPETokenizer:
        """Load what :meth:`save` wrote (``tokenizer.json`` + ``languages.json``)."""
        directory = Path(path)
        for name in (TOKENIZER_FILE, LANGUAGES_FILE):
            if not (directory / name).is_file():
                raise FileNotFoundError(
                    f"{directory / name}: missing; a shared tokenizer directory holds "
                    f"{TOKENIZER_FILE} and {LANGUAGES_FILE} (written by SharedBPETokenizer.save)"
                )
        languages = json.loads((directory / LANGUAGES_FILE).read_text(encoding="utf-8"))
        return cls(Tokenizer.from_file(str(directory / TOKENIZER_FILE)), languages["languages"])

    def save(self, path: str | Path) -> Path:
        """Write ``tokenizer.json`` and ``languages.json`` into ``path`` (atomically each)."""
        directory = Path(path)
        directory.mkdir(parents=True, exist_ok=True)
        atomic_write_text(directory / TOKENIZER_FILE, self.tokenizer.to_str())
        atomic_write_text(
            directory / LANGUAGES_FILE, json.dumps({"languages": self.languages}, indent=2) + "\n"
        )
        return directory

    @property
    def vocab_size(self) -> int:
        return self.tokenizer.get_vocab_size()

    @property
    def vocab_info(self) -> VocabInfo:
        """Special ids for the masking objectives (``cls`` = ``<s>``, ``sep`` = ``</s>``)."""
        found = [self.tokenizer.token_to_id(t) for t in SPECIAL_TOKENS]
        missing = [t for t, i in zip(SPECIAL_TOKENS, found, strict=True) if i is None]
        if missing:
            raise ValueError(f"the tokenizer has no {missing}; train it with SharedBPETokenizer")
        ids = [int(i) for i in found if i is not None]
        return VocabInfo(
            vocab_size=self.vocab_size,
            cls_id=ids[0],
            sep_id=ids[1],
            pad_id=ids[2],
            unk_id=ids[3],
            mask_id=ids[4],
        )

    def lang_id(self, lang: str) -> int:
        """Language-embedding id of ``lang``; unknown codes list the known ones."""
        try:
            return self.languages.index(lang)
        except ValueError:
            raise KeyError(
                f"language {lang!r} is not in this vocabulary; known: {self.languages}"
            ) from None

    def encode(self, text: str) -> list[int]:
        """Subword ids of one sentence, without special tokens."""
        return self.tokenizer.encode(text, add_special_tokens=False).ids

    def encode_batch(self, texts: Iterable[str]) -> list[list[int]]:
        """Subword ids of many sentences, without special tokens."""
        return [e.ids for e in self.tokenizer.encode_batch(list(texts), add_special_tokens=False)]

    def tokens(self, text: str) -> list[str]:
        """The subword strings of one sentence (for inspection)."""
        return self.tokenizer.encode(text, add_special_tokens=False).tokens

    def decode(self, ids: Sequence[int]) -> str:
        return self.tokenizer.decode(list(ids))
