"""The one exception tree: every exception class of the package is in ledger.errors, drawn
in its docstring, with a category of the one table; data-shaped errors keep their category."""

from __future__ import annotations

import importlib
import inspect
import json
import pkgutil
import re

import pytest

import ledger
from ledger import errors
from ledger.errors import (
    CATEGORY_STATUS,
    CanonicalizationError,
    ErrorInfo,
    IdempotencyConflict,
    LedgerError,
    PolicyError,
    SubmissionTooLarge,
    UsageError,
)


def package_modules() -> list[str]:
    names = [m.name for m in pkgutil.walk_packages(ledger.__path__, "ledger.")]
    return [n for n in names if not n.endswith("__main__")]


def tree_classes() -> list[type[BaseException]]:
    return [c for _, c in inspect.getmembers(errors, inspect.isclass)
            if issubclass(c, BaseException) and c.__module__ == "ledger.errors"]


@pytest.mark.parametrize("name", package_modules())
def test_no_exception_class_outside_errors(name: str) -> None:
    module = importlib.import_module(name)
    own = [c.__name__ for _, c in inspect.getmembers(module, inspect.isclass)
           if issubclass(c, BaseException) and c.__module__ == name]
    assert name == "ledger.errors" or not own, f"{name} defines {own}; move them to errors.py"


def test_the_docstring_draws_every_class_with_its_parent() -> None:
    drawn: dict[str, str] = {}
    parents: list[str] = []
    for line in (errors.__doc__ or "").splitlines():
        m = re.match(r"^    ([│ ]*)(?:[├└]── )?([A-Z]\w+)(?: \[|$| \()", line)
        if not m:
            continue
        depth = len(m.group(1)) // 4 + (1 if "──" in line else 0)
        parents[depth:] = [m.group(2)]
        drawn[m.group(2)] = parents[depth - 1] if depth else ""
    public = {c.__name__: c for c in tree_classes() if not c.__name__.startswith("_")}
    assert drawn.keys() == public.keys()
    for name, parent in drawn.items():
        if parent:
            assert issubclass(public[name], public[parent]), (name, parent)


@pytest.mark.parametrize("cls", tree_classes(), ids=lambda c: c.__name__)
def test_every_class_has_a_category_of_the_table(cls: type[BaseException]) -> None:
    assert issubclass(cls, LedgerError)
    assert cls.category in CATEGORY_STATUS
    exc = cls("message")
    assert (exc.exit_code, exc.http_status) == CATEGORY_STATUS[cls.category]


def test_to_dict_keeps_its_json_shape_and_carries_the_category() -> None:
    exc = IdempotencyConflict("used", field="idempotency_key", detail={"seq": 4})
    info = exc.to_dict()
    assert isinstance(info, ErrorInfo) and info.category == "conflict"
    assert json.dumps(info) == json.dumps({"code": "idempotency_conflict", "message": "used",
                                           "field": "idempotency_key", "detail": {"seq": 4}})
    assert (info.exit_code, info.http_status) == (exc.exit_code, exc.http_status) == (2, 409)
    assert SubmissionTooLarge("big").to_dict().http_status == 413


def test_pure_value_checks_are_value_errors_with_their_bare_message() -> None:
    for exc in (CanonicalizationError("$.x: floats are not allowed"),
                PolicyError("rules[0].id: must be a non-empty string")):
        assert isinstance(exc, ValueError) and isinstance(exc, LedgerError)
        assert str(exc) == exc.message
    assert isinstance(PolicyError("x"), UsageError)
    assert str(UsageError("x", field="f")) == "usage [f]: x"


def test_old_import_paths_name_the_same_classes() -> None:
    from ledger.core.canonical import CanonicalizationError as c1
    from ledger.core.note import NoteError as c2
    from ledger.crypto.keys import KeyringError as c3
    from ledger.crypto.note_sign import NoteSignatureError as c4
    from ledger.ops.checkpoint import CheckpointError as c5
    from ledger.ops.checkpoint import TreeIntegrityError as c6

    assert (c1, c2, c3, c4, c5, c6) == (
        errors.CanonicalizationError, errors.NoteError, errors.KeyringError,
        errors.NoteSignatureError, errors.CheckpointError, errors.TreeIntegrityError)
