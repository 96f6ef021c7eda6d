"""An installed ``ptm`` finds its configs and samples outside a checkout (issue 21, item 2).

The full fresh-venv install (``uv pip install packages/core packages/knowledge`` and the
README's linking example) takes minutes of wall time on this shared machine and needs a
warm package cache, so it lives in ``benchmarks/fresh_install.py``, not here.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest

import flows.config
from flows.config import BUNDLE_ROOT, REPO_ROOT, config_dir, project_root


def test_without_a_checkout_the_bundle_is_used(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("PTM_CONFIG_DIR", raising=False)
    monkeypatch.delenv("PTM_ROOT", raising=False)
    assert config_dir() == (REPO_ROOT / "configs").resolve()
    monkeypatch.setattr(flows.config, "REPO_ROOT", tmp_path)  # site-packages: no configs/
    assert config_dir() == (BUNDLE_ROOT / "configs").resolve()
    assert project_root() == BUNDLE_ROOT.resolve()
    monkeypatch.setenv("PTM_CONFIG_DIR", str(tmp_path / "mine"))
    monkeypatch.setenv("PTM_ROOT", str(tmp_path))
    assert config_dir() == (tmp_path / "mine").resolve()
    assert project_root() == tmp_path.resolve()


def test_the_wheel_maps_configs_and_samples_where_config_dir_looks() -> None:
    pyproject = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    mapping = pyproject["tool"]["hatch"]["build"]["targets"]["wheel"]["force-include"]
    bundle = BUNDLE_ROOT.relative_to(REPO_ROOT).as_posix()
    assert mapping == {"configs": f"{bundle}/configs", "data_specs": f"{bundle}/data_specs"}


def _uv() -> str:
    local = REPO_ROOT / ".tools" / "bin" / "uv"
    found = str(local) if local.exists() else shutil.which("uv")
    assert found, "uv is needed to build the wheel (make installs it into .tools/bin)"
    return found


@pytest.mark.slow
@pytest.mark.integration
def test_an_unpacked_wheel_composes_and_finds_the_sample_corpus(tmp_path: Path) -> None:
    subprocess.run(
        [_uv(), "build", "--wheel", "--offline", "-q", "-o", str(tmp_path / "dist"), "."],
        cwd=REPO_ROOT,
        check=True,
    )
    wheel = next((tmp_path / "dist").glob("ptm-*.whl"))
    site = tmp_path / "site"
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        archive.extractall(site)
    for yaml in (REPO_ROOT / "configs").rglob("*.yaml"):
        assert f"flows/_bundle/{yaml.relative_to(REPO_ROOT).as_posix()}" in names, yaml
    referenced = set()
    for yaml in (REPO_ROOT / "configs").rglob("*.yaml"):
        referenced |= set(re.findall(r"\$\{ptm_root:\}/(\S+)", yaml.read_text(encoding="utf-8")))
    for relative in sorted(referenced):
        if (REPO_ROOT / relative).exists():  # a sample a config names ships with the wheel
            assert (site / "flows" / "_bundle" / relative).exists(), relative
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    code = (
        "from pathlib import Path; import flows.config as c; "
        "cfg = c.compose_config(['experiment=bert_tiny']); "
        "print(c.config_dir()); print(cfg.data.corpus); "
        "assert Path(cfg.data.corpus).is_file()"
    )
    env = {"PYTHONPATH": str(site), "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=elsewhere, env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    config_line, corpus_line = done.stdout.split()
    assert config_line == str((site / "flows" / "_bundle" / "configs").resolve())
    assert corpus_line.startswith(str((site / "flows" / "_bundle" / "data_specs").resolve()))
