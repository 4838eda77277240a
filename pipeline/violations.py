"""What the audit checks, and how a violation reads (shared by the Spark audit
and the single-process Python replay, so the two report the same thing)."""

from __future__ import annotations

CHECKS = {
    "offsets-dense": "offsets are dense: every offset appears exactly once",
    "controller-epoch": "controller epochs never decrease from one offset to the next",
    "broker-epoch": "a broker's epoch is the offset of its RegisterBrokerRecord, "
    "and increases from one registration to the next",
    "change-epoch": "a BrokerRegistrationChangeRecord carries its broker's current epoch",
    "kip-841": "no partition record puts into an ISR a broker that is fenced, in controlled "
    "shutdown or unregistered at that offset (KIP-841)",
    "leader": "a partition's leader is in its ISR and active (registered, unfenced, not in "
    "controlled shutdown), or -1",
    "partition-epoch": "a partition's epoch grows by exactly 1 per change",
    "leader-epoch": "a partition's leader epoch never decreases",
    "isr-empty": "an ISR is never empty",
}

VIOLATION_COLUMNS = ("offset", "timestamp_ms", "check", "entity", "explanation")


def broker_label(registered: bool, fenced: bool | None, shutdown: bool | None) -> str | None:
    """Why a broker may not join an ISR or lead, or None when it is active."""
    if not registered:
        return "not registered"
    parts = []
    if fenced:
        parts.append("fenced")
    if shutdown:
        parts.append("in controlled shutdown")
    return ", ".join(parts) or None


def partition_entity(topic: str, partition_id: int) -> str:
    return f"{topic}-{partition_id}"
