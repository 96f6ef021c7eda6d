"""Fresh installs, as a new user does them (issue 21, item 2).

Three fresh Python 3.11 venvs, each made by ``uv venv``:

1. ``uv``: CPU-only torch, then ``uv pip install packages/core packages/knowledge`` (the
   documented form), then the entity-linking example of ``packages/knowledge/README.md``,
   run from a folder outside the checkout; its output must equal the README's.
2. ``pip``: the same with ``python -m pip install`` in a venv made with ``--seed``.
3. ``root``: the root package ``ptm`` from a wheel built by ``uv build`` (it ships
   ``configs/`` and ``data_specs/``), installed with the four packages; ``ptm config
   experiment=bert_tiny`` runs from another folder and its sample corpus path must exist.

CPU-only torch comes from PyTorch's CPU index (``https://download.pytorch.org/whl/cpu``:
``--torch-backend cpu`` for uv, ``--index-url`` for pip). Where that index cannot be
reached (an offline machine), a local CPU wheel is used instead (``--torch-wheel``, or the
one in ``$PIP_FIND_LINKS``) and the results say so. What PyPI's default (CUDA) torch would
add is read from the wheel sizes in ``uv.lock`` and from the workspace ``.venv``, never
downloaded.

Run: ``nice -n 19 python benchmarks/fresh_install.py`` (a few minutes with a warm uv cache).
Writes ``benchmarks/results/fresh_install.{md,json}``.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import tomllib
import urllib.request
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
CPU_INDEX = "https://download.pytorch.org/whl/cpu"
PACKAGES = ["packages/core", "packages/knowledge"]
ALL_PACKAGES = [
    *PACKAGES,
    "packages/classic",
    "packages/multilingual",
    "packages/multimodal",
    "packages/text",
]
# What CPU torch needs by itself; everything else torch pulls on Linux is the CUDA stack.
TORCH_PURE_DEPS = {
    "filelock",
    "fsspec",
    "jinja2",
    "markupsafe",
    "mpmath",
    "networkx",
    "setuptools",
    "sympy",
    "typing-extensions",
}


def find_uv() -> str:
    local = ROOT / ".tools" / "bin" / "uv"
    found = str(local) if local.exists() else shutil.which("uv")
    if not found:
        sys.exit("uv not found: run `make` once (it installs uv into .tools/bin) or put uv on PATH")
    return found


def reachable(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=5):
            return True
    except OSError:
        return False


def local_torch_wheel(given: str | None) -> Path | None:
    if given:
        return Path(given)
    for folder in os.environ.get("PIP_FIND_LINKS", "").split():
        wheels = sorted(Path(folder).glob("torch-*+cpu-cp311-*.whl"))
        if wheels:
            return wheels[-1]
    return None


def run(cmd: list[str], *, cwd: Path, env: dict[str, str], timeout: float) -> dict[str, Any]:
    start = time.perf_counter()
    try:
        done = subprocess.run(
            cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, check=False
        )
        code, out, err = done.returncode, done.stdout, done.stderr
    except subprocess.TimeoutExpired as exc:
        code, out, err = -1, str(exc.stdout or ""), f"timed out after {timeout:.0f} s"
    return {
        "cmd": " ".join(cmd),
        "rc": code,
        "seconds": round(time.perf_counter() - start, 1),
        "stdout": out,
        "stderr_tail": err[-1500:],
    }


def disk_mb(path: Path) -> float:
    total = sum(p.stat().st_size for p in path.rglob("*") if p.is_file() and not p.is_symlink())
    return round(total / 1e6, 1)


def linking_example() -> tuple[str, str]:
    """The README's linking snippet and the output it says it prints."""
    text = (ROOT / "packages" / "knowledge" / "README.md").read_text(encoding="utf-8")
    section = text.split("## Entity linking (example)", 1)[1]
    code = re.search(r"```python\n(.*?)```", section, re.S)
    printed = re.search(r"prints\s*\n\s*```text\n(.*?)```", section, re.S)
    if not code or not printed:
        sys.exit("packages/knowledge/README.md: the entity-linking example or its output moved")
    return code.group(1), printed.group(1).strip()


