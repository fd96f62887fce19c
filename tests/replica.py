"""A real PostgreSQL streaming replica (hot standby) of the test server, for the replica tests.

``start_replica(folder)`` copies the primary at ``LEDGER_TEST_PG`` with ``pg_basebackup -R``
(no replication slot: a crashed test must not leave the shared primary holding WAL) and starts
it on a free port of 127.0.0.1 with its own configuration.  The primary must accept
replication connections from 127.0.0.1: ``ensure_replication_allowed`` checks that and, where
the ``pg_hba.conf`` file is writable here, adds the one line it needs and reloads the
configuration (never a restart) -- the same step ``scripts/ensure-postgres`` applies on a CI
machine (docs/operations.md, "Readers on a replica").  Every reason the replica cannot be made
is returned as text, for a precise skip.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from pathlib import Path

from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

HBA_LINE = "host replication all 127.0.0.1/32 trust"
# the primary's values a hot standby needs at least as large (PostgreSQL refuses to start)
AT_LEAST = ("max_connections", "max_worker_processes", "max_wal_senders",
            "max_prepared_transactions", "max_locks_per_transaction")


def _tool(name: str) -> str | None:
    found = shutil.which(name)
    if found:
        return found
    for base in sorted(Path("/usr/lib/postgresql").glob("*/bin"), reverse=True):
        if (base / name).is_file():
            return str(base / name)
    return None


def _as_owner(cmd: list[str]) -> list[str]:
    """PostgreSQL refuses to run as root: run the command as the ``postgres`` user then."""
    if os.geteuid() == 0:
        return ["runuser", "-u", "postgres", "--", *cmd]
    return cmd


def _admin(url: str):
    return create_engine(make_url(url).set(drivername="postgresql+psycopg"),
                         isolation_level="AUTOCOMMIT")


def ensure_replication_allowed(admin_url: str) -> str | None:
    """None when the primary lets 127.0.0.1 connect for replication, else why not."""
    eng = _admin(admin_url)
    try:
        with eng.connect() as conn:
            wal_level = conn.execute(text("SHOW wal_level")).scalar_one()
            if wal_level not in ("replica", "logical"):
                return (f"the primary has wal_level={wal_level}; streaming needs replica "
                        "(a restart of the primary, which the tests never do)")
            senders = int(conn.execute(text("SHOW max_wal_senders")).scalar_one())
            used = conn.execute(text("SELECT count(*) FROM pg_stat_replication")).scalar_one()
            if senders - used < 2:
                return f"the primary has max_wal_senders={senders} with {used} in use"
            if _hba_allows(conn):
                return None
            hba = Path(conn.execute(text("SHOW hba_file")).scalar_one())
            try:
                with hba.open("a", encoding="utf-8") as fh:
                    fh.write(f"\n# streaming replicas of the ledger tests\n{HBA_LINE}\n")
            except OSError as exc:
                return (f"the primary's {hba} has no replication entry for 127.0.0.1 and "
                        f"cannot be written here ({exc.strerror}); add `{HBA_LINE}` and "
                        "reload")
            conn.execute(text("SELECT pg_reload_conf()"))
            for _ in range(50):
                if _hba_allows(conn):
                    return None
                time.sleep(0.1)
            return f"the primary did not take `{HBA_LINE}` after a reload"
    except Exception as exc:  # noqa: BLE001 - any failure means "no primary to copy"
        return f"PostgreSQL not reachable at {admin_url} ({type(exc).__name__})"
    finally:
        eng.dispose()


def _hba_allows(conn) -> bool:
    rows = conn.execute(text(
        "SELECT address, auth_method FROM pg_hba_file_rules WHERE type = 'host'"
        " AND error IS NULL AND 'replication' = ANY(database)")).all()
    return any(addr in ("127.0.0.1", "all", "0.0.0.0") and method == "trust"
               for addr, method in rows)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Replica:
    """A running hot standby: ``url_for(primary_url)`` names the same database on it."""

    def __init__(self, folder: Path, port: int, pg_ctl: str) -> None:
        self.folder, self.port, self.pg_ctl = folder, port, pg_ctl
        self.data = folder / "data"

    def url_for(self, primary_url: str) -> str:
        url = make_url(primary_url).set(host="127.0.0.1", port=self.port)
        return url.render_as_string(hide_password=False)

    def _ctl(self, *args: str) -> None:
        subprocess.run(_as_owner([self.pg_ctl, "-D", str(self.data), *args]), check=True,
                       capture_output=True, timeout=120)

    def start(self) -> None:
        self._ctl("-w", "-t", "60", "-l", str(self.folder / "replica.log"), "start")

    def stop(self) -> None:
        self._ctl("-w", "-m", "fast", "stop")

    def sql(self, statement: str) -> object:
        eng = _admin(f"postgresql://postgres@127.0.0.1:{self.port}/postgres")
        try:
            with eng.connect() as conn:
                return conn.execute(text(statement)).scalar()
        finally:
            eng.dispose()

    def pause(self) -> None:
        """Stop replaying WAL (still receiving it): the standby falls behind on purpose."""
        self.sql("SELECT pg_wal_replay_pause()")

    def resume(self) -> None:
        self.sql("SELECT pg_wal_replay_resume()")

    def wait_caught_up(self, primary_admin_url: str, timeout_s: float = 30.0) -> None:
        """Until the standby has replayed everything the primary had written at the call."""
        eng = _admin(primary_admin_url)
        with eng.connect() as conn:
            lsn = conn.execute(text("SELECT pg_current_wal_lsn()::text")).scalar_one()
        eng.dispose()
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            done = self.sql(f"SELECT pg_last_wal_replay_lsn() >= '{lsn}'::pg_lsn")
            if done:
                return
            time.sleep(0.05)
        raise TimeoutError(f"the replica did not replay up to {lsn} in {timeout_s}s")


def start_replica(folder: Path, admin_url: str) -> Replica | str:
    """A running streaming replica of the primary at ``admin_url`` in ``folder`` (a folder
    the ``postgres`` user can reach when run as root), or the reason there cannot be one;
    ``remove_replica`` stops it and removes ``folder``."""
    reason = ensure_replication_allowed(admin_url)
    if reason:
        return reason
    basebackup, pg_ctl = _tool("pg_basebackup"), _tool("pg_ctl")
    if not basebackup or not pg_ctl:
        return "pg_basebackup or pg_ctl is not installed"
    primary = make_url(admin_url)
    eng = _admin(admin_url)
    with eng.connect() as conn:
        floors = {name: conn.execute(text(f"SHOW {name}")).scalar_one() for name in AT_LEAST}
    eng.dispose()
    folder.mkdir(parents=True, exist_ok=True)
    if os.geteuid() == 0:
        shutil.chown(folder, "postgres", "postgres")
    port = _free_port()
    replica = Replica(folder, port, pg_ctl)
    done = subprocess.run(_as_owner([
        basebackup, "-h", primary.host or "127.0.0.1", "-p", str(primary.port or 5432),
        "-U", primary.username or "postgres", "-D", str(replica.data), "-R", "-X", "stream",
        "-c", "fast", "--no-sync"]), capture_output=True, text=True, timeout=300)
    if done.returncode != 0:
        return f"pg_basebackup failed: {done.stderr.strip()[-300:]}"
    # the copy has the primary's data but not its configuration files (Debian keeps them
    # in /etc): give the standby its own, on its own port and socket folder
    conf = "\n".join([
        f"port = {port}", "listen_addresses = '127.0.0.1'",
        f"unix_socket_directories = '{folder}'", "hot_standby = on",
        "shared_buffers = 16MB", "fsync = off", "wal_receiver_status_interval = 1s",
        "hot_standby_feedback = on", "max_standby_streaming_delay = 5s",
        *(f"{name} = {value}" for name, value in floors.items()), ""])
    (replica.data / "postgresql.conf").write_text(conf, encoding="utf-8")
    (replica.data / "pg_hba.conf").write_text(
        "local all all trust\nhost all all 127.0.0.1/32 trust\n", encoding="utf-8")
    (replica.data / "pg_ident.conf").write_text("", encoding="utf-8")
    auto = replica.data / "postgresql.auto.conf"
    if os.geteuid() == 0:
        for path in (replica.data / "postgresql.conf", replica.data / "pg_hba.conf",
                     replica.data / "pg_ident.conf", auto):
            if path.exists():
                shutil.chown(path, "postgres", "postgres")
    try:
        replica.start()
    except subprocess.CalledProcessError:
        log = folder / "replica.log"
        tail = log.read_text(errors="replace")[-400:] if log.exists() else ""
        return f"the replica did not start: {tail}"
    return replica


def remove_replica(replica: Replica) -> None:
    try:
        replica.stop()
    except (subprocess.CalledProcessError, subprocess.TimeoutExpired):
        pass
    shutil.rmtree(replica.folder, ignore_errors=True)
