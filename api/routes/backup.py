"""GET /v1/backup: the committed image as a backup file, streamed.

One image, taken after a read barrier (what a linearizable read sees: every
write acknowledged before the request is in it), by any voter, a follower
too. It is immutable, so it is encoded in pieces while newer images are
applied, and the pieces go out as they are made: a 2,000,000-partition image
is never whole in memory as bytes. Above OFFLOAD_PARTITIONS each piece is
encoded in a thread, so the event loop is never held for long.

Admin only: a backup holds sensitive config values as they are (a restore
must bring them back), where /v1/snapshot shows other roles `(redacted)`.
The file's format, and how it is checked: metadata_records/backup_file.py.
"""

from __future__ import annotations

import time

from fastapi import FastAPI
from starlette.responses import StreamingResponse

from metadata_records.backup_file import MEDIA_TYPE, backup_header, backup_pieces

from ..openapi_doc import HEADERS, READ_RESPONSES
from .context import RouteContext, stream_pieces
from .params import AdminCaller


def backup(app: FastAPI, ctx: RouteContext) -> None:
    node = ctx.node

    @app.get(
        "/v1/backup",
        operation_id="readBackup",
        tags=["admin"],
        summary="The committed image as a backup file (metaquorum backup)",
        # No media type of its own: FastAPI then documents the errors as JSON.
        response_class=StreamingResponse,
        responses={
            **READ_RESPONSES,
            200: {
                "description": "the backup file, streamed: a header line (a BackupHeader), "
                "the image in the canonical snapshot encoding (its SHA-256 is the image "
                "digest voters report), then a trailer line (headerSha256, imageBytes, "
                "imageSha256). A body that ends before its trailer was cut short: "
                '`metaquorum backup` refuses it (docs/durability.md "Backup and restore")',
                "content": {MEDIA_TYPE: {"schema": {"type": "string", "format": "binary"}}},
                "headers": {
                    "X-Metadata-Offset": HEADERS["X-Metadata-Offset"],
                    "X-Next-Offset": {
                        "description": "the image's next offset (it holds every offset below)",
                        "required": True,
                        "schema": {"type": "integer", "minimum": 0},
                        "example": 42,
                    },
                },
            },
        },
    )
    async def read_backup(caller: AdminCaller) -> StreamingResponse:
        """The image after a read barrier, with the cluster id, its offsets,
        voter set and features: what `metaquorum restore` makes a new data dir
        of. Sensitive config values are in it as they are, so only the admin
        role may read it."""
        del caller  # authenticated as an admin: nothing else to check
        image = await ctx.read_image("linearizable")
        header = backup_header(
            image,
            cluster_id=node.cluster_id,
            source_node_id=node.node_id,
            created_at_ms=int(time.time() * 1000),
        )
        return StreamingResponse(
            stream_pieces(backup_pieces(header, image), image),
            media_type=MEDIA_TYPE,
            headers={
                "X-Metadata-Offset": str(image.last_offset),
                "X-Next-Offset": str(image.next_offset),
                "Cache-Control": "no-store",
            },
        )
