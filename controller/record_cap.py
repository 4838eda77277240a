"""Kafka's cap on what one user operation may write.

``QuorumController.MAX_RECORDS_PER_USER_OP`` is 10,000, the size of one batch.
Kafka's managers collect an operator's request's records in a ``BoundedList``
of that length: the append that would pass it throws, and
``EventHandlerExceptionInfo`` answers POLICY_VIOLATION "Unable to perform
excessively large batch operation." for the whole request, in the request's
own error shape (``getErrorResponse``: every entry carries the error), with
nothing written.

The operator's writes here (CreateTopics, CreatePartitions,
AlterPartitionReassignments, ElectLeaders) count their records after each
entry with ``over_cap`` and answer ``TOO_MANY_RECORDS`` the same way. What
brokers drive (registration, heartbeats, fencing, AlterPartition) is not a
user operation and has no cap, as in Kafka.
"""

from __future__ import annotations

from collections.abc import Sized

from metadata_records.errors import ApiError, Errors

MAX_RECORDS_PER_USER_OP = 10_000

TOO_MANY_RECORDS = ApiError(
    Errors.POLICY_VIOLATION,
    "Unable to perform excessively large batch operation: it would write more than "
    f"{MAX_RECORDS_PER_USER_OP} records (Kafka's MAX_RECORDS_PER_USER_OP); split the request.",
    "user-op.too-many-records",
)


def over_cap(records: Sized) -> bool:
    """True once one operation's records passed the cap (BoundedList's add)."""
    return len(records) > MAX_RECORDS_PER_USER_OP
