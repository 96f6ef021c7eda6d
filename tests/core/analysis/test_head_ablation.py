"""Michel et al.'s gradient head importance against an exhaustive single-head ablation on a
tiny classifier, and the importance file that ``ptm compress --importance`` reads."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from ptm_core.analysis.heads import ablate_heads, read_head_importance, spearman
from ptm_core.compress.prune import head_importance, head_mask
from ptm_core.encoders.presets import bert_encoder
from ptm_core.finetune.model import TaskModel, build_task_model


def _classifier(seed: int) -> TaskModel:
    torch.manual_seed(seed)
    encoder = bert_encoder(
        vocab_size=50,
        hidden_size=32,
        num_layers=2,
        num_heads=4,
        intermediate_size=64,
        dropout=0.0,
        attention_dropout=0.0,
    )
    return build_task_model(encoder, "classification", 2, 0.0, label_names=["0", "1"]).eval()


def _batches(seed: int) -> list[dict[str, torch.Tensor]]:
    g = torch.Generator().manual_seed(seed)
    out = []
    for _ in range(8):
        ids = torch.randint(4, 50, (8, 10), generator=g)
        out.append(
            {
                "input_ids": ids,
                "attention_mask": torch.ones_like(ids),
                "labels": (ids == 7).any(1).long(),
            }
        )
    return out


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_gradient_importance_ranks_heads_as_ablation_does(seed: int) -> None:
    model, batches = _classifier(seed), _batches(seed)
    result = ablate_heads(model, batches)
    assert result.importance.shape == result.loss_increase.shape == (2, 4)
    # |dL/dxi| is the first-order size of what gating the head off does to each batch's loss
    assert result.spearman_abs > 0.7
    expected = torch.stack(head_importance(model, batches))
    assert torch.allclose(result.normalized.float(), expected, atol=1e-6)
    # the ablation is what head_mask gives, by hand for one head
    gates = [torch.ones(4), torch.ones(4)]
    gates[1][2] = 0.0
    with torch.no_grad(), head_mask(model.encoder, gates):
        ablated = sum(float(model(b).loss) for b in batches) / len(batches)
    assert ablated - result.base_loss == pytest.approx(result.loss_increase[1, 2].item(), abs=1e-6)


def test_spearman_by_hand() -> None:
    assert spearman(torch.tensor([1.0, 2, 3, 4]), torch.tensor([10.0, 20, 30, 40])) == 1.0
    assert spearman(torch.tensor([1.0, 2, 3]), torch.tensor([3.0, 2, 1])) == pytest.approx(-1.0)


def test_importance_file_is_checked(tmp_path: Path) -> None:
    file = tmp_path / "heads.json"
    file.write_text(json.dumps({"importance": [[0.1, 0.2], [0.3, 0.4]]}))
    scores = read_head_importance(file, [2, 2])
    assert [s.tolist() for s in scores] == [pytest.approx([0.1, 0.2]), pytest.approx([0.3, 0.4])]
    with pytest.raises(ValueError, match=r"heads\.json: 'importance' has heads per layer"):
        read_head_importance(file, [4, 4])
    file.write_text(json.dumps({"scores": []}))
    with pytest.raises(ValueError, match="no 'importance' list"):
        read_head_importance(file, [2, 2])
    file.write_text("{")
    with pytest.raises(ValueError, match="not JSON"):
        read_head_importance(file, [2, 2])
    with pytest.raises(FileNotFoundError, match="ptm analyze MODEL heads"):
        read_head_importance(tmp_path / "none.json", [2, 2])
