"""Sensitive config values kept out of the records shown to a reader (Kafka's
``RecordRedactor``).

The metadata log holds every config value as it was set, PASSWORDs included:
a broker applies its keystore password from it, as a Kafka broker does from
its ConfigRecords. Whoever is shown records without needing those values
(a ``read`` caller of ``GET /v1/log`` and ``GET /v1/snapshot``, an export
unless an admin asks for them) is shown them with the value of each
sensitive ConfigRecord (``config_schema.is_sensitive``) replaced by Kafka's
marker, ``(redacted)``. Who needs them is the API's decision (api/auth.py
``SEES_SENSITIVE``); this module only says what a record looks like without.

A deletion (value null) stays null: it says that a config is gone, not what
it held, and a reader that replays the records must still see it go.

SCRAM credentials go further (Kafka's ``RecordRedactor`` hides them from every
log line): a UserScramCredentialRecord's salt, storedKey and serverKey are
shown to no one, whatever the role or ``includeSensitive``; the record keeps
its user, mechanism and iterations and empty bytes for the three (the
controller never writes an empty key: a storedKey is a 32- or 64-byte
digest, so empty means hidden). Only a backup (``GET /v1/backup``, the data
dir itself) holds them, since a restored cluster must authenticate the same
users.
"""

from __future__ import annotations

from msgspec.structs import replace

from .config_schema import is_sensitive
from .records import ConfigRecord, Record, UserScramCredentialRecord

REDACTED = "(redacted)"  # Kafka's RecordRedactor marker


def is_sensitive_record(record: Record) -> bool:
    """A ConfigRecord that sets a sensitive config to a value."""
    return (
        type(record) is ConfigRecord
        and record.value is not None
        and is_sensitive(record.resource_type, record.name)
    )


def redacted(record: Record, config_values: bool = False) -> Record:
    """``record`` as a reader is shown it: the same record, or a copy with
    the marker for a sensitive config's value (unless ``config_values``: the
    reader's role sees them) or without a SCRAM credential's secrets (always)."""
    kind = type(record)
    if kind is UserScramCredentialRecord:
        return replace(record, salt=b"", stored_key=b"", server_key=b"")
    if not config_values and is_sensitive_record(record):
        return replace(record, value=REDACTED)
    return record
