"""``ledger serve``'s operations options refuse bad values before anything starts."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from ledger import Ledger
from ledger.cli.main import cli


@pytest.mark.parametrize("args, needle", [
    (["--audit-every", "sometimes"], "--audit-every"),
    (["--store-down-after", "-1s"], "--store-down-after"),
    (["--alert-webhook", "mailto:ops@example.org"], "--alert-webhook"),
    (["--log-format", "xml"], "--log-format"),
    (["--alert-retries", "99"], "--alert-retries"),
])
def test_bad_operations_options_exit_2_naming_the_option(sqlite_url: str, args: list[str],
                                                         needle: str) -> None:
    Ledger.init(sqlite_url).close()
    res = CliRunner().invoke(cli, ["--db", sqlite_url, "serve", *args])
    assert res.exit_code == 2, res.output
    assert needle in res.stderr and "Traceback" not in res.output
