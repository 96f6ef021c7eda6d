"""Render Prefect artifacts as the Prefect UI's artifact drawer shows them, in headless
Chromium, and measure whether they fit.

The page is built from the UI's own stylesheet (shipped in the installed ``prefect``
package) and the DOM its components produce: a markdown artifact is a
``.artifact-data-markdown > .markdown-renderer`` with ``.markdown-renderer__table`` around
each table and ``.markdown-renderer__image`` on each image; an image artifact is
``.artifact-data-image``: the image, then "Image URL:" and the URL as link text. The
drawer on the flow-run graph (``.flow-run-graph-artifact-drawer``) is at most
:data:`PANEL_WIDTH` px wide with 1rem of padding. The drawer scrolls what is too wide;
here the page is the drawer, so what is too wide shows as
``document.scrollingElement.scrollWidth > clientWidth``. Tables scroll inside their own
box with the scrollbar hidden (their right columns are cut off): those are listed too.

Run ``python -m tools.artifact_panel OUT_DIR`` to write the screenshots of the docs page.
"""

from __future__ import annotations

import html
import json
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

#: The artifact drawer's width (``--p-drawer-max-size: 640px`` in Prefect 3's stylesheet).
PANEL_WIDTH = 640
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--hide-scrollbars",
)

# Runs after layout: writes the widths into the DOM, which --dump-dom then prints.
_MEASURE = """
<script>
window.addEventListener('load', () => {
  const page = document.scrollingElement;
  const clipped = [...document.querySelectorAll('.markdown-renderer__table, .p-table')]
    .filter(e => e.scrollWidth > e.clientWidth + 1).length;
  const out = document.createElement('pre');
  out.id = 'measured';
  out.hidden = true;
  out.textContent = JSON.stringify(
    {scrollWidth: page.scrollWidth, clientWidth: page.clientWidth, clippedTables: clipped});
  document.body.appendChild(out);
});
</script>
"""


@dataclass
class Measure:
    """Widths of a rendered artifact page.

    Attributes:
        scroll_width: ``document.scrollingElement.scrollWidth`` (px).
        client_width: ``document.scrollingElement.clientWidth`` (px).
        clipped_tables: tables wider than their box (their right columns hidden).
    """

    scroll_width: int
    client_width: int
    clipped_tables: int

    @property
    def fits(self) -> bool:
        """No horizontal overflow of the page and no table cut off."""
        return self.scroll_width <= self.client_width and not self.clipped_tables


def prefect_stylesheet() -> str:
    """The Prefect UI's main stylesheet (the one with the markdown renderer's rules)."""
    import prefect

    assets = Path(prefect.__file__).parent / "server" / "ui" / "assets"
    for path in sorted(assets.glob("index-*.css")):
        text = path.read_text(encoding="utf-8")
        if ".markdown-renderer{" in text:
            return text
    raise FileNotFoundError(f"{assets}: no stylesheet with the markdown renderer's rules")


def _markdown_dom(markdown: str) -> str:
    import markdown as md

    body = md.markdown(markdown, extensions=["tables"])
    body = re.sub(
        r"<table>(.*?)</table>",
        r'<div class="markdown-renderer__table p-table"><table class="p-table__table">\1'
        r"</table></div>",
        body,
        flags=re.S,
    )
    body = body.replace("<th", '<th class="p-table-header"').replace(
        "<td", '<td class="p-table-data"'
    )
    body = body.replace("<img ", '<img class="markdown-renderer__image" ')
    for level in range(1, 7):
        body = body.replace(
            f"<h{level}>", f'<h{level} class="markdown-renderer__heading--h{level}">'
        )
    return f'<div class="artifact-data-markdown"><div class="markdown-renderer">{body}</div></div>'


def _image_dom(url: str) -> str:
    quoted = html.escape(url, quote=True)
    return (
        f'<div class="artifact-data-image"><img src="{quoted}"><br>'
        f'<p><span>Image URL: </span><a class="p-link" href="{quoted}">{html.escape(url)}</a></p>'
        "</div>"
    )


def panel_html(kind: str, data: str, width: int = PANEL_WIDTH) -> str:
    """An HTML page showing one artifact (``kind`` ``"markdown"`` or ``"image"``) in
    the drawer, ``width`` px wide."""
    if kind == "markdown":
        content = _markdown_dom(data)
    elif kind == "image":
        content = _image_dom(data)
    else:
        raise ValueError(f"artifact kind {kind!r}: use 'markdown' or 'image'")
    return (
        "<!doctype html><html><head><meta charset='utf-8'>"
        f"<style>{prefect_stylesheet()}</style>"
        f"<style>html{{width:{width}px}}body{{margin:0}}"
        ".flow-run-graph-artifact-drawer{height:auto;margin:0;overflow:visible}</style>"
        f"{_MEASURE}</head><body><div class='flow-run-graph-artifact-drawer'>{content}</div>"
        "</body></html>"
    )


def chromium() -> str | None:
    """The Chromium binary, or ``None`` when it is not installed."""
    return CHROMIUM if Path(CHROMIUM).exists() else shutil.which("chromium")


