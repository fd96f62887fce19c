"""Service settings refuse what ``ledger serve`` cannot run with (no server needed)."""

from __future__ import annotations

import pytest

from ledger.api.settings import Settings
from ledger.errors import UsageError


@pytest.mark.parametrize("kw, code, field", [
    ({"external_jwks": "idp.json"}, "missing_issuer", "issuer"),
    ({"group_max_items": 0}, "usage", "group_max_items"),
    ({"page_max": 0}, "usage", "page_max"),
    ({"group_wait_ms": -1}, "usage", "group_wait_ms"),
    ({"group_wait_ms": 1001}, "usage", "group_wait_ms"),
])
def test_settings_out_of_bounds_are_usage_errors(kw, code, field):
    with pytest.raises(UsageError) as caught:
        Settings(db_url="sqlite:///x.db", **kw)
    assert (caught.value.code, caught.value.field) == (code, field)


def test_settings_travel_through_the_environment_and_need_it():
    s = Settings(db_url="sqlite:///x.db", group_wait_ms=2.5)
    assert Settings.from_env({"LEDGER_SERVE_SETTINGS": s.to_env()}) == s
    with pytest.raises(UsageError) as caught:
        Settings.from_env({})
    assert caught.value.code == "no_settings"