def clean_env(venv: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PTM_", "VIRTUAL_ENV"))}
    env["VIRTUAL_ENV"] = str(venv)
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    env.pop("PYTHONPATH", None)
    return env


def make_venv(uv: str, venv: Path, work: Path, *, seed: bool) -> dict[str, Any]:
    cmd = [uv, "venv", "-q", "--python", "3.11", str(venv), *(["--seed"] if seed else [])]
    return run(cmd, cwd=work, env=dict(os.environ), timeout=300)


def install_steps(
    tool: str, uv: str, venv: Path, targets: list[str], torch_wheel: Path | None
) -> list[list[str]]:
    python = str(venv / "bin" / "python")
    if tool == "uv":
        if torch_wheel is None:
            return [[uv, "pip", "install", "--torch-backend", "cpu", *targets]]
        return [[uv, "pip", "install", str(torch_wheel), *targets]]
    torch_from = ["--index-url", CPU_INDEX, "torch"] if torch_wheel is None else [str(torch_wheel)]
    return [
        [python, "-m", "pip", "install", "-q", *torch_from],
        [python, "-m", "pip", "install", "-q", *targets],
    ]


def one_route(
    name: str,
    tool: str,
    uv: str,
    work: Path,
    targets: list[str],
    torch_wheel: Path | None,
    timeout: float,
) -> dict[str, Any]:
    venv = work / f"venv-{name}"
    result: dict[str, Any] = {"route": name, "tool": tool, "venv": str(venv)}
    made = make_venv(uv, venv, work, seed=tool == "pip")
    if made["rc"] != 0:
        return {**result, "ok": False, "error": made["stderr_tail"]}
    env = clean_env(venv)
    steps = [
        run(cmd, cwd=ROOT, env=env, timeout=timeout)
        for cmd in install_steps(tool, uv, venv, targets, torch_wheel)
    ]
    result["install_commands"] = [s["cmd"] for s in steps]
    result["install_seconds"] = round(sum(s["seconds"] for s in steps), 1)
    failed = [s for s in steps if s["rc"] != 0]
    if failed:
        return {**result, "ok": False, "error": failed[0]["stderr_tail"]}
    result["disk_mb"] = disk_mb(venv)
    site = next((venv / "lib").glob("python3.*/site-packages"))
    result["torch_mb"] = disk_mb(site / "torch")
    result["nvidia_mb"] = disk_mb(site / "nvidia") if (site / "nvidia").exists() else 0.0
    return {**result, "ok": True, "env": env}


def check_linking(route: dict[str, Any], work: Path) -> None:
    code, expected = linking_example()
    script = work / "linking_example.py"
    script.write_text(code, encoding="utf-8")
    python = str(Path(route["venv"]) / "bin" / "python")
    done = run([python, str(script)], cwd=work, env=route["env"], timeout=600)
    route["example_seconds"] = done["seconds"]
    route["example_output"] = done["stdout"].strip()
    route["example_matches_readme"] = done["rc"] == 0 and done["stdout"].strip() == expected
    route["ok"] = route["ok"] and route["example_matches_readme"]
    if done["rc"] != 0:
        route["error"] = done["stderr_tail"]


def check_root(route: dict[str, Any], work: Path) -> None:
    elsewhere = work / "elsewhere"
    elsewhere.mkdir(exist_ok=True)
    ptm = str(Path(route["venv"]) / "bin" / "ptm")
    done = run(
        [ptm, "config", "experiment=bert_tiny"], cwd=elsewhere, env=route["env"], timeout=600
    )
    corpus = re.search(r"^\s+corpus: (\S+)$", done["stdout"], re.M)
    route["config_seconds"] = done["seconds"]
    route["config_rc"] = done["rc"]
    route["sample_corpus"] = corpus.group(1) if corpus else None
    route["sample_corpus_exists"] = bool(corpus and Path(corpus.group(1)).is_file())
    route["ok"] = route["ok"] and done["rc"] == 0 and route["sample_corpus_exists"]
    if done["rc"] != 0:
        route["error"] = done["stderr_tail"]
    # ptm-multimodal imports torchvision (through timm): it must be the build of this torch.
    python = str(Path(route["venv"]) / "bin" / "python")
    vision = run(
        [
            python,
            "-c",
            "import importlib.metadata as m; print(m.version('torchvision'), flush=True); import torchvision",
        ],
        cwd=elsewhere,
        env=route["env"],
        timeout=600,
    )
    route["torchvision"] = vision["stdout"].strip() or None
    route["torchvision_imports"] = vision["rc"] == 0
    if vision["rc"] != 0:
        route["torchvision_error"] = vision["stderr_tail"].strip().splitlines()[-1]


def pypi_torch_download() -> dict[str, Any]:
    """Bytes that PyPI's default torch pulls on Linux x86_64 / CPython 3.11 (from uv.lock)."""
    lock = tomllib.loads((ROOT / "uv.lock").read_text(encoding="utf-8"))
    packages = {p["name"]: p for p in lock["package"]}

    def wheel_size(package: dict[str, Any]) -> int:
        for wheel in package.get("wheels", []):
            url = wheel["url"]
            if "x86_64" in url and ("cp311" in url or "py3-none" in url or "abi3" in url):
                return int(wheel.get("size", 0))
        for wheel in package.get("wheels", []):
            if wheel["url"].endswith("none-any.whl"):
                return int(wheel.get("size", 0))
        return 0

    seen: set[str] = set()
    todo = ["torch"]
    while todo:
        name = todo.pop()
        if name in seen or name not in packages:
            continue
        seen.add(name)
        for dep in packages[name].get("dependencies", []):
            marker = dep.get("marker", "")
            if "darwin" in marker or "win32" in marker or "aarch64" in marker:
                continue
            todo.append(dep["name"])
            extras = packages.get(dep["name"], {}).get("optional-dependencies", {})
            for extra in dep.get("extra", []):
                todo += [
                    d["name"] for d in extras.get(extra, []) if "win32" not in d.get("marker", "")
                ]
    cuda = sorted(seen - TORCH_PURE_DEPS - {"torch"})
    sizes = {n: wheel_size(packages[n]) for n in ["torch", *cuda]}
    return {
        "torch_version": packages["torch"]["version"],
        "torch_wheel_mb": round(sizes["torch"] / 1e6, 1),
        "cuda_packages": cuda,
        "cuda_wheels_mb": round(sum(sizes[n] for n in cuda) / 1e6, 1),
        "download_mb": round(sum(sizes.values()) / 1e6, 1),
    }


def workspace_cuda_disk() -> dict[str, Any] | None:
    site = next((ROOT / ".venv" / "lib").glob("python3.*/site-packages"), None)
    if site is None or not (site / "torch").exists():
        return None
    extra = [p for p in site.iterdir() if p.name in ("nvidia", "triton", "cuda")]
    return {
        "torch_mb": disk_mb(site / "torch"),
        "cuda_libs_mb": round(sum(disk_mb(p) for p in extra), 1),
    }


def write(results: dict[str, Any], out_dir: Path) -> None:
    out_dir.mkdir(parents=True, exist_ok=True)
    for route in results["routes"]:
        route.pop("env", None)
    (out_dir / "fresh_install.json").write_text(json.dumps(results, indent=2) + "\n")
    lines = [
        "# Fresh installs",
        "",
        f"Command: `{results['command']}` ({results['date']}, {results['machine']}).",
        f"CPU-only torch from: {results['torch_source']}.",
        "",
        "| route | install command(s) | install s | venv MB | torch MB | CUDA libs MB | check | ok |",
        "| --- | --- | ---: | ---: | ---: | ---: | --- | --- |",
    ]
    for r in results["routes"]:
        if r["route"] == "root":
            check = (
                f"`ptm config experiment=bert_tiny` from another folder, rc {r.get('config_rc')}"
            )
            check += f", sample corpus found: {r.get('sample_corpus_exists')}"
            check += (
                f"; `import torchvision` {r.get('torchvision')}: {r.get('torchvision_imports')}"
            )
        else:
            check = f"linking example = README output: {r.get('example_matches_readme')}"
        cmds = "<br>".join(f"`{c}`" for c in r.get("install_commands", []))
        lines.append(
            f"| {r['route']} | {cmds} | {r.get('install_seconds', '-')} | {r.get('disk_mb', '-')}"
            f" | {r.get('torch_mb', '-')} | {r.get('nvidia_mb', '-')} | {check} | {r['ok']} |"
        )
    pypi = results["pypi_default_torch"]
    lines += [
        "",
        f"PyPI's default torch {pypi['torch_version']} (Linux x86_64, CPython 3.11), from the "
        f"wheel sizes in uv.lock: torch {pypi['torch_wheel_mb']} MB + "
        f"{len(pypi['cuda_packages'])} CUDA packages {pypi['cuda_wheels_mb']} MB = "
        f"**{pypi['download_mb']} MB to download**.",
    ]
    if results.get("cpu_torch_wheel_mb"):
        lines.append(
            f"The CPU-only torch wheel used here is {results['cpu_torch_wheel_mb']} MB to download "
            "(torch versions differ: the local CPU wheel is older than the locked CUDA build)."
        )
    if results.get("workspace_cuda_disk"):
        disk = results["workspace_cuda_disk"]
        lines.append(
            f"On disk in the workspace `.venv` (CUDA build): torch {disk['torch_mb']} MB + CUDA "
            f"libraries {disk['cuda_libs_mb']} MB."
        )
    for r in results["routes"]:
        if r.get("torchvision_error"):
            lines += [
                "",
                f"{r['route']}: torchvision {r.get('torchvision')} came from PyPI (a CUDA build) "
                f"beside the CPU torch and does not import: `{r['torchvision_error']}`. Install "
                "torch and torchvision together from the CPU index (the README's first pip line).",
            ]
        if not r["ok"] and r.get("error"):
            lines += ["", f"{r['route']} failed: `{' '.join(r['error'].split())[-600:]}`"]
    (out_dir / "fresh_install.md").write_text("\n".join(lines) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--routes", default="uv,pip,root", help="comma list of uv, pip, root")
    parser.add_argument("--torch-wheel", help="a local CPU torch wheel (offline machines)")
    parser.add_argument("--work", help="folder for the venvs (default: a temporary one)")
    parser.add_argument("--timeout", type=float, default=1200, help="seconds per install step")
    parser.add_argument("--out-dir", default=str(ROOT / "benchmarks" / "results"))
    parser.add_argument(
        "--update", action="store_true", help="keep the other routes of the existing results"
    )
    args = parser.parse_args()

    uv = find_uv()
    online = reachable(f"{CPU_INDEX}/torch/")
    torch_wheel = None if online else local_torch_wheel(args.torch_wheel)
    if not online and torch_wheel is None:
        sys.exit(f"{CPU_INDEX} is unreachable and no local CPU torch wheel was given")
    work = Path(args.work or tempfile.mkdtemp(prefix="ptm-fresh-"))
    work.mkdir(parents=True, exist_ok=True)
    routes = []
    for name in args.routes.split(","):
        if name == "root":
            dist = work / "dist"
            built = run(
                [uv, "build", "--wheel", "-o", str(dist), "."],
                cwd=ROOT,
                env=dict(os.environ),
                timeout=600,
            )
            if built["rc"] != 0:
                routes.append({"route": "root", "ok": False, "error": built["stderr_tail"]})
                continue
            wheel = str(next(dist.glob("ptm-*.whl")))
            route = one_route(
                "root", "uv", uv, work, [wheel, *ALL_PACKAGES], torch_wheel, args.timeout
            )
            if route["ok"]:
                check_root(route, work)
        else:
            route = one_route(name, name, uv, work, PACKAGES, torch_wheel, args.timeout)
            if route["ok"]:
                check_linking(route, work)
        print(json.dumps({k: v for k, v in route.items() if k not in ("env", "example_output")}))
        routes.append(route)
    command = "nice -n 19 python benchmarks/fresh_install.py " + " ".join(sys.argv[1:])
    previous = Path(args.out_dir) / "fresh_install.json"
    if args.update and previous.exists():
        old = json.loads(previous.read_text())
        names = {r["route"] for r in routes}
        routes = [r for r in old["routes"] if r["route"] not in names] + routes
        command = f"{old['command']}`, then `{command}"
    results = {
        "command": command,
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "machine": f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f} at the end",
        "torch_source": CPU_INDEX
        if online
        else f"local wheel {torch_wheel} ({CPU_INDEX} unreachable here)",
        "routes": routes,
        "pypi_default_torch": pypi_torch_download(),
        "workspace_cuda_disk": workspace_cuda_disk(),
        "cpu_torch_wheel_mb": round(torch_wheel.stat().st_size / 1e6, 1) if torch_wheel else None,
    }
    write(results, Path(args.out_dir))
    if not args.work:
        shutil.rmtree(work, ignore_errors=True)
    print(Path(args.out_dir) / "fresh_install.md")
    sys.exit(0 if all(r["ok"] for r in routes) else 1)


if __name__ == "__main__":
    main()
