"""AllocateProducerIds in the pure controller, after Kafka's
ProducerIdControlManagerTest."""

from controller.messages import AllocateProducerIdsRequest
from controller.producer_ids_control import LONG_MAX, PRODUCER_ID_BLOCK_SIZE
from metadata_records.errors import Errors
from metadata_records.records import ProducerIdsRecord
from tests.harness import ControllerHarness


def harness():
    h = ControllerHarness()
    h.start_brokers(1, 2)
    return h


def allocate(h, broker, epoch=None):
    epoch = h.epochs[broker] if epoch is None else epoch
    return h.run(AllocateProducerIdsRequest(broker, epoch))


def test_blocks_follow_each_other_from_zero_whoever_asks():
    h = harness()
    starts = []
    for broker in (1, 2, 1, 1, 2):
        r = allocate(h, broker)
        assert (r.error, r.producer_id_len) == (Errors.NONE, PRODUCER_ID_BLOCK_SIZE)
        starts.append(r.producer_id_start)
        assert h.last.records == (
            ProducerIdsRecord(
                broker_id=broker,
                broker_epoch=h.epochs[broker],
                next_producer_id=r.producer_id_start + PRODUCER_ID_BLOCK_SIZE,
            ),
        )
    assert starts == [0, 1000, 2000, 3000, 4000]
    assert h.image.next_producer_id == 5000


def test_blocks_decided_in_one_batch_do_not_overlap():
    # Group commit: the second grant is decided on top of the first, uncommitted.
    h = harness()
    first = h.controller.handle(AllocateProducerIdsRequest(1, h.epochs[1]), h.now_ms)
    second = h.controller.handle(AllocateProducerIdsRequest(2, h.epochs[2]), h.now_ms)
    h.commit(first.records + second.records)
    assert (first.response.producer_id_start, second.response.producer_id_start) == (0, 1000)
    assert h.image.next_producer_id == 2000


def test_a_new_leader_continues_from_the_log():
    h = harness()
    allocate(h, 1)
    allocate(h, 2)
    h.new_leader()
    assert allocate(h, 1).producer_id_start == 2000
    assert h.replayed() == h.image


def test_unknown_brokers_and_stale_epochs_get_nothing():
    h = harness()
    before = h.image.next_producer_id
    r = allocate(h, 9, epoch=5)
    assert (r.error, r.error_message) == (
        Errors.STALE_BROKER_EPOCH,
        "No broker registration found for broker 9",
    )
    r = allocate(h, 1, epoch=h.epochs[1] + 1)
    assert r.error is Errors.STALE_BROKER_EPOCH
    assert (
        r.error_message
        == f"Expected broker epoch {h.epochs[1]}, but got broker epoch {h.epochs[1] + 1}"
    )
    assert (r.producer_id_start, r.producer_id_len) == (0, 0)
    assert h.last.records == () and h.image.next_producer_id == before


def test_a_fenced_broker_still_gets_a_block_as_in_kafka():
    h = harness()
    h.heartbeat(2, want_fence=True)
    assert h.image.brokers[2].fenced
    assert allocate(h, 2).error is Errors.NONE


def test_the_last_block_below_the_int64_limit_then_exhaustion():
    h = harness()
    h.commit([ProducerIdsRecord(broker_id=-1, broker_epoch=-1, next_producer_id=LONG_MAX - 1000)])
    r = allocate(h, 1)
    assert (r.error, r.producer_id_start) == (Errors.NONE, LONG_MAX - 1000)
    assert h.image.next_producer_id == LONG_MAX
    r = allocate(h, 1)
    assert r.error is Errors.UNKNOWN_SERVER_ERROR
    assert "Exhausted all producerIds" in r.error_message
    assert h.last.records == ()


def test_a_record_that_would_grant_ids_again_is_refused_on_replay():
    h = harness()
    allocate(h, 1)
    before = h.image
    h.commit([ProducerIdsRecord(broker_id=2, broker_epoch=h.epochs[2], next_producer_id=1000)])
    assert h.image.next_producer_id == 1000
    assert h.image.ignored_records == before.ignored_records + 1
