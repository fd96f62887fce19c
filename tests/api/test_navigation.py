"""Navigating a large ledger over HTTP, against a real server on both engines: newest
first, keyset pages both ways, a total that says what it counts, several values per
filter, the pick-lists of the filters and the jump to an entry hash."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from ledger.demo.samples import realistic
from ledger.facade import Ledger
from tests import tamper
from tests.api.server import Server, prepare_ledger, start_server
from tests.conftest import ENGINES, engine_url

N = 30


@pytest.fixture(scope="module", params=ENGINES)
def nav(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory,
        ) -> Iterator[Server]:
    """30 realistic results; entry 4's status column rewritten behind the ledger's back
    (from its true status to the other of VERIFIED/BLOCKED)."""
    tmp = tmp_path_factory.mktemp(f"nav-{request.param}")
    db_url = engine_url(request.param, request, tmp)
    keys = tmp / "keys"
    origin = f"test.example/nav-{request.param}"
    prepare_ledger(db_url, keys, origin)
    with Ledger.open(db_url) as ledger:
        ledger.append_many(realistic(N - 1), producer="seed")
        ledger.trust_issuer(tamper.ISSUER, tamper.JWKS, reason="a key event", producer="seed")
        true4 = ledger.get(4)["status"]
    with tamper.unlocked(db_url) as conn:
        tamper.update_entry(conn, 4, status="BLOCKED" if true4 != "BLOCKED" else "VERIFIED")
    proc, url = start_server(db_url, keys, tmp / "serve.log")
    srv = Server(request.param, db_url, keys, origin, proc, url, tmp / "serve.log")
    request.addfinalizer(srv.stop)
    srv.tokens = {r: srv.token(r, f"nav-{r}") for r in ("auditor", "developer", "agent")}
    srv.true4 = true4  # type: ignore[attr-defined]
    yield srv


def _all(c, **params) -> list[dict]:
    rows, key = [], {}
    while True:
        r = c.get("/v1/entries", params={**params, **key, "limit": 7}).json()
        rows += r["entries"]
        nxt = r.get("next_before") if params.get("order") == "desc" else r["next_after"]
        if nxt is None:
            return rows
        key = {"before": nxt} if params.get("order") == "desc" else {"after": nxt}


def test_newest_first_pages_are_the_oldest_first_ones_reversed(nav: Server) -> None:
    with nav.client("auditor") as c:
        asc = [e["seq"] for e in _all(c)]
        desc = [e["seq"] for e in _all(c, order="desc")]
        assert asc == list(range(N)) and desc == asc[::-1]
        first = c.get("/v1/entries", params={"order": "desc", "limit": 3}).json()
        assert [e["seq"] for e in first["entries"]] == [29, 28, 27]
        assert first["order"] == "desc" and first["next_before"] == 27
        assert first["next_after"] is None
        below = c.get("/v1/entries", params={"order": "desc", "before": 2}).json()
        assert [e["seq"] for e in below["entries"]] == [1, 0] and below["next_before"] is None
        for bad, field in (({"before": 3}, "before"), ({"order": "desc", "after": 3}, "after"),
                           ({"order": "sideways"}, "order")):
            r = c.get("/v1/entries", params=bad)
            assert r.status_code == 400, bad
            assert field in r.text, (bad, r.text)


def test_the_total_counts_index_candidates_and_says_so(nav: Server) -> None:
    with nav.client("auditor") as c:
        everything = c.get("/v1/entries", params={"count": "true", "limit": 1}).json()
        assert everything["index_total"] == N
        assert "index_total" not in c.get("/v1/entries", params={"limit": 1}).json()
        stored = "BLOCKED" if nav.true4 != "BLOCKED" else "VERIFIED"
        rows = _all(c, status=stored)
        r = c.get("/v1/entries", params={"status": stored, "count": "true", "limit": 1000}
                  ).json()
        # the index finds entry 4 by its rewritten column: a candidate counted in the
        # total, returned flagged and not counted as a match
        assert r["index_total"] == len(rows) == len(r["entries"])
        assert 4 in [e["seq"] for e in rows]
        assert r["matched"] == r["index_total"] - 1 and r["flagged"] == 1
        both = c.get("/v1/entries", params={"status": ["VERIFIED", "BLOCKED"],
                                            "count": "true", "limit": 1000}).json()
        assert {e["status"] for e in both["entries"]} <= {"VERIFIED", "BLOCKED"}
        assert both["index_total"] == len(both["entries"]) == sum(
            len(_all(c, status=s)) for s in ("VERIFIED", "BLOCKED"))


def test_pick_lists_hold_what_the_index_can_find(nav: Server) -> None:
    with nav.client("auditor") as c:
        engines = c.get("/v1/entries/values", params={"field": "engine"}).json()
        assert engines["values"] == sorted({e["engine"] for e in _all(c)} - {None})
        assert engines["truncated"] is False
        assert c.get("/v1/entries/values", params={"field": "producer"}).json()["values"] == [
            "seed"]
        r = c.get("/v1/entries/values", params={"field": "envelope"})
        assert r.status_code == 400
        # a key event's status column holds its action: listed for auditors ...
        assert "trust" in c.get("/v1/entries/values", params={"field": "status"}).json()[
            "values"]
    with nav.client("agent") as c:  # ... never for agents, who see result entries only
        assert set(c.get("/v1/entries/values", params={"field": "status"}).json()[
            "values"]) == {e["status"] for e in _all(c)}
        r = c.get("/v1/entries/values", params={"field": "engine"})
        assert r.status_code == 403 and r.json()["error"]["code"] == "forbidden_filter"
    with nav.client("developer") as c:
        assert c.get("/v1/entries/values", params={"field": "producer"}).status_code == 403


def test_jump_to_an_entry_hash(nav: Server) -> None:
    with nav.client("auditor") as c:
        h = c.get("/v1/entries/17").json()["entry"]["entry_hash"]
        assert c.get(f"/v1/entries/by-hash/{h}").json() == {"seq": 17}
        assert c.get(f"/v1/entries/by-hash/{h.removeprefix('sha256:')}").json() == {"seq": 17}
        r = c.get("/v1/entries/by-hash/" + "0" * 64)
        assert r.status_code == 404 and r.json()["error"]["code"] == "not_found"
        r = c.get("/v1/entries/by-hash/" + "z" * 64)
        assert r.status_code == 400 and "entry_hash" in r.text
    with nav.client("developer") as c:
        r = c.get(f"/v1/entries/by-hash/{h}")
        assert r.status_code == 403 and r.json()["error"]["code"] == "forbidden_filter"
