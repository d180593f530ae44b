"""Write the sample documents in examples/: one per format docling-mcp converts offline, and a
PDF with a text layer (docling-rs-mcp reads it without models; docling-mcp cannot offline).

Each has a heading and a small table whose cells the tests and the demo look for in the
markdown, so a conversion that silently drops content is caught (tests/fixtures/examples.py
lists those strings). Byte-for-byte reproducible: the Office packages are rewritten with fixed
zip timestamps and fixed core-property dates, so running it again changes nothing in git.

    .venv/bin/python scripts/make_examples.py
"""

from __future__ import annotations

import datetime as dt
import re
import zipfile
from pathlib import Path

from docx import Document
from fpdf import FPDF
from openpyxl import Workbook
from pptx import Presentation
from pptx.util import Inches

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
FIXED = dt.datetime(2026, 1, 1, 12, 0, 0)
ZIP_TIME = (2026, 1, 1, 12, 0, 0)
ROWS = [("Region", "Revenue"), ("North", "1200"), ("South", "3400")]


def write_docx(path: Path) -> None:
    doc = Document()
    doc.add_heading("Quarterly Report", level=1)
    doc.add_paragraph("Revenue grew in every region this quarter.")
    table = doc.add_table(rows=len(ROWS), cols=2)
    for r, row in enumerate(ROWS):
        for c, cell in enumerate(row):
            table.cell(r, c).text = cell
    doc.core_properties.created = FIXED
    doc.core_properties.modified = FIXED
    doc.save(str(path))


def write_xlsx(path: Path) -> None:
    book = Workbook()
    sheet = book.active
    assert sheet is not None
    sheet.title = "Inventory"
    for row in [("Item", "Count"), ("Widgets", 42), ("Gadgets", 7)]:
        sheet.append(row)
    book.properties.created = FIXED
    book.properties.modified = FIXED
    book.save(str(path))


def write_pptx(path: Path) -> None:
    deck = Presentation()
    slide = deck.slides.add_slide(deck.slide_layouts[5])
    slide.shapes.title.text = "Launch Plan"
    shape = slide.shapes.add_table(3, 2, Inches(1), Inches(2), Inches(6), Inches(1.5))
    for r, row in enumerate([("Milestone", "Owner"), ("Beta", "Ana"), ("GA", "Ravi")]):
        for c, cell in enumerate(row):
            shape.table.cell(r, c).text = cell
    deck.core_properties.created = FIXED
    deck.core_properties.modified = FIXED
    deck.save(str(path))


def make_reproducible(path: Path) -> None:
    """Rewrite an Office package with fixed entry times and a fixed modified date.

    The libraries stamp every zip entry with the current time, and openpyxl overwrites the
    modified date on save; both would make each run produce different bytes.
    """
    with zipfile.ZipFile(path) as package:
        entries = [(info, package.read(info)) for info in package.infolist()]
    stamp = FIXED.strftime("%Y-%m-%dT%H:%M:%SZ").encode()
    with zipfile.ZipFile(path, "w") as package:
        for info, data in entries:
            if info.filename == "docProps/core.xml":
                fixed = re.sub(rb"(<dcterms:modified[^>]*>)[^<]*", rb"\g<1>" + stamp, data)
            else:
                fixed = data
            entry = zipfile.ZipInfo(info.filename, date_time=ZIP_TIME)
            entry.compress_type = zipfile.ZIP_DEFLATED
            package.writestr(entry, fixed)


#: The PDF's pages: a heading and a sentence each (the first with the table), so a page range
#: shows in the markdown (``--pages 1-2`` keeps the first two headings, not the third).
PDF_PAGES = [
    ("Annual Report", "Revenue grew in every region this year."),
    ("Regional Outlook", "Both regions expect steady growth next year."),
    ("Appendix", "Figures are unaudited."),
]


def write_pdf(path: Path) -> None:
    """Three pages of real text (a text layer, fonts embedded by fpdf2), byte-reproducible."""
    pdf = FPDF(format="A4")
    pdf.set_creation_date(FIXED.replace(tzinfo=dt.UTC))
    pdf.set_title("Annual Report")
    for number, (heading, sentence) in enumerate(PDF_PAGES, start=1):
        pdf.add_page()
        pdf.set_font("Helvetica", style="B", size=20)
        pdf.cell(text=heading, new_x="LMARGIN", new_y="NEXT")
        pdf.ln(6)
        pdf.set_font("Helvetica", size=12)
        pdf.multi_cell(w=0, text=sentence, new_x="LMARGIN", new_y="NEXT")
        pdf.ln(6)
        if number == 1:
            with pdf.table(col_widths=(60, 40), first_row_as_headings=True) as table:
                for row in ROWS:
                    table.row(row)
    pdf.output(str(path))


TEXT_FILES = {
    "release-notes.md": (
        "# Release Notes\n\nVersion 2 brings faster exports.\n\n"
        "| Feature | Status |\n|---|---|\n| Export | Done |\n| Import | Planned |\n"
    ),
    "handbook.html": (
        "<!DOCTYPE html><html><head><title>Handbook</title></head><body>"
        "<h1>Team Handbook</h1><p>How we <b>work</b> together.</p>"
        "<table><tr><th>Day</th><th>Meeting</th></tr>"
        "<tr><td>Monday</td><td>Planning</td></tr><tr><td>Friday</td><td>Demo</td></tr></table>"
        "</body></html>\n"
    ),
    "cities.csv": "City,Population\nLisbon,545000\nPorto,232000\n",
}


def main() -> None:
    EXAMPLES.mkdir(exist_ok=True)
    for name, write in [
        ("quarterly-report.docx", write_docx),
        ("inventory.xlsx", write_xlsx),
        ("launch-plan.pptx", write_pptx),
    ]:
        write(EXAMPLES / name)
        make_reproducible(EXAMPLES / name)
    write_pdf(EXAMPLES / "annual-report.pdf")
    for name, text in TEXT_FILES.items():
        (EXAMPLES / name).write_text(text, encoding="utf-8")
    print(f"wrote {len(TEXT_FILES) + 4} examples to {EXAMPLES}")


if __name__ == "__main__":
    main()
