"""Plain commands run in process (no Prefect at all); ``--prefect`` and a configured
``PREFECT_API_URL`` run them as flows; ``ptm server start|status|stop`` keeps one server
that flow runs reuse."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "data_specs" / "text_corpus" / "sample"
VOCAB = ROOT / "data_specs" / "text_corpus" / "sample-vocab.txt"
KG = ROOT / "data_specs" / "knowledge_graph" / "sample"

# Each plain command through flows.cli.main in one interpreter; then whether Prefect was
# ever imported (without it no flow run and no API server can have been started).
PLAIN_RUNS = textwrap.dedent(
    """
    import json, sys
    from flows.cli import main

    out = sys.argv[1]
    codes = [
        main(["prepare", sys.argv[2], "--output", out + "/prepared", "--tokenizer", sys.argv[3]]),
        main(["link", "--corpus", sys.argv[2], "--kg", sys.argv[4], "--output", out + "/l.jsonl"]),
        main(["embed-kg", "--kg", sys.argv[4], "--output", out + "/emb", "--epochs", "2"]),
        main(["evaluate", out + "/emb"]),
    ]
    loaded = sorted(m for m in sys.modules if m == "prefect" or m.startswith("prefect."))
    print("RESULT " + json.dumps({"codes": codes, "prefect": loaded}))
    """
)


def _env(home: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
    env.update(
        PREFECT_HOME=str(home),
        PREFECT_SERVER_ANALYTICS_ENABLED="false",
        PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS="120",
        DO_NOT_TRACK="1",
        HF_HUB_OFFLINE="1",
        PTM_PROGRESS_SECONDS="0",
        **extra,
    )
    return env


def _run(args: list[str], env: dict[str, str], timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run(
        args, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout, check=False
    )


@pytest.mark.integration
def test_plain_commands_import_no_prefect_and_write_their_outputs(tmp_path: Path) -> None:
    home = tmp_path / "prefect-home"
    done = _run(
        [sys.executable, "-c", PLAIN_RUNS, str(tmp_path), str(SAMPLE), str(VOCAB), str(KG)],
        _env(home),
    )
    lines = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    assert lines, done.stdout[-2000:] + done.stderr[-3000:]
    result = json.loads(lines[0].removeprefix("RESULT "))
    assert result == {"codes": [0, 0, 0, 0], "prefect": []}, done.stderr[-3000:]
    # The same outputs, end tables and report as the flows: the report is a file.
    assert (tmp_path / "prepared" / "manifest.json").is_file()
    assert (tmp_path / "l.jsonl").stat().st_size > 0
    report = tmp_path / "evaluation-emb.md"
    assert report.is_file() and f"evaluation report: {report}" in done.stdout
    for table in ("prepare", "link"):
        assert f"\n{table}\n" in done.stdout
    assert "View at" not in done.stdout + done.stderr
    assert not (home / "prefect.db").exists()  # no server ever opened its database


def test_prefect_configured_reads_environment_and_active_profile(tmp_path: Path) -> None:
    code = "from flows.execution import prefect_configured as c; import sys; print(c(), 'prefect' in sys.modules)"
    home = tmp_path / "home"
    home.mkdir()

    def ask(**extra: str) -> str:
        done = _run([sys.executable, "-c", code], _env(home, **extra), timeout=120)
        assert done.returncode == 0, done.stderr
        return done.stdout.strip()

    assert ask() == "False False"
    assert ask(PREFECT_API_URL="http://127.0.0.1:9/api") == "True False"
    (home / "profiles.toml").write_text(
        'active = "mine"\n[profiles.mine]\nPREFECT_API_URL = "http://127.0.0.1:9/api"\n'
        "[profiles.other]\n"
    )
    assert ask() == "True False"
    assert ask(PREFECT_PROFILE="other") == "False False"


@pytest.mark.integration
@pytest.mark.usefixtures("prefect_harness")
def test_prefect_flag_runs_the_command_as_a_flow_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import asyncio

    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import FlowFilter, FlowFilterName

    import flows.cli_flows
    from flows.cli import main

    monkeypatch.setattr(flows.cli_flows, "prefect_configured", lambda: False)
    out = tmp_path / "prepared"
    args = ["prepare", str(SAMPLE), "--output", str(out), "--tokenizer", str(VOCAB)]

    async def prepare_runs() -> int:
        async with get_client() as client:
            flt = FlowFilter(name=FlowFilterName(any_=["prepare_corpus"]))
            return len(await client.read_flow_runs(flow_filter=flt))

    before = asyncio.run(prepare_runs())
    assert main([*args, "--workers", "0"]) == 0
    assert asyncio.run(prepare_runs()) == before  # plain: no flow run
    assert main([*args, "--workers", "0", "--prefect"]) == 0
    assert asyncio.run(prepare_runs()) == before + 1


@pytest.mark.integration
def test_server_start_status_stop_and_flow_runs_reuse_it(tmp_path: Path) -> None:
    home = tmp_path / "prefect-home"
    env = _env(home)
    ptm = [sys.executable, "-m", "flows.cli"]
    try:
        started = _run([*ptm, "server", "start", "--port", "0"], env)
        assert started.returncode == 0, started.stderr
        record = json.loads((home / "ptm-server.json").read_text())
        url = record["url"]
        assert f"Prefect server started at {record['ui']}" in started.stdout
        assert _run([*ptm, "server", "status"], env).returncode == 0
        again = _run([*ptm, "server", "start"], env)
        assert "already running" in again.stdout
        out = tmp_path / "prepared"
        flow = _run(
            [
                *ptm,
                "prepare",
                str(SAMPLE),
                "--output",
                str(out),
                "--tokenizer",
                str(VOCAB),
                "--workers",
                "0",
                "--prefect",
            ],
            env,
        )
        assert flow.returncode == 0, flow.stderr[-3000:]
        assert "temporary" not in flow.stderr  # the running server was reused
        request = urllib.request.Request(
            f"{url}/flow_runs/filter", data=b"{}", headers={"Content-Type": "application/json"}
        )
        with urllib.request.urlopen(request, timeout=30) as response:
            runs = json.loads(response.read())
        assert [r["state_type"] for r in runs] == ["COMPLETED"]
    finally:
        stopped = _run([*ptm, "server", "stop"], env)
    assert stopped.returncode == 0 and "stopped the Prefect server" in stopped.stdout
    assert _run([*ptm, "server", "status"], env).returncode == 1
    assert not (home / "ptm-server.json").exists()
    import psutil

    assert not psutil.pid_exists(record["pid"]) or psutil.Process(record["pid"]).status() == (
        psutil.STATUS_ZOMBIE
    )


def test_plain_prepare_retries_io_errors_not_bad_lines(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import flows.execution
    import flows.preparation as module
    from ptm_core.data.corpus import CorpusError

    monkeypatch.setattr(flows.execution, "RETRY_DELAYS", (0.0, 0.0))
    corpus = tmp_path / "big.jsonl"
    lines = [json.dumps({"text": f"Document {i} is here. It ends now."}) for i in range(300)]
    lines[150] = "[1, 2"  # line 151, in the middle shard
    corpus.write_text("\n".join(lines) + "\n")
    calls: list[str] = []
    real = module.prepare_shard

    def flaky(shard):  # type: ignore[no-untyped-def]
        calls.append(shard.name)
        if calls.count(shard.name) == 1 and len(calls) == 1:
            raise OSError(5, "Input/output error")  # transient: tried again
        return real(shard)

    monkeypatch.setattr(module, "prepare_shard", flaky)
    out = tmp_path / "out"
    with pytest.raises(CorpusError, match=rf"^{corpus}:151: invalid JSON"):
        module.prepare_corpus_in_process(
            [str(corpus)], str(out), tokenizer=str(VOCAB), workers=0, shard_bytes=3000
        )
    assert calls[0] == calls[1]  # the I/O error was retried
    shards = set(calls)
    assert len(calls) == len(shards) + 1 > 4  # the bad line was not retried
    records = list((out / "shards").glob("*.json"))
    assert len(records) == len(shards) - 1 and not (out / "manifest.json").exists()


def test_plain_link_reuses_the_shard_files_of_an_earlier_run(tmp_path: Path) -> None:
    from flows.entity_linking import link_entities_in_process

    output = tmp_path / "linked.jsonl"
    first = link_entities_in_process(str(SAMPLE), str(KG), str(output), shard_size=8)
    assert first["executed"] == first["shards"] > 1
    text = output.read_text(encoding="utf-8")
    again = link_entities_in_process(str(SAMPLE), str(KG), str(output), shard_size=8)
    assert again["executed"] == 0 and output.read_text(encoding="utf-8") == text


def test_flow_runs_only_when_asked_configured_or_a_flow_command(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import flows.cli_flows as dispatch
    from flows.cli import _parser

    parse = _parser().parse_args
    monkeypatch.setattr(dispatch, "prefect_configured", lambda: False)
    prepare = ["prepare", "corpus.txt", "--output", "out"]
    assert not dispatch.runs_as_flow(parse(prepare))
    assert dispatch.runs_as_flow(parse([*prepare, "--prefect"]))
    assert dispatch.runs_as_flow(parse([*prepare, "--dask"]))
    assert dispatch.runs_as_flow(parse(["demo"]))
    assert not dispatch.runs_as_flow(parse(["finetune", "task=kg_pair"]))
    flow = dispatch.as_flow_command(
        parse(["finetune", "--prefect", "-m", "task=kg_pair", "seed=0,1"])
    )
    assert (flow.command, flow.name, flow.multirun, flow.overrides) == (
        "flow",
        "finetune",
        True,
        ["task=kg_pair", "seed=0,1"],
    )
    monkeypatch.setattr(dispatch, "prefect_configured", lambda: True)
    assert dispatch.runs_as_flow(parse(["evaluate", "model"]))
    # pretrain/finetune stay in process (with their end tables) unless asked
    assert not dispatch.runs_as_flow(parse(["pretrain", "experiment=bert_tiny"]))
    assert dispatch.runs_as_flow(parse(["pretrain", "--prefect", "experiment=bert_tiny"]))
    assert not dispatch.runs_as_flow(parse(["export", "final", "hf"]))


def test_prepare_in_process_leaves_a_users_folder_alone(tmp_path: Path) -> None:
    """The function checks its output itself, not only the CLI (the flow calls it too)."""
    from flows.preparation import prepare_corpus_in_process

    corpus = tmp_path / "c.txt"
    corpus.write_text("One sentence here. Another one there.\n")
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("keep")
    with pytest.raises(ValueError, match="mine"):
        prepare_corpus_in_process([str(corpus)], str(mine), workers=0)
    assert sorted(p.name for p in mine.iterdir()) == ["notes.txt"]
