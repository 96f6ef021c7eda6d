"""K-BERT knowledge layer: every layout / soft-position / visibility rule on hand-made cases."""

from __future__ import annotations

import pytest
import torch

from ptm_knowledge.kbert import build_sentence_tree, pair_words


def whole(s: str) -> list[str]:  # the split=lambda s: [s]
    return [s]


PAPER = ["[CLS]", "Tim", "Cook", "is", "visiting", "Beijing", "now"]
PAPER_KG = {"Tim Cook": ["CEO Apple"], "Beijing": ["capital China", "is_a City"]}


def _matrix(rows: list[str]) -> torch.Tensor:
    return torch.tensor([[c == "1" for c in row.replace(" ", "")] for row in rows])


def test_paper_example_with_word_split_matches_the_figure() -> None:
    # K-BERT paper, Figure 2/3: "Tim Cook is visiting Beijing now", predicate + object
    # split into words.
    tree = build_sentence_tree(PAPER, PAPER_KG, max_entities=2, max_length=64, split=str.split)
    assert tree.tokens == [
        "[CLS]", "Tim", "Cook", "CEO", "Apple", "is", "visiting",
        "Beijing", "capital", "China", "is_a", "City", "now",
    ]  # fmt: skip
    assert tree.soft_positions.tolist() == [0, 1, 2, 3, 4, 3, 4, 5, 6, 7, 6, 7, 6]
    expected = _matrix(
        [
            # C T C C A i v B c C i C n
            "1 1 1 0 0 1 1 1 0 0 0 0 1",  # [CLS]
            "1 1 1 1 1 1 1 1 0 0 0 0 1",  # Tim
            "1 1 1 1 1 1 1 1 0 0 0 0 1",  # Cook
            "0 1 1 1 1 0 0 0 0 0 0 0 0",  # CEO
            "0 1 1 1 1 0 0 0 0 0 0 0 0",  # Apple
            "1 1 1 0 0 1 1 1 0 0 0 0 1",  # is
            "1 1 1 0 0 1 1 1 0 0 0 0 1",  # visiting
            "1 1 1 0 0 1 1 1 1 1 1 1 1",  # Beijing
            "0 0 0 0 0 0 0 1 1 1 0 0 0",  # capital
            "0 0 0 0 0 0 0 1 1 1 0 0 0",  # China
            "0 0 0 0 0 0 0 1 0 0 1 1 0",  # is_a
            "0 0 0 0 0 0 0 1 0 0 1 1 0",  # City
            "1 1 1 0 0 1 1 1 0 0 0 0 1",  # now
        ]
    )
    assert tree.visible_matrix.dtype == torch.bool
    assert torch.equal(tree.visible_matrix, expected)
    assert tree.is_knowledge.tolist() == [0, 0, 0, 1, 1, 0, 0, 0, 1, 1, 1, 1, 0]


def test_whole_units_reference_layout() -> None:
    # split=lambda s: [s]: every word and every object is one unit.
    tree = build_sentence_tree(PAPER, PAPER_KG, max_entities=2, max_length=64, split=lambda s: [s])
    assert tree.tokens == [
        "[CLS]", "Tim", "Cook", "CEO Apple", "is", "visiting",
        "Beijing", "capital China", "is_a City", "now",
    ]  # fmt: skip
    assert tree.soft_positions.tolist() == [0, 1, 2, 3, 3, 4, 5, 6, 6, 6]
    expected = _matrix(
        [
            "1 1 1 0 1 1 1 0 0 1",
            "1 1 1 1 1 1 1 0 0 1",
            "1 1 1 1 1 1 1 0 0 1",
            "0 1 1 1 0 0 0 0 0 0",
            "1 1 1 0 1 1 1 0 0 1",
            "1 1 1 0 1 1 1 0 0 1",
            "1 1 1 0 1 1 1 1 1 1",
            "0 0 0 0 0 0 1 1 0 0",
            "0 0 0 0 0 0 1 0 1 0",
            "1 1 1 0 1 1 1 0 0 1",
        ]
    )
    assert torch.equal(tree.visible_matrix, expected)


@pytest.mark.parametrize("n_objects", [0, 1, 2, 3, 5])
def test_branch_count_is_capped_in_priority_order(n_objects: int) -> None:
    objects = [f"o{i}" for i in range(n_objects)]
    tree = build_sentence_tree(
        ["a", "X", "b"], {"X": objects}, max_entities=2, max_length=32, split=whole
    )
    kept = objects[:2]
    assert tree.tokens == ["a", "X", *kept, "b"]
    assert tree.soft_positions.tolist() == [0, 1, *[2] * len(kept), 2]
    assert tree.is_knowledge.sum() == len(kept)
    # Deterministic: the same call gives the same tree.
    again = build_sentence_tree(
        ["a", "X", "b"], {"X": objects}, max_entities=2, max_length=32, split=whole
    )
    assert again.tokens == tree.tokens


