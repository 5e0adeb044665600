"""Hold every row of the symptom index to what its cell prints (issue 42: fix the classes, not only the cases).

Each answer of ``course_utils/chapters/learner_questions.json`` (the rows of chapter 9's "what you see -> why ->
where") lists its ``evidence``: exact lines, or distinctive parts of lines, of the committed notebook's printed
output. The rule, checked here for every answer, asked or not:

1. the tagged cell (``answers-<anchor>``) exists once in ``notebooks/NN_*.ipynb`` and nbval compares it: no
   ``nbval-ignore-output``, ``nbval-skip`` or ``raises-exception`` tag, nor their ``# NBVAL_...`` comments (read with
   nbval's own marker tables);
2. every evidence line is printed (stdout, stderr or text/plain: what nbval compares) by a code cell of the
   answer's *section*: the cells from the markdown heading (a ``##`` line) above the tagged cell to the next one,
   the section the index names. That cell is compared by nbval too, is not a prediction card (a card prints the
   question and its options, not a measurement), and the line survives the sanitizers of
   ``tests/nbval_sanitize.cfg`` unchanged, so what it says is what nbval holds fixed;
3. at least one evidence line is printed by the tagged cell itself (the cell the index points at shows it);
4. every number in the row's ``why`` is among the numbers of its evidence lines (``4`` matches ``4.0`` and
   ``x4``; ``65,504`` is 65504): a why cannot name a figure the run does not print;
5. a row no printed line supports has ``"evidence": []`` and an ``evidence_missing`` reason: a known gap,
   reported by the tests (``gaps()``), never invented evidence. A row with neither is a problem.

What it cannot see: a why whose words outrun its evidence without a number. Choosing evidence is a reading, done
once per row; this keeps the reading true when a notebook, a why or an evidence line changes.

``python tools/symptom_evidence.py`` prints the problems (exit 1) and the stated gaps.
"""
from __future__ import annotations

import json
import re
import sys
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from nbval.plugin import comment_markers, find_comment_markers, find_metadata_tags, get_sanitize_patterns

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from course_utils.chapters import ch09_symptoms  # noqa: E402

SANITIZE = ROOT / "tests" / "nbval_sanitize.cfg"
CARD = "Predict before you run the next cell"     # what a prediction card prints first (widgets/predict_view.py)
MIN_LENGTH = 10                                     # an evidence line shorter than this is not distinctive
NUMBER = re.compile(r"(?<![\d.])(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?")
assert "NBVAL_IGNORE_OUTPUT" in comment_markers     # the markers this module reads are nbval's own


@dataclass(frozen=True)
class Cell:
    """A committed code cell: its index in the notebook, tags, source and printed output (what nbval compares)."""

    index: int
    tags: tuple[str, ...]
    source: str
    printed: str


def printed(outputs: list[dict]) -> str:
    """The texts nbval compares, one output after another: each stream (stdout, stderr) merged as nbval merges it,
    and each text/plain. Outputs are joined by a newline, so no evidence line can straddle two of them."""
    def text(value) -> str:
        return "".join(value) if isinstance(value, list) else value or ""
    parts: list[str] = []
    streams: dict[str, int] = {}
    for o in outputs:
        if o.get("output_type") == "stream":
            if o.get("name") in streams:
                parts[streams[o.get("name")]] += text(o.get("text"))
                continue
            streams[o.get("name")] = len(parts)
            parts.append(text(o.get("text")))
        elif "text/plain" in o.get("data", {}):
            parts.append(text(o["data"]["text/plain"]))
    return "\n".join(parts)


def not_compared(cell: Cell) -> str | None:
    """Why nbval does not compare this cell's output (a tag or a comment marker), or None when it does."""
    markers = dict(find_metadata_tags({"tags": list(cell.tags)}))
    markers.update(find_comment_markers(cell.source))
    if markers.get("skip"):
        return "nbval skips it"
    if markers.get("check_exception"):
        return "nbval expects it to raise"
    if markers.get("check") is False:
        return "nbval ignores its output"
    return None


@lru_cache(maxsize=1)
def sanitizers() -> tuple[tuple[str, str], ...]:
    """(regex, replacement) pairs of tests/nbval_sanitize.cfg, parsed as nbval parses them."""
    return tuple(get_sanitize_patterns(SANITIZE.read_text(encoding="utf-8")))


def sanitize(text: str) -> str:
    for regex, replace in sanitizers():
        text = re.sub(regex, replace, text)
    return text


def numbers(text: str) -> set[float]:
    """The numbers written in a text, as values: '4', '4.0' and 'x4' give 4.0; '65,504' gives 65504.0."""
    return {float(n.replace(",", "")) for n in NUMBER.findall(text)}


