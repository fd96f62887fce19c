"""Write a QWED ``VerificationLog`` with QWED's own ``AuditLogger`` (run as a program).

    DATABASE_URL=sqlite:///qwed.db QWED_AUDIT_SECRET_KEY=... \
        python -m tests.integrations.qwed_audit_writer ROUNDS

QWED reads ``DATABASE_URL`` when its modules are imported, hence a process of its own.
Two organisations; each round logs every engine's result (tests/integrations/
qwed_engines.py) for both, as QWED's routes do (``result=dr.to_dict()``, the domain,
the admission).
"""

from __future__ import annotations

import sys


def main(rounds: int) -> None:
    from qwed_new.core import database, models  # models: registers the tables
    from qwed_new.core.audit_logger import AuditLogger
    from sqlmodel import Session

    from tests.integrations.qwed_engines import install_issuer, produce

    database.create_db_and_tables()
    with Session(database.engine) as s:
        for name in ("acme", "globex"):
            s.add(models.Organization(name=name, display_name=name.title()))
        s.commit()
    install_issuer()
    audit = AuditLogger()
    for i in range(rounds):
        for p in produce(i):
            for org in (1, 2):
                audit.log_verification(organization_id=org, user_id=None, query=p.query,
                                       result=p.result.to_dict(),
                                       is_verified=bool(p.result.is_authoritative),
                                       domain=p.engine.upper(), admission=p.admission)


if __name__ == "__main__":
    main(int(sys.argv[1]))