def test_multi_piece_branch_positions_and_visibility() -> None:
    tree = build_sentence_tree(
        ["X", "y", "z"], {"X": ["p q r"]}, max_entities=1, max_length=32, split=str.split
    )
    assert tree.tokens == ["X", "p", "q", "r", "y", "z"]
    assert tree.soft_positions.tolist() == [0, 1, 2, 3, 1, 2]
    vm = tree.visible_matrix
    assert vm[1:4, 1:4].all() and vm[1:4, 0].all()  # branch sees itself and its word
    assert not vm[1:4, 4:].any() and not vm[4:, 1:4].any()  # nothing else, both ways


def test_adjacent_entities_do_not_see_each_others_branches() -> None:
    kg = {"X": ["x1"], "Y": ["y1"]}
    tree = build_sentence_tree(["X", "Y", "z"], kg, max_entities=2, max_length=32, split=whole)
    assert tree.tokens == ["X", "x1", "Y", "y1", "z"]
    assert tree.soft_positions.tolist() == [0, 1, 1, 2, 2]
    vm = tree.visible_matrix
    assert vm[0, 1] and vm[1, 0] and vm[2, 3] and vm[3, 2]
    assert not vm[0, 3] and not vm[3, 0] and not vm[2, 1] and not vm[1, 2]
    assert not vm[1, 3] and not vm[3, 1]  # branches of different words
    assert not vm[4, 1] and not vm[4, 3]  # a trunk word sees no other word's branch
    assert vm[0, 2] and vm[2, 4]  # trunk sees trunk
    assert vm.diagonal().all()


def test_multi_word_subject_longest_match_wins() -> None:
    kg = {"New": ["n1"], "New York": ["city"], "New York Times": ["newspaper"]}
    words = ["the", "New", "York", "Times", "and", "New", "York", "New"]
    tree = build_sentence_tree(words, kg, max_entities=2, max_length=32, split=whole)
    assert tree.tokens == [
        "the", "New", "York", "Times", "newspaper", "and", "New", "York", "city", "New", "n1",
    ]  # fmt: skip
    assert tree.soft_positions.tolist() == [0, 1, 2, 3, 4, 4, 5, 6, 7, 7, 8]
    vm = tree.visible_matrix
    # Every trunk unit of the subject sees its branch, and the branch sees all of them.
    assert vm[1:4, 4].all() and vm[4, 1:4].all()
    assert not vm[4, 0] and not vm[4, 5] and not vm[0, 4]
    assert tree.word_index.tolist() == [0, 1, 2, 3, 3, 4, 5, 6, 6, 7, 7]


def test_truncation_drops_branches_before_sentence_tokens() -> None:
    words = ["X", "a", "Y", "b", "c"]
    kg = {"X": ["x1 x2 x3"], "Y": ["y1 y2"]}
    tree = build_sentence_tree(words, kg, max_entities=2, max_length=9, split=str.split)
    # 5 sentence units + 3 (X's branch) fit; Y's branch (2) would exceed 9 and is dropped.
    assert tree.tokens == ["X", "x1", "x2", "x3", "a", "Y", "b", "c"]
    assert tree.num_dropped_branches == 1
    tight = build_sentence_tree(words, kg, max_entities=2, max_length=5, split=str.split)
    assert tight.tokens == words  # every sentence token kept, all knowledge dropped
    assert tight.soft_positions.tolist() == [0, 1, 2, 3, 4]
    assert tight.visible_matrix.all()
    too_long = build_sentence_tree(words, kg, max_entities=2, max_length=3, split=str.split)
    assert too_long.tokens == ["X", "a", "Y"]  # only a too-long sentence loses tokens


def test_padding_sees_nothing_and_is_seen_by_nothing() -> None:
    tree = build_sentence_tree(
        ["X", "a"], {"X": ["x1"]}, max_entities=1, max_length=6, pad=True, split=whole
    )
    assert tree.tokens == ["X", "x1", "a", "[PAD]", "[PAD]", "[PAD]"]
    vm = tree.visible_matrix
    assert not vm[3:].any() and not vm[:, 3:].any()
    assert not tree.is_knowledge[3:].any()


def test_sentence_pairs_with_sep() -> None:
    words = pair_words(["X", "a"], ["b", "X"])
    assert words == ["[CLS]", "X", "a", "[SEP]", "b", "X", "[SEP]"]
    kg = {"X": ["x1"], "[SEP]": ["never"]}
    tree = build_sentence_tree(words, kg, max_entities=1, max_length=32, split=whole)
    assert tree.tokens == ["[CLS]", "X", "x1", "a", "[SEP]", "b", "X", "x1", "[SEP]"]
    assert tree.soft_positions.tolist() == [0, 1, 2, 2, 3, 4, 5, 6, 6]
    assert tree.segment_ids.tolist() == [0, 0, 0, 0, 0, 1, 1, 1, 1]
    vm = tree.visible_matrix
    assert not vm[2, 7] and not vm[7, 2]  # the two x1 branches belong to different words
    assert vm[2, 1] and not vm[2, 5] and vm[7, 5 + 1]


def test_special_tokens_are_never_split_or_linked() -> None:
    tree = build_sentence_tree(
        ["[CLS]", "ab", "[SEP]"], {}, max_entities=1, max_length=8, split=lambda s: list(s)
    )
    assert tree.tokens == ["[CLS]", "a", "b", "[SEP]"]


def test_missing_split_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match="split="):
        build_sentence_tree(["a"], {}, max_entities=1, max_length=4)
