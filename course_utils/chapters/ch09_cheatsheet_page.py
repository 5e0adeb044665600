"""The cheat sheet as a printable page (chapter 9): one standalone HTML file, printed to PDF by headless Chromium.

``document()`` lays the sections of ``ch09_cheatsheet`` out for two A4 pages (inline CSS, nothing fetched);
``python -m course_utils.chapters.ch09_cheatsheet_page OUT.html [--pdf OUT.pdf]`` (``make cheatsheet``) writes it.
"""
from __future__ import annotations

import html
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import torch

from course_utils.chapters.ch09_cheatsheet import Section, sections
from course_utils.infra.storage import atomic_write_bytes, atomic_write_text

CSS = """
@page { size: A4; margin: 5mm 6mm 4mm 6mm; }
body { font-family: "DejaVu Sans", Arial, sans-serif; font-size: 8pt; line-height: 1.1; margin: 0; color: #111; }
h1 { font-size: 11.5pt; margin: 0; display: inline; }
.sub { color: #444; display: inline; margin-left: 6px; }
.flow { column-count: 2; column-gap: 4mm; column-fill: balance; }
.keep .cs-section { break-inside: avoid; }
.cs-section { margin-bottom: 3px; }
tr, pre, h3 { break-inside: avoid; }
h3 { font-size: 9pt; margin: 2px 0 1px 0; border-bottom: 1px solid #888; break-after: avoid; }
thead { display: table-header-group; }
table { border-collapse: collapse; width: 100%; }
th, td { text-align: left; vertical-align: top; padding: 0 3px !important; border-bottom: 1px solid #e2e2e2; }
th { background: #eee; }
code, pre { font-family: "DejaVu Sans Mono", monospace; font-size: 7.5pt; }
pre { background: #f5f5f5; padding: 2px 3px; margin: 1px 0; white-space: pre; line-height: 1.0; overflow: visible !important; }
ol { margin: 0; padding-left: 16px; } p { margin: 1px 0; }
"""

# how the printed page arranges the sections: "wide" ones span the page, "flow" ones run in two columns
LAYOUT = (("wide", ("Formulas",)),
          ("flow keep", ("Terms", "First checks", "Scheduler cadences", "One training step",
                         "The training-loop template")),
          ("wide", ("The bugs", "DataLoader")),
          ("flow", ("The evaluation loop", "Production", "Save and resume")))


def document(parts: list[Section] | None = None) -> str:
    """A standalone HTML page (inline CSS, nothing fetched) of the cheat sheet, laid out for two A4 pages."""
    parts = parts or sections()
    blocks, used = [], set()
    for kind, prefixes in LAYOUT:
        chosen = [p for prefix in prefixes for p in parts if p.title.startswith(prefix) and p.title not in used]
        used.update(p.title for p in chosen)
        inner = "".join(p._repr_html_() for p in chosen)
        blocks.append(f"<div class='{kind}'>{inner}</div>" if kind != "wide" else inner)
    blocks += [p._repr_html_() for p in parts if p.title not in used]
    return (f"<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'><title>Training loop cheat sheet</title>"
            f"<style>{CSS}</style></head><body><h1>Training loop mechanics: cheat sheet</h1>"
            f"<div class='sub'>PyTorch {html.escape(torch.__version__.split('+')[0])} · numbers computed, code "
            f"executed by course_utils</div>{''.join(blocks)}</body></html>")


def find_chromium() -> str | None:
    """Chromium's path: $CHROMIUM, /usr/bin/chromium, or chromium on PATH."""
    for candidate in (os.environ.get("CHROMIUM"), "/usr/bin/chromium", shutil.which("chromium")):
        if candidate and Path(candidate).exists():
            return candidate
    return None


def print_pdf(html_path: Path, pdf_path: Path, chromium: str | None = None) -> None:
    """Print a page to PDF with headless Chromium (A4 from the page's CSS, no header or footer)."""
    chromium = chromium or find_chromium()
    if chromium is None:
        raise RuntimeError("Chromium not found: install Debian's chromium or set CHROMIUM=/path/to/chromium")
    with tempfile.TemporaryDirectory() as profile:
        tmp = pdf_path.with_name(pdf_path.name + ".part")
        subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu", f"--user-data-dir={profile}",
                        "--no-pdf-header-footer", f"--print-to-pdf={tmp}", html_path.resolve().as_uri()],
                       check=True, capture_output=True, timeout=120)
        atomic_write_bytes(pdf_path, tmp.read_bytes())
        tmp.unlink()


def pdf_pages(pdf: bytes) -> int:
    """The number of pages of a PDF (its /Type /Page objects)."""
    return len(re.findall(rb"/Type\s*/Page(?![s\w])", pdf))


def main(argv: list[str]) -> int:
    """python -m course_utils.chapters.ch09_cheatsheet_page OUT.html [--pdf OUT.pdf]"""
    if not argv or argv[0].startswith("-"):
        print("usage: python -m course_utils.chapters.ch09_cheatsheet_page OUT.html [--pdf OUT.pdf]", file=sys.stderr)
        return 2
    html_path = Path(argv[0])
    atomic_write_text(html_path, document())
    print(f"wrote {html_path}")
    if "--pdf" in argv:
        index = argv.index("--pdf")
        if index + 1 >= len(argv):
            print("--pdf needs a file name", file=sys.stderr)
            return 2
        pdf_path = Path(argv[index + 1])
        try:
            print_pdf(html_path, pdf_path)
        except (RuntimeError, subprocess.SubprocessError, OSError) as exc:
            print(f"could not print the PDF: {exc}", file=sys.stderr)
            return 2
        print(f"wrote {pdf_path} ({pdf_pages(pdf_path.read_bytes())} pages)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
