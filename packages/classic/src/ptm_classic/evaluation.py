"""Held-out perplexity of the recurrent language models (AWD-LSTM, ELMo's biLM).

Both are scored on a text corpus with the vocabulary saved in their ``final/``: the
AWD-LSTM as one token stream in truncated-BPTT windows (hidden state carried), the biLM
row by row with both directions' full-softmax NLL.
"""

from __future__ import annotations

import math
from pathlib import Path

import torch

from ptm_core.seeding import derive_seed


def evaluate_awd_lstm(
    model_dir: str | Path,
    corpus: str | Path,
    *,
    random_init_seed: int | None = None,
    batch_size: int = 4,
    bptt: int = 70,
) -> dict[str, float]:
    """``{"loss", "perplexity", "tokens"}`` of an AWD-LSTM ``final/`` (or of the same
    architecture from random init, seeded) on ``corpus`` tokenised with its tokenizer."""
    from ptm_classic.recurrent.awd_lstm import AWDLSTMLanguageModel, evaluate_perplexity
    from ptm_classic.recurrent.bptt import BPTTBatches, LMTokenStream
    from ptm_core.data.corpus import read_text_corpus
    from ptm_core.data.token_store import InMemoryTokenStore
    from ptm_core.pretraining import tokenize_documents
    from ptm_core.tokenization import WordPieceTokenizer

    directory = Path(model_dir)
    tokenizer = WordPieceTokenizer.from_directory(directory)
    model = AWDLSTMLanguageModel.from_pretrained(directory)
    if random_init_seed is not None:
        torch.manual_seed(derive_seed(random_init_seed, "baseline"))
        model = AWDLSTMLanguageModel(model.config)
    store = InMemoryTokenStore(tokenize_documents(read_text_corpus(corpus), tokenizer))
    stream = LMTokenStream(store, tokenizer.vocab_info.sep_id)
    rows = max(1, min(batch_size, len(stream) // (2 * bptt)))
    scores = evaluate_perplexity(model, BPTTBatches(stream, rows, bptt))
    if not scores["tokens"]:
        raise ValueError(f"{corpus}: no tokens to evaluate; the corpus is too small")
    return scores


@torch.no_grad()
def evaluate_bilm(
    model_dir: str | Path,
    corpus: str | Path,
    *,
    random_init_seed: int | None = None,
    batch_size: int = 16,
    max_words: int = 64,
    lowercase: bool | None = None,
) -> dict[str, float]:
    """``{"forward_nll", "backward_nll", "perplexity", "tokens"}`` of an ELMo biLM
    ``final/`` (or of the same architecture from random init, seeded) on ``corpus``: the
    words of each sentence (at most ``max_words`` per row) against its output ``vocab.txt``
    (others are ``<unk>``). ``lowercase``: lower-case the words (default: when the
    vocabulary has no upper-case word, as a run with ``word_lowercase`` writes it)."""
    from ptm_classic.recurrent.bilm import SPECIAL_WORDS, UNK_ID, VOCAB_FILE, BiLM, load_bilm
    from ptm_classic.recurrent.char_cnn import characters_to_ids
    from ptm_classic.recurrent.word_corpus import iter_corpus_sentences, split_words

    directory = Path(model_dir)
    bilm = load_bilm(directory)
    if random_init_seed is not None:
        torch.manual_seed(derive_seed(random_init_seed, "baseline"))
        bilm = BiLM(bilm.config)
    bilm.eval()
    vocabulary = (directory / VOCAB_FILE).read_text(encoding="utf-8").split("\n")[:-1]
    index = {word: i for i, word in enumerate(vocabulary)}
    if lowercase is None:
        lowercase = all(word == word.lower() for word in vocabulary[len(SPECIAL_WORDS) :])
    rows: list[list[str]] = []
    for sentence in iter_corpus_sentences(corpus):
        words = split_words(sentence, lowercase=lowercase)
        rows += [words[i : i + max_words] for i in range(0, len(words), max_words)]
    totals = {"forward": 0.0, "backward": 0.0}
    count = 0
    for first in range(0, len(rows), batch_size):
        batch = rows[first : first + batch_size]
        length = max(len(row) for row in batch)
        targets = torch.full((len(batch), length), UNK_ID, dtype=torch.long)
        mask = torch.zeros(len(batch), length, dtype=torch.bool)
        for b, row in enumerate(batch):
            targets[b, : len(row)] = torch.tensor([index.get(w, UNK_ID) for w in row])
            mask[b, : len(row)] = True
        chars = characters_to_ids(batch, bilm.config.max_characters)
        out = bilm.lm_loss(chars, mask, targets)
        totals["forward"] += float(out.forward_nll) * out.num_predictions
        totals["backward"] += float(out.backward_nll) * out.num_predictions
        count += out.num_predictions
    if count == 0:
        raise ValueError(f"{corpus}: no words to evaluate; the corpus is too small")
    forward, backward = totals["forward"] / count, totals["backward"] / count
    return {
        "forward_nll": forward,
        "backward_nll": backward,
        "perplexity": math.exp(min((forward + backward) / 2, 50.0)),
        "tokens": float(count),
    }


__all__ = ["evaluate_awd_lstm", "evaluate_bilm"]
