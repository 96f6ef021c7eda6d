"""What a parameter-efficient fine-tune trains: the method and its numbers (torch-free)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

PEFT_METHODS: tuple[str, ...] = ("none", "lora", "ia3", "prompt", "prefix")
# Methods applied by Hugging Face peft to ptm's named nn.Linear layers.
LIBRARY_METHODS: tuple[str, ...] = ("lora", "ia3")
# Methods written in ptm, through the encoder's seams.
PROMPT_METHODS: tuple[str, ...] = ("prompt", "prefix")


@dataclass(frozen=True)
class PeftConfig:
    """One parameter-efficient fine-tuning method and its settings.

    Methods: LoRA (Hu et al., 2022) and IA3 (Liu et al., 2022) through Hugging Face
    ``peft``; soft prompt tuning (Lester et al., 2021) and prefix tuning (Li & Liang, 2021)
    inside ptm's encoder (:mod:`ptm_core.peft.prompts`).

    Attributes:
        method: one of :data:`PEFT_METHODS` (``none``: every parameter trains).
        r: LoRA rank.
        alpha: LoRA scale numerator (update ``alpha / r * B A``).
        dropout: LoRA dropout on the adapter's input.
        target_modules: the encoder's ``nn.Linear`` names LoRA/IA3 wrap; ``None``: the
            attention and feed-forward projections (:data:`~ptm_core.peft.library.DEFAULT_TARGETS`).
        num_virtual_tokens: soft-prompt or prefix length.
        block: the config block the settings are read from (``finetune``; a family's own,
            such as ``xlm_finetune``): messages name ``<block>.peft_*``, the keys the user
            sets. Not a setting: not recorded, not compared.
        max_length_key: the setting that bounds a row's tokens (``task.max_length``;
            ``xlm_finetune.max_length``...), named where a soft prompt leaves a row no room.
    """

    method: str = "none"
    r: int = 8
    alpha: float = 16.0
    dropout: float = 0.0
    target_modules: tuple[str, ...] | None = None
    num_virtual_tokens: int = 20
    block: str = field(default="finetune", compare=False)
    max_length_key: str = field(default="task.max_length", compare=False)

    def __post_init__(self) -> None:
        if self.method not in PEFT_METHODS:
            raise ValueError(
                f"{self.block}.peft: unknown method {self.method!r}; valid: "
                f"{', '.join(PEFT_METHODS)}"
            )
        if self.r < 1:
            raise ValueError(f"{self.block}.peft_r must be >= 1 (the LoRA rank), got {self.r}")
        if not 0.0 <= self.dropout < 1.0:
            raise ValueError(f"{self.block}.peft_dropout must be in [0, 1), got {self.dropout}")
        if self.num_virtual_tokens < 1:
            raise ValueError(
                f"{self.virtual_tokens_key} must be >= 1, got {self.num_virtual_tokens}"
            )
        if self.target_modules is not None and not self.target_modules:
            raise ValueError(
                f"{self.block}.peft_target_modules is empty; give module names (e.g. "
                "[query, value]) or null for the defaults"
            )

    @property
    def virtual_tokens_key(self) -> str:
        """The setting of the soft-prompt or prefix length, as the user sets it."""
        return f"{self.block}.peft_virtual_tokens"

    @property
    def enabled(self) -> bool:
        """Whether a method other than ``none`` is set."""
        return self.method != "none"

    def to_dict(self) -> dict[str, Any]:
        """The settings as ``task.json`` records them (only those the method reads)."""
        record = asdict(self)
        for key in ("block", "max_length_key"):  # where the settings came from, not settings
            record.pop(key)
        if self.method in LIBRARY_METHODS:
            record.pop("num_virtual_tokens")
            record["target_modules"] = list(self.target_modules) if self.target_modules else None
            if self.method == "ia3":
                for key in ("r", "alpha", "dropout"):
                    record.pop(key)
        else:
            record = {"method": self.method, "num_virtual_tokens": self.num_virtual_tokens}
        return record

    @classmethod
    def from_dict(cls, record: dict[str, Any]) -> PeftConfig:
        """Read what :meth:`to_dict` wrote (``ValueError`` on a bad value or key)."""
        known = {"method", "r", "alpha", "dropout", "target_modules", "num_virtual_tokens"}
        unknown = sorted(set(record) - known)
        if unknown:
            raise ValueError(f"unknown peft settings {unknown}; valid: {sorted(known)}")
        targets = record.get("target_modules")
        return cls(**{**record, "target_modules": tuple(targets) if targets else None})

    @classmethod
    def from_options(
        cls, options: Any, *, block: str = "finetune", max_length_key: str = "task.max_length"
    ) -> PeftConfig:
        """From the ``finetune`` block (:class:`~ptm_core.families.core_settings.FinetuneOptions`),
        or a family's block ``block`` with the same ``peft*`` keys (its messages name them, and
        ``max_length_key``)."""
        targets = options.peft_target_modules
        return cls(
            method=str(options.peft),
            r=int(options.peft_r),
            alpha=float(options.peft_alpha),
            dropout=float(options.peft_dropout),
            target_modules=tuple(str(t) for t in targets) if targets else None,
            num_virtual_tokens=int(options.peft_virtual_tokens),
            block=block,
            max_length_key=max_length_key,
        )