def _run(page: Path, *extra: str, width: int, height: int = 900) -> str:
    binary = chromium()
    if binary is None:
        raise FileNotFoundError("chromium is not installed: apt-get install -y chromium")
    with tempfile.TemporaryDirectory(prefix="ptm-chromium-") as profile:
        done = subprocess.run(
            [
                binary,
                *CHROMIUM_FLAGS,
                f"--user-data-dir={profile}",
                f"--window-size={width},{height}",
                *extra,
                page.resolve().as_uri(),
            ],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
    if done.returncode != 0:
        raise RuntimeError(f"chromium exited with {done.returncode}: {done.stderr[-500:]}")
    return done.stdout


def measure(kind: str, data: str, work_dir: Path, width: int = PANEL_WIDTH) -> Measure:
    """Render one artifact in headless Chromium and read back its widths."""
    page = work_dir / "artifact.html"
    page.write_text(panel_html(kind, data, width), encoding="utf-8")
    dom = _run(page, "--dump-dom", width=width)
    found = re.search(r'<pre id="measured"[^>]*>(.*?)</pre>', dom, flags=re.S)
    if found is None:
        raise RuntimeError("chromium printed no measurement (the page script did not run)")
    values = json.loads(html.unescape(found.group(1)))
    return Measure(values["scrollWidth"], values["clientWidth"], values["clippedTables"])


def screenshot(
    kind: str, data: str, png: Path, width: int = PANEL_WIDTH, height: int = 900
) -> Path:
    """A PNG of the artifact in the drawer, ``width`` x ``height`` px."""
    with tempfile.TemporaryDirectory(prefix="ptm-panel-") as work:
        page = Path(work) / "artifact.html"
        page.write_text(panel_html(kind, data, width), encoding="utf-8")
        _run(page, f"--screenshot={png.resolve()}", width=width, height=height)
    return png


def _examples(work: Path) -> dict[str, tuple[str, str]]:
    """The artifacts the docs page shows: before and after for the pre-training ones,
    a 60-label fine-tuning label report and the demo's train-against-held-out section."""
    import random

    from flows.artifacts import (
        generalisation_report,
        markdown_table,
        metrics_by_step,
        plot_loss_curve,
        png_data_uri,
    )
    from flows.label_report import label_report_markdown, plot_label_report
    from ptm_core.finetune.label_scores import LabelledPredictions, label_scores

    records = [
        {"step": s, "loss": 9.0 / s**0.3, "mlm/loss": 8.0 / s**0.3, "nsp/loss": 0.7 / s**0.2,
         "dea/loss": 3.0 / s**0.4, "mlm/accuracy": 0.01 * s**0.5, "nsp/accuracy": 0.5,
         "dea/accuracy": 0.02 * s**0.5, "lr": 1e-4, "grad_norm": 1.5, "epoch": s // 100,
         "data_wait_share": 0.02}
        for s in range(10, 310, 10)
    ]  # fmt: skip
    png = plot_loss_curve(records, work / "loss_curve.png")
    old_columns = ["step", *sorted(k for k in records[-1] if k != "step")]
    rng = random.Random(0)
    names = [f"category_{i:02d}" for i in range(60)]
    gold = [i % 59 for i in range(600)]  # category_59: in training only
    pred = [g if rng.random() < 0.6 else rng.randrange(60) for g in gold]
    scores = label_scores(LabelledPredictions(pred, gold, names, "classification"))
    labels_png = plot_label_report(scores, work / "label_report.png")
    train = {"loss": 3.1, "mlm/accuracy": 0.31, "mlm/loss": 2.9, "nsp/accuracy": 0.98,
             "nsp/loss": 0.05, "dea/accuracy": 0.83, "dea/loss": 0.6, "dea/chance": 0.04,
             "mlm/predictions": 251.0, "dea/mentions": 135.0}  # fmt: skip
    held = {**train, "loss": 7.4, "nsp/accuracy": 0.61, "mlm/predictions": 60.0,
            "dea/mentions": 59.0}  # fmt: skip
    return {
        "loss-curve-before": ("image", png_data_uri(png)),
        "loss-curve-after": ("markdown", f"![loss curve]({png_data_uri(png)})"),
        "metrics-before": ("markdown", markdown_table(records[::3], old_columns)),
        "metrics-after": ("markdown", metrics_by_step(records)),
        "label-report": ("markdown", label_report_markdown(scores, labels_png)),
        "demo-report": (
            "markdown",
            generalisation_report(train, held, logged=train, baseline={"nsp/accuracy": 0.3}),
        ),
    }


def main(argv: list[str] | None = None) -> int:
    """``python -m tools.artifact_panel OUT_DIR``: the docs page's screenshots, and each
    one's measured widths."""
    import sys

    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m tools.artifact_panel OUT_DIR", file=sys.stderr)
        return 2
    out = Path(args[0])
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="ptm-panel-") as work:
        for name, (kind, data) in _examples(Path(work)).items():
            found = measure(kind, data, Path(work))
            height = 1100 if name == "label-report" else 560
            screenshot(kind, data, out / f"{name}.png", height=height)
            verdict = "fits" if found.fits else "does not fit"
            print(
                f"{name}: scrollWidth {found.scroll_width} px, clientWidth "
                f"{found.client_width} px, tables cut off {found.clipped_tables}: {verdict}"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
