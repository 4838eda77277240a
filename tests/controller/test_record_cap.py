"""Kafka's cap on one user operation's records (QuorumController.MAX_RECORDS_PER_USER_OP)."""

from controller.record_cap import MAX_RECORDS_PER_USER_OP, TOO_MANY_RECORDS, over_cap
from metadata_records.errors import Errors


def test_the_cap_is_kafkas_batch_size_and_bites_past_it_as_bounded_list_does():
    assert MAX_RECORDS_PER_USER_OP == 10_000
    assert not over_cap(range(10_000))
    assert over_cap(range(10_001))


def test_the_answer_is_kafkas_policy_violation_with_its_sentence_first():
    assert TOO_MANY_RECORDS.error is Errors.POLICY_VIOLATION
    assert TOO_MANY_RECORDS.message.startswith(
        "Unable to perform excessively large batch operation"
    )
    assert "10000 records" in TOO_MANY_RECORDS.message
