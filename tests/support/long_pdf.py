"""Long text PDFs made by the project (fpdf2), for slicing's tests and its benchmark.

Each page has a heading naming its number and two short paragraphs that end on that page, so
the Markdown of a whole conversion and of its slices joined in page order can be compared
block by block: no paragraph runs across a page boundary (one that did would be cut in two by
a slice's edge, and that is a difference of the input, not of slicing). Writing 1,000 pages
takes a few seconds.
"""

from __future__ import annotations

from pathlib import Path

from fpdf import FPDF

SENTENCES = (
    "The fleet converts this document one run of pages at a time.",
    "Every worker may take any slice, and the last one stored finishes the document.",
    "Revenue grew in every region, and the figures below are unaudited.",
)


def write_long_pdf(path: Path, pages: int) -> Path:
    """``pages`` pages of real text (a text layer, Helvetica), headed "Section N"."""
    pdf = FPDF(format="A4")
    pdf.set_title(f"A report of {pages} pages")
    for number in range(1, pages + 1):
        pdf.add_page()
        pdf.set_font("Helvetica", style="B", size=18)
        pdf.cell(text=f"Section {number}", new_x="LMARGIN", new_y="NEXT")
        pdf.ln(4)
        pdf.set_font("Helvetica", size=11)
        for n in range(2):
            sentence = SENTENCES[(number + n) % len(SENTENCES)]
            pdf.multi_cell(w=0, text=f"{sentence} (page {number}, part {n + 1})")
            pdf.ln(3)
    pdf.output(str(path))
    return path
