"""``ledger export`` and ``ledger verify-export`` (bundle format: docs/export.md).

Exit codes of verify-export (as ``ledger audit``): 0 every check verified; 1 any
finding; 3 complete with abstentions only (e.g. no trusted keys given with --jwks);
2 usage; 4 could not run.  export: 0 written; 1 the checkpoint would contradict an
earlier one; 2 usage (no signing key, non-empty --out); 4 could not run.
"""

from __future__ import annotations

import json
import sys
from typing import Any

import click

from ledger.cli.query import filter_options, filters_from
from ledger.cli.signing import keys_dir_option
from ledger.cli.state import CommandObj
from ledger.cli.witness import anchor_policy_options
from ledger.verify.export import EXIT_CODES, summary_line, verify_export


@click.command()
@click.option("--out", "out_dir", required=True, type=click.Path(file_okay=False),
              metavar="DIR", help="Bundle directory to create (absent or empty).")
@filter_options
@click.option("--from", "start", type=click.IntRange(min=0), default=0, show_default=True,
              metavar="SEQ", help="First seq of the range.")
@click.option("--to", "end", type=click.IntRange(min=0), default=None, metavar="SEQ",
              help="End of the range (exclusive); default: the head when the export starts.")
@click.option("--key", "key_file", type=click.Path(exists=True, dir_okay=False),
              default=None, metavar="FILE",
              help="Sign with this Ed25519 private key (PEM) instead of the keyring.")
@keys_dir_option()
@click.option("--proofs", type=click.Choice(["interval", "every"]), default="interval",
              show_default=True, help="One inclusion proof per run of consecutive seqs "
              "(links prove the rest), or one per entry.")
@click.option("--no-absence-proof", "no_absence", is_flag=True, default=False,
              help="With --tenant T of a tenant without entries: leave out the proof of its "
              "absence (it names the neighbouring tenants); the bundle then verifies not "
              "complete.")
@click.pass_obj
def export(obj: CommandObj, /, out_dir: str, start: int, end: int | None, key_file: str | None,
           keys_dir: str, proofs: str, no_absence: bool, **kw: Any) -> None:
    """Write a verifiable bundle of the entries matching the filters to DIR:
    entries.jsonl, entries.csv (a view, not verifiable by itself), key_events.jsonl,
    proofs.jsonl, checkpoint.txt, jwks.json, manifest.json and manifest.jwt (signed
    by the ledger key).  Check it anywhere with `ledger verify-export DIR --jwks FILE`.
    `--tenant T` and no other filter: the tenant's whole chain up to the checkpoint, with the
    proof that it is complete (docs/tenants.md)."""
    from ledger.crypto.keys import Keyring
    from ledger.facade import Ledger
    from ledger.ops.export import ExportOptions, signer_from_keyring, signer_from_pem
    from ledger.ops.filters import Filters

    tenants = kw["tenant"]
    f = filters_from(kw, start, end)
    tenant = None
    if len(tenants) == 1 and f == Filters(tenant=tuple(tenants)):  # the complete export
        tenant, f = tenants[0], Filters()
    with Ledger.open(obj["db_url"]) as ledger:
        origin = ledger.meta.origin
        signer = (signer_from_pem(key_file, origin, ledger.clock.now_us()) if key_file
                  else signer_from_keyring(Keyring.load(keys_dir), origin))
        size = ledger.head()["size"]
        total = max(1, min(end if end is not None else size, size) - start)  # an upper bound
        with click.progressbar(length=total, label="exporting", file=sys.stderr,
                               hidden=not sys.stderr.isatty()) as bar:
            manifest = ledger.export(out_dir, ExportOptions(filters=f, proofs=proofs,
                                                            signer=signer, tenant=tenant,
                                                            absence_proof=not no_absence),
                                     progress=bar.update)
    c = manifest["counts"]
    click.echo(f"{out_dir}: {c['entries']} entries "
               f"({', '.join(f'{k} {v}' for k, v in sorted(c['by_status'].items())) or '-'}),"
               f" {c['key_events']} key events, seq range [{manifest['range']['start']}, "
               f"{manifest['range']['end']}), checkpoint size {manifest['checkpoint']['size']}")


@click.command("verify-export")
@click.argument("directory", type=click.Path(file_okay=False))
@click.option("--jwks", "jwks", type=click.Path(exists=True, dir_okay=False), default=None,
              metavar="FILE", help="The ledger's trusted public keys (JWKS or PEM).  "
              "Without it the signature checks abstain (exit 3 at best).")
@click.option("--policy", "policy_path", type=click.Path(dir_okay=False, exists=True),
              default=None, help="Engine policy file (default: the packaged policy).")
@click.option("--no-attestations", is_flag=True,
              help="Do not judge attestations (they are then abstained, never passed).")
@click.option("--json-report", type=click.Path(dir_okay=False, allow_dash=True), default=None,
              help="Write the full JSON report here ('-' = stdout).")
@anchor_policy_options
def verify_export_cmd(directory: str, jwks: str | None, policy_path: str | None,
                      no_attestations: bool, json_report: str | None,
                      anchor_policy: Any) -> None:
    """Verify an export bundle offline (no database): manifest signature, file digests,
    every entry hash and link, every proof_ref from its preimage, attestations against
    the bundle's key events, the checkpoint and the inclusion proofs."""
    report = verify_export(directory, jwks, policy_path, not no_attestations)
    if anchor_policy is not None:
        from ledger.verify.export_anchor import apply_export_anchors

        apply_export_anchors(directory, report, anchor_policy)
    if json_report == "-":
        click.echo(json.dumps(report, indent=2, ensure_ascii=False))
    elif json_report:
        with open(json_report, "w", encoding="utf-8") as fh:
            json.dump(report, fh, indent=2, ensure_ascii=False)
    click.echo(summary_line(report), err=True)
    for f in report["findings"][:20]:
        where = f["file"] + (f" seq {f['seq']}" if f["seq"] is not None else "")
        click.echo(f"  {where}: {f['class']} {f['code']}: {f['message']}", err=True)
    if len(report["findings"]) > 20:
        click.echo(f"  … {len(report['findings']) - 20} more in the JSON report", err=True)
    for a in report["abstentions"][:5]:
        where = a["file"] + (f" seq {a['seq']}" if a["seq"] is not None else "")
        click.echo(f"  {where}: abstained {a['reason']}: {a['message']}", err=True)
    sys.exit(EXIT_CODES[report["outcome"]])


COMMANDS = [export, verify_export_cmd]