def sections(cells: list[dict]) -> dict[str, list[tuple[Cell, tuple[Cell, ...]]]]:
    """anchor -> [(the tagged cell, the code cells of its section)] for one notebook's cells (nbformat JSON)."""
    found: dict[str, list] = {}
    section: list[Cell] = []
    tagged: list[tuple[str, Cell, list[Cell]]] = []
    for i, raw in enumerate(cells):
        source = "".join(raw.get("source", ""))
        if raw["cell_type"] == "markdown":
            if any(line.startswith("##") for line in source.splitlines()):
                section = []
            continue
        if raw["cell_type"] != "code":
            continue
        cell = Cell(i, tuple(raw.get("metadata", {}).get("tags", [])), source, printed(raw.get("outputs", [])))
        section.append(cell)       # the list grows until the next heading: the whole section
        for tag in cell.tags:
            if tag.startswith(ch09_symptoms.TAG_PREFIX):
                tagged.append((tag[len(ch09_symptoms.TAG_PREFIX):], cell, section))
    for anchor, cell, members in tagged:
        found.setdefault(anchor, []).append((cell, tuple(members)))
    return found


@lru_cache(maxsize=1)
def committed() -> dict[str, list[tuple[str, Cell, tuple[Cell, ...]]]]:
    """anchor -> [(notebook name, tagged cell, its section's code cells)] over the committed notebooks."""
    found: dict[str, list] = {}
    for path in sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb")):
        for anchor, places in sections(json.loads(path.read_text(encoding="utf-8"))["cells"]).items():
            found.setdefault(anchor, []).extend((path.name, cell, members) for cell, members in places)
    return found


def answer_problems(answer: ch09_symptoms.Answer, tagged: Cell, section: tuple[Cell, ...]) -> list[str]:
    """Every way one answer's evidence breaks the rule (the module docstring), one line each."""
    name, out = f"answer {answer.anchor}", []
    why_not = not_compared(tagged)
    if why_not:
        out.append(f"{name}: its tagged cell {tagged.index} is not compared: {why_not}")
    if answer.evidence and answer.evidence_missing:
        out.append(f"{name}: give evidence lines or an evidence_missing reason, not both")
    if not answer.evidence:
        if not (answer.evidence_missing or "").strip():
            out.append(f"{name}: no evidence and no evidence_missing reason (a gap must be stated)")
        return out
    from_tagged = False
    for line in answer.evidence:
        if "\n" in line or len(line.strip()) < MIN_LENGTH:
            out.append(f"{name}: evidence {line!r} is not one distinctive line (one line, {MIN_LENGTH}+ characters)")
            continue
        printing = [c for c in section if line in c.printed]
        if not printing:
            out.append(f"{name}: evidence {line!r} is not printed by any cell of its section")
            continue
        good = [c for c in printing if not not_compared(c) and CARD not in c.printed and line in sanitize(c.printed)]
        if not good:
            c = printing[0]
            reason = (f"nbval does not compare cell {c.index} ({not_compared(c)})" if not_compared(c) else
                      f"cell {c.index} is a prediction card" if CARD in c.printed else
                      f"the sanitizers of {SANITIZE.name} change it in cell {c.index}")
            out.append(f"{name}: evidence {line!r}: {reason}")
            continue
        from_tagged = from_tagged or any(c.index == tagged.index for c in good)
    if not from_tagged:
        out.append(f"{name}: no evidence line is printed by the tagged cell {tagged.index} itself")
    missing = numbers(answer.why) - numbers(" ".join(answer.evidence))
    if missing:
        shown = ", ".join(f"{n:g}" for n in sorted(missing))
        out.append(f"{name}: the why names {shown}, which no evidence line prints")
    return out


def problems(answers: dict[str, ch09_symptoms.Answer] | None = None,
             found: dict[str, list] | None = None) -> list[str]:
    """Every answer checked against the committed notebooks: [] when every row holds to its printed output."""
    answers = ch09_symptoms.corpus()[0] if answers is None else answers
    found = committed() if found is None else found
    out = []
    for anchor, answer in answers.items():
        places = found.get(anchor, [])
        if len(places) != 1:
            out.append(f"answer {anchor}: {len(places)} committed cells carry the tag "
                       f"{ch09_symptoms.TAG_PREFIX}{anchor} (need 1)")
            continue
        _, cell, section = places[0]
        out += answer_problems(answer, cell, section)
    return out


def gaps(answers: dict[str, ch09_symptoms.Answer] | None = None) -> list[tuple[str, str]]:
    """(anchor, reason) for every answer whose why no printed line supports: the known gaps."""
    answers = ch09_symptoms.corpus()[0] if answers is None else answers
    return [(a.anchor, a.evidence_missing) for a in answers.values() if not a.evidence and a.evidence_missing]


if __name__ == "__main__":
    found_problems = problems()
    for anchor, reason in gaps():
        print(f"known gap, answer {anchor}: {reason}")
    print("\n".join(found_problems) or "every answer's evidence is printed, compared and carries its why's numbers")
    sys.exit(1 if found_problems else 0)
