"""Finalized feature levels, and what ``metadata.version`` decides.

metaquorum has two levels (API.md "POST /v1/features"):

* 1: controlled shutdown is soft state only, as before KIP-841; the controller
  writes RegisterBrokerRecord v0 and never writes ``inControlledShutdown``.
* 2: KIP-841; RegisterBrokerRecord v1 and BrokerRegistrationChangeRecord v1
  persist ``inControlledShutdown``. New clusters start here.

Both levels behave like Kafka at MV >= 3.6-IV0 otherwise: change records exist,
leader recovery is supported, and an ISR shrink does not bump the leader epoch.
"""

from __future__ import annotations

METADATA_VERSION = "metadata.version"
MIN_METADATA_VERSION = 1
MAX_METADATA_VERSION = 2
BOOTSTRAP_METADATA_VERSION = 2
# Kafka treats a log without a metadata.version record as its oldest KRaft level.
DEFAULT_METADATA_VERSION = 1

SUPPORTED_FEATURES = {METADATA_VERSION: (MIN_METADATA_VERSION, MAX_METADATA_VERSION)}


def persists_controlled_shutdown(metadata_version: int) -> bool:
    """Kafka's ``isInControlledShutdownStateSupported``."""
    return metadata_version >= 2


def register_broker_record_version(metadata_version: int) -> int:
    return 1 if persists_controlled_shutdown(metadata_version) else 0
