"""The ``data`` block of a text corpus with a knowledge graph (``configs/data/kg_sample.yaml``).

Typed settings (no torch): the families that train on text plus a KG (KEPLER, WKLM) read
their ``data`` block as :class:`KGCorpusData`; each default is written here once, the YAML
presets set only what differs.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class LinkerSettings:
    """How the text corpus is linked to the KG when no linked corpus is given
    (:class:`~ptm_knowledge.linking.EntityLinker`'s options; ``docs/knowledge/linking.md``).

    ``guard: none``, ``disambiguation: overlap``, ``threshold: 0.3`` give the linker of
    before #38 (``ptm_knowledge.linking.LEGACY_SETTINGS``).

    Attributes:
        case: ``smart``, ``sensitive`` or ``insensitive`` alias matching.
        threshold: the NIL threshold, lowest candidate score kept (calibrated on WordNet
            gloss gold: ``benchmarks/results/wordnet_linking.md``).
        prior_weight: weight of the alias prior against the context score.
        context_window: tokens each side of a mention scored against descriptions.
        guard: ``pos`` (no function words, nouns only) or ``none``.
        disambiguation: ``context`` or ``overlap`` (before #38).
        pos_prior: noun-share prior for untagged text: ``english``, a TSV path, or null.
        min_noun_share: lowest noun share of a linked untagged word.
    """

    case: str = "smart"
    threshold: float = 0.32
    prior_weight: float = 0.5
    context_window: int = 40
    guard: str = "pos"
    disambiguation: str = "context"
    pos_prior: str | None = "english"
    min_noun_share: float = 0.5


@dataclass
class KGCorpusData:
    """A text corpus (raw, prepared or linked) and a knowledge graph.

    Attributes:
        corpus: text-corpus file(s) or folder (``data_specs/text_corpus``).
        tokenizer: a ``vocab.txt`` or tokenizer folder; ``None`` trains a WordPiece
            vocabulary of ``vocab_size`` on the corpus.
        vocab_size: size of a trained vocabulary.
        lowercase: lower-case text.
        max_length: tokens per row, special tokens included.
        batch_size: rows per micro-batch.
        kg: a folder with ``entities.tsv`` (+ ``triples.tsv``).
        linked_corpus: a linked corpus ``.jsonl`` used as is; ``None`` links ``corpus``
            with ``linker`` into ``<output_dir>/linked_corpus.jsonl`` (the families that
            read linked text).
        linker: the entity linker's options.
        prepared: a folder prepared earlier, used instead of ``corpus``/``linked_corpus``.
        cache_dir: where raw inputs are prepared (``None``: ``$PTM_CACHE_DIR/prepared``).
        num_workers: DataLoader processes that build batches off the training loop.
    """

    corpus: str | None = None
    tokenizer: str | None = None
    vocab_size: int = 8000
    lowercase: bool = True
    max_length: int = 128
    batch_size: int = 32
    kg: str | None = None
    linked_corpus: str | None = None
    linker: LinkerSettings = field(default_factory=LinkerSettings)
    prepared: str | None = None
    cache_dir: str | None = None
    num_workers: int = 0

    def require_kg(self) -> str:
        """``kg``, or a one-line error naming the key and the fix."""
        if not self.kg:
            raise ValueError(
                "data.kg is not set: give a knowledge-graph folder with entities.tsv and "
                "triples.tsv (data.kg=<folder>)"
            )
        return self.kg
