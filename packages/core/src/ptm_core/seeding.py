"""Stable seeds derived from several parts (base seed, epoch, batch index, ...)."""

from __future__ import annotations

import hashlib

import torch


def derive_seed(*parts: int | str) -> int:
    """A 63-bit seed that depends on every part and is stable across runs and machines.

    Python's ``hash`` is salted per process for strings, so a digest is used instead.
    """
    digest = hashlib.blake2b(repr(parts).encode("utf-8"), digest_size=8).digest()
    return int.from_bytes(digest, "little") >> 1


def generator_for(*parts: int | str) -> torch.Generator:
    """A CPU ``torch.Generator`` seeded with :func:`derive_seed` of ``parts``."""
    return torch.Generator().manual_seed(derive_seed(*parts))
