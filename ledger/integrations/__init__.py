"""Adapters that build ledger submissions from other systems' objects (QWED)."""
