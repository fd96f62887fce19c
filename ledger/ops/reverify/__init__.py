"""The re-verification job (``ledger reverify``, docs/reverify.md): the face of the family.

``options.py`` (the run's options) <- ``select.py`` (select, check and plan a page's
entries) <- ``compare.py`` (run the plans in the sandbox, judge and retry), ``resume.py``
(the run's row, resuming, the recorded ``reverify_run`` entry) <- ``job.py``
(``run_reverify``: the run, page by page, and its report).
"""

from ledger.ops.reverify.job import run_reverify
from ledger.ops.reverify.options import ReverifyOptions
from ledger.ops.reverify.resume import record_run

__all__ = ["ReverifyOptions", "record_run", "run_reverify"]
