"""Language sampling with exponent smoothing (Lample & Conneau, 2019, section 3.1)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import torch


def smoothed_probabilities(counts: Mapping[str, int], alpha: float = 0.5) -> dict[str, float]:
    """Multinomial over languages with ``q_l = p_l^alpha / sum_k p_k^alpha``, ``p_l = n_l / N``.

    ``alpha = 1`` samples in proportion to size; ``alpha < 1`` gives low-resource languages
    more than their share (XLM uses 0.5 for pre-training, 0.3 for the vocabulary in
    XLM-R); ``alpha = 0`` is uniform.

    Args:
        counts: language (or language pair) -> number of sentences ``n_l``.
        alpha: smoothing exponent in ``[0, 1]``.

    Returns:
        language -> ``q_l`` (sums to 1), in the order of ``counts``.

    Raises:
        ValueError: no language with a positive count, negative counts, or alpha out of range.
    """
    if not 0.0 <= alpha <= 1.0:
        raise ValueError(f"alpha must be in [0, 1], got {alpha}")
    if any(n < 0 for n in counts.values()):
        raise ValueError(f"sentence counts must be >= 0, got {dict(counts)}")
    total = sum(counts.values())
    if total <= 0:
        raise ValueError(f"no sentences to sample from: counts {dict(counts)}")
    weights = {lang: (n / total) ** alpha if n > 0 else 0.0 for lang, n in counts.items()}
    norm = sum(weights.values())
    return {lang: w / norm for lang, w in weights.items()}


class LanguageSampler:
    """Draws languages (or pairs) from :func:`smoothed_probabilities`.

    Args:
        counts: key -> number of sentences.
        alpha: smoothing exponent.

    Example:
        >>> sampler = LanguageSampler({"en": 900, "fr": 100}, alpha=0.5)
        >>> round(sampler.probabilities["fr"], 3)  # rather than 0.1
        0.25
    """

    def __init__(self, counts: Mapping[str, int], alpha: float = 0.5) -> None:
        self.probabilities = smoothed_probabilities(counts, alpha)
        self.keys: list[str] = list(self.probabilities)
        self._probs = torch.tensor([self.probabilities[k] for k in self.keys], dtype=torch.float64)

    def sample(self, n: int, generator: torch.Generator) -> list[str]:
        """``n`` keys drawn independently (with replacement)."""
        picks = torch.multinomial(self._probs, n, replacement=True, generator=generator)
        return [self.keys[i] for i in picks.tolist()]

    def sample_indices(self, n: int, generator: torch.Generator) -> Sequence[int]:
        """Like :meth:`sample`, as positions in :attr:`keys`."""
        return torch.multinomial(self._probs, n, replacement=True, generator=generator).tolist()
