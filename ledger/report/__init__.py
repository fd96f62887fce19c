"""The HTML report (``ledger audit --html``, ``ledger report --html``): the pure rendering
of the figures that ``ledger.ops.report`` gathers.  The page is ``page.py``; its charts
(``charts.py``), its sections (``sections.py``, ``reexecution.py``) and the markup they
share (``markup.py``) are their own modules."""

from ledger.report.page import render_html, write_html

__all__ = ["render_html", "write_html"]
