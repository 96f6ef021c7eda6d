"""The end-to-end demo flow on the bundled samples (what `make demo` runs)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from prefect import flow

from flows.artifacts import (
    generalisation_report,
    generalisation_verdict,
    publish_markdown,
    write_report,
)
from flows.config import project_root
from flows.embed_knowledge_graph import embed_knowledge_graph
from flows.evaluate import evaluate, evaluate_ernie_thu_task
from flows.link_entities import link_entities
from flows.pretrain import pretrain
from ptm_core.atomic import atomic_write_text

SAMPLE_CORPUS = "data_specs/text_corpus/sample/corpus.txt"
SAMPLE_KG = "data_specs/knowledge_graph/sample"
# Every HELD_OUT_EVERY-th document of the linked corpus is held out of pre-training.
HELD_OUT_EVERY = 5
DOCUMENTS_RECORD = "training_documents.json"


def split_documents(
    linked_corpus: str | Path, train_path: str | Path, held_out_path: str | Path
) -> dict[str, Any]:
    """Split a linked corpus (one JSON document per line) into training and held-out files.

    Every :data:`HELD_OUT_EVERY`-th document (the 5th, 10th, ...) is held out, so both
    parts cover the whole corpus's range of topics; the split depends on nothing else.

    Returns:
        ``{"train", "held_out"}`` paths and ``{"train_documents", "held_out_documents"}``.
    """
    lines = [
        line for line in Path(linked_corpus).read_text(encoding="utf-8").split("\n") if line.strip()
    ]
    held = [line for i, line in enumerate(lines) if i % HELD_OUT_EVERY == HELD_OUT_EVERY - 1]
    kept = [line for i, line in enumerate(lines) if i % HELD_OUT_EVERY != HELD_OUT_EVERY - 1]
    if len(held) < 2 or not kept:
        raise ValueError(
            f"{linked_corpus}: {len(lines)} documents; the demo holds out every "
            f"{HELD_OUT_EVERY}th and needs at least {2 * HELD_OUT_EVERY} documents"
        )
    atomic_write_text(train_path, "\n".join(kept) + "\n")
    atomic_write_text(held_out_path, "\n".join(held) + "\n")
    return {
        "train": str(train_path),
        "held_out": str(held_out_path),
        "train_documents": len(kept),
        "held_out_documents": len(held),
    }


def fresh_unless_same_documents(pretrain_dir: Path, train_file: str | Path) -> list[str]:
    """``["trainer.resume=false"]`` when ``pretrain_dir`` holds checkpoints of other documents.

    A demo folder from an older run (trained on every document, before the held-out split)
    would otherwise be resumed or reused as finished, and its "held-out" documents would
    have been trained on. A finished run's documents are fingerprinted in
    ``training_documents.json`` (:func:`record_training_documents`); resume=false moves the
    older run aside (never deletes it).
    """
    try:
        recorded = json.loads((pretrain_dir / DOCUMENTS_RECORD).read_text(encoding="utf-8"))
        same = recorded.get("sha256") == _sha256(train_file)
    except (OSError, ValueError, AttributeError):
        same = False
    if same or not (pretrain_dir / "checkpoints").exists():
        return []
    print(f"{pretrain_dir}: trained on other documents; starting afresh (the old run is kept)")
    return ["trainer.resume=false"]


def record_training_documents(pretrain_dir: Path, train_file: str | Path) -> None:
    """Fingerprint the documents a finished pre-training run used (see above)."""
    record = {"file": str(train_file), "sha256": _sha256(train_file)}
    atomic_write_text(pretrain_dir / DOCUMENTS_RECORD, json.dumps(record) + "\n")


def _sha256(path: str | Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def console_summary(verdict: str, outputs: dict[str, str]) -> str:
    """The demo's closing message: the verdict in plain text, then where each output is.

    It starts with a newline: Prefect prefixes a printed message with the time, level and
    flow run, and the verdict's first line would otherwise be glued to that prefix.
    """
    width = max(len(name) for name in outputs) + 2
    lines = [verdict.replace("**", ""), ""]
    lines += [f"{name + ':':<{width}}{path}" for name, path in outputs.items()]
    return "\n" + "\n".join(lines)


@flow(name="demo", log_prints=True)
def demo(output_dir: str = "runs/demo", overrides: list[str] | None = None) -> dict[str, Any]:
    """Link entities -> embed the KG with TransE -> pre-train ERNIE-THU -> evaluate.

    Everything runs offline on the bundled samples: the sample corpus is linked against
    the sample KG, the KG is embedded with PyKEEN's TransE, and every 5th linked document
    is held out. A tiny ERNIE-THU (2 text layers + 1 knowledgeable layer) is pre-trained
    with MLM + NSP + dEA on the other documents and evaluated on the held-out ones next
    to the same model from random init. The report then sets every metric on the
    training documents against the held-out ones and says plainly where the model
    memorised instead of learning; it also gives TransE's link-prediction scores
    against random embeddings.

    Args:
        output_dir: where every artifact and the report go.
        overrides: extra Hydra overrides for the pre-training.

    Returns:
        The summaries of every step, with the report path.
    """
    root = project_root()
    run_dir = Path(output_dir).resolve()
    linked = link_entities(
        str(root / SAMPLE_CORPUS), str(root / SAMPLE_KG), str(run_dir / "linked_corpus.jsonl")
    )
    # A re-run of the demo replaces the embeddings it wrote before (they carry ptm's
    # marker); a folder of the user's own there is still refused.
    kg = embed_knowledge_graph(
        str(root / SAMPLE_KG), str(run_dir / "kg_embeddings"), overwrite=True
    )
    split = split_documents(
        linked["output"], run_dir / "linked_train.jsonl", run_dir / "linked_held_out.jsonl"
    )
    trained = pretrain(
        [
            "experiment=ernie_thu_tiny",
            f"data.linked_corpus={split['train']}",
            # The sample's own vocabulary: the linked split is of the sample corpus.
            f"data.tokenizer={root / 'data_specs' / 'text_corpus' / 'sample-vocab.txt'}",
            f"knowledge.embeddings_dir={kg['output_dir']}",
            f"trainer.output_dir={run_dir / 'pretrain'}",
            *fresh_unless_same_documents(run_dir / "pretrain", split["train"]),
            *(overrides or []),
        ]
    )
    record_training_documents(run_dir / "pretrain", split["train"])
    report = evaluate(
        trained["encoder_dir"], corpus=split["held_out"], report_path=str(run_dir / "report.md")
    )
    # The same evaluation (seeded masks, pairs, corruption) on the documents trained on.
    train_scores = evaluate_ernie_thu_task(trained["encoder_dir"], split["train"], 0)
    section = generalisation_report(
        train_scores,
        report["model"],
        logged=trained["final_metrics"],
        baseline=report["baseline"],
    )
    mrr, base = kg["metrics"]["mrr"], kg["random_baseline"]["mrr"]
    markdown = (
        Path(report["report"]).read_text(encoding="utf-8")
        + f"\n## Training against held-out documents\n\n"
        f"Pre-trained on {split['train_documents']} documents (`{split['train']}`); "
        f"{split['held_out_documents']} held out (`{split['held_out']}`). The "
        "train and held-out columns are the same evaluation (seeded masks, sentence "
        "pairs, entity corruption); random init is the untrained model on the held-out "
        "documents.\n\n"
        + section
        + f"\n## Knowledge graph\n\n- linked corpus: `{linked['output']}` "
        f"({linked['mentions']} mentions)\n- TransE MRR {mrr:.3f} vs {base:.3f} for random "
        f"embeddings (`{kg['output_dir']}`)\n"
    )
    write_report(report["report"], markdown)
    publish_markdown("demo-report", markdown, "the demo's report")
    verdict = generalisation_verdict(
        train_scores, report["model"], report["baseline"], trained["final_metrics"]
    )
    print(
        console_summary(
            verdict,
            {
                "report": report["report"],
                "linked corpus": linked["output"],
                "KG embeddings": kg["output_dir"],
                "encoder": trained["encoder_dir"],
                "loss curve": trained["loss_curve"],
            },
        )
    )
    return {
        "link": linked,
        "kg": kg,
        "split": split,
        "pretrain": trained,
        "evaluate": report,
        "train_scores": train_scores,
    }
