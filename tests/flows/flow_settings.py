"""Settings shared by the flow tests (a uniquely named module: `conftest` is ambiguous
when several test folders have one)."""

# Small, fast pre-training used by every flow test.
FAST = [
    "experiment=bert_tiny",
    "model.num_layers=1",
    "model.hidden_size=64",
    "model.intermediate_size=128",
    "data.max_length=64",
    "data.batch_size=8",
    "trainer.progress=false",
    "trainer.log_every=5",
]
