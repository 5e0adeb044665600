"""Print the doctor's precision and recall per finding over the corpus: python -m tests.doctor_corpus."""
import warnings

from tests.doctor_corpus import BUGGY, CORRECT, scorecard

warnings.filterwarnings("ignore")
rows = scorecard()
print(f"corpus: {len(CORRECT)} correct loops, {len(BUGGY)} buggy loops")
print(f"| {'finding':30} | TP | FP | FN | precision | recall |")
print(f"|{'-' * 32}|----|----|----|-----------|--------|")
for name, tp, fp, fn, precision, recall in rows:
    print(f"| {name:30} | {tp:2} | {fp:2} | {fn:2} | {precision:9.2f} | {recall:6.2f} |")
