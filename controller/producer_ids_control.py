"""AllocateProducerIds (Kafka's ``ProducerIdControlManager``): blocks of
producer ids for idempotent and transactional producers.

The image keeps the first id of the next block (``next_producer_id``); each
grant writes a ``ProducerIdsRecord`` that moves it one block on, so a block
is decided on top of every block granted before it, committed or pending,
and the log never hands an id out twice, across failovers too (a new leader
starts from the log).
"""

from __future__ import annotations

from collections.abc import Callable

from metadata_records.delta import ImageDelta
from metadata_records.errors import Errors
from metadata_records.records import ProducerIdsRecord

from .broker_epochs import check_broker_epoch
from .messages import AllocateProducerIdsRequest, AllocateProducerIdsResponse, ControllerResult

# Kafka's ProducerIdsBlock.PRODUCER_ID_BLOCK_SIZE.
PRODUCER_ID_BLOCK_SIZE = 1000
LONG_MAX = 2**63 - 1


class ProducerIdControlManager:
    def __init__(self, view: Callable[[], ImageDelta]) -> None:
        self._view = view  # the controller's view (committed image + pending records)

    def allocate_producer_ids(
        self, req: AllocateProducerIdsRequest, now_ms: int
    ) -> ControllerResult:
        """Kafka's ``generateNextProducerId``: a registered broker at its
        epoch gets the next block (fenced or not, as in Kafka)."""
        view = self._view()
        refused = check_broker_epoch(view, req.broker_id, req.broker_epoch)
        if refused is not None:
            return ControllerResult(
                (), AllocateProducerIdsResponse(refused.error, refused.message, rule=refused.rule)
            )
        first = view.next_producer_id
        if first > LONG_MAX - PRODUCER_ID_BLOCK_SIZE:
            return ControllerResult(
                (),
                AllocateProducerIdsResponse(
                    Errors.UNKNOWN_SERVER_ERROR,
                    "Exhausted all producerIds as the next block's end producerId "
                    "has exceeded the int64 type limit",
                    rule="producer-ids.exhausted",
                ),
            )
        record = ProducerIdsRecord(
            broker_id=req.broker_id,
            broker_epoch=req.broker_epoch,
            next_producer_id=first + PRODUCER_ID_BLOCK_SIZE,
        )
        response = AllocateProducerIdsResponse(
            Errors.NONE, None, producer_id_start=first, producer_id_len=PRODUCER_ID_BLOCK_SIZE
        )
        return ControllerResult((record,), response)
