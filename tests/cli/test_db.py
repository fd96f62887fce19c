"""``ledger db upgrade`` and ``ledger db current``: schema migrations from the CLI."""

from __future__ import annotations

from click.testing import CliRunner

from ledger.cli.main import cli
from ledger.store.db import current_revision as revision_of
from ledger.store.db import make_engine


def test_upgrade_then_current_name_the_same_revision(db_url):
    run = CliRunner().invoke
    res = run(cli, ["--db", db_url, "db", "current"])
    assert res.exit_code == 0 and res.stdout.strip() == "none"
    res = run(cli, ["--db", db_url, "db", "upgrade", "--revision", "0001"])
    assert res.exit_code == 0 and res.stdout.strip() == "at revision 0001"
    res = run(cli, ["--db", db_url, "db", "upgrade"])
    head = res.stdout.strip().removeprefix("at revision ")
    assert res.exit_code == 0 and head not in ("0001", "None")
    assert run(cli, ["--db", db_url, "db", "current"]).stdout.strip() == head
    engine = make_engine(db_url)
    try:
        assert revision_of(engine) == head
    finally:
        engine.dispose()


def test_a_bad_or_unsupported_database_url_exits_2():
    for url in ("::not a url", "mysql://user@host/db"):
        res = CliRunner().invoke(cli, ["--db", url, "head"])
        assert res.exit_code == 2 and "bad_db_url" in res.stderr, (url, res.output)
