"""``ledger tiles write DIR``: publish the ledger's Merkle tree as C2SP tlog-tiles
(docs/tiles.md), static files any web server or object store can serve.

Exit codes: 0 written; 1 the directory's checkpoint is not in the stored tree (nothing
written); 2 usage (no checkpoint yet, DIR of another log or not a directory); 4 could
not run.
"""

from __future__ import annotations

import click

from ledger.cli.output import emit_json
from ledger.cli.state import CommandObj


@click.group("tiles")
def tiles_group() -> None:
    """C2SP tlog-tiles of the ledger's Merkle tree (docs/tiles.md)."""


@tiles_group.command("write")
@click.argument("directory", metavar="DIR", type=click.Path(file_okay=False))
@click.pass_obj
def write(obj: CommandObj, directory: str) -> None:
    """Write the tiles, entry bundles and checkpoint of the latest stored checkpoint to
    DIR.  Incremental: only the full tiles completed since the checkpoint DIR published
    before, the partial tiles of the new size, and bundles erased since are written."""
    from ledger.facade import Ledger

    with Ledger.open(obj["db_url"]) as ledger:
        report = ledger.write_tiles(directory)
    emit_json(report.to_dict())
    click.echo(f"{directory}: tree size {report.previous_size} -> {report.size}, "
               f"{len(report.tiles)} tiles, {len(report.bundles)} entry bundles, "
               f"{len(report.rewritten)} rewritten", err=True)


COMMANDS = [tiles_group]
