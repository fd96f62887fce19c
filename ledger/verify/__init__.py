"""Offline verifiers: no database, no SQLAlchemy (tests/test_layers.py keeps it so).

* :mod:`ledger.verify.proof`: inclusion and consistency proof bundles
  (docs/format-checkpoint.md);
* :mod:`ledger.verify.bundle`: export bundles (docs/export.md).

Dependencies: ``ledger.core``, ``ledger.crypto`` and ``ledger.errors`` only.
"""
