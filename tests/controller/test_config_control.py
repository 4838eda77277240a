"""IncrementalAlterConfigs in the pure controller, after Kafka's
ConfigurationControlManagerTest, and the controller deciding with the
resolved unclean.leader.election.enable."""

import pytest

from controller.messages import (
    AlterableConfig,
    AlterConfigsResource,
    DeleteTopicsRequest,
    IncrementalAlterConfigsRequest,
)
from metadata_records.config_schema import OpType
from metadata_records.errors import Errors
from metadata_records.records import BROKER_RESOURCE, TOPIC_RESOURCE, ConfigRecord
from tests.harness import ControllerHarness

SET, DELETE, APPEND, SUBTRACT = OpType.SET, OpType.DELETE, OpType.APPEND, OpType.SUBTRACT


@pytest.fixture
def h():
    h = ControllerHarness()
    h.start_brokers(1, 2, 3)
    h.create_topic("mytopic", 1, 3)
    return h


def topic(name="mytopic", *changes):
    return AlterConfigsResource(TOPIC_RESOURCE, name, tuple(AlterableConfig(*c) for c in changes))


def broker(name, *changes):
    return AlterConfigsResource(BROKER_RESOURCE, name, tuple(AlterableConfig(*c) for c in changes))


def alter(h, *resources, validate_only=False):
    response = h.run(IncrementalAlterConfigsRequest(tuple(resources), validate_only))
    return [
        (r.resource_type, r.resource_name, r.error, r.error_message) for r in response.responses
    ]


def ok(kind, name):
    return (kind, name, Errors.NONE, None)


def cfg(kind, name, key, value):
    return ConfigRecord(resource_type=kind, resource_name=name, name=key, value=value)


def test_each_resource_is_decided_on_its_own_and_only_the_good_ones_write(h):
    # Kafka's testIncrementalAlterConfigs: SUBTRACT on a non-LIST key refuses
    # that resource whole (its SET included); the other resource is written.
    answers = alter(
        h,
        broker("0", ("num.io.threads", SUBTRACT, "4"), ("background.threads", SET, "4")),
        topic("mytopic", ("cleanup.policy", APPEND, "compact")),
    )
    assert answers == [
        (
            BROKER_RESOURCE,
            "0",
            Errors.INVALID_CONFIG,
            "Can't SUBTRACT to key num.io.threads because its type is not LIST.",
        ),
        ok(TOPIC_RESOURCE, "mytopic"),
    ]
    # APPEND starts from the default ("delete"), as Kafka's getParts.
    assert h.last.records == (cfg(TOPIC_RESOURCE, "mytopic", "cleanup.policy", "delete,compact"),)
    assert h.image.topic_by_name("mytopic").configs == {"cleanup.policy": "delete,compact"}
    assert h.image.broker_configs == {}


def test_append_and_subtract_many_values_and_delete(h):
    key = "leader.replication.throttled.replicas"
    assert alter(h, topic("mytopic", (key, APPEND, "0:1,0:2,0:3"))) == [
        ok(TOPIC_RESOURCE, "mytopic")
    ]
    assert alter(h, topic("mytopic", (key, APPEND, "0:2,0:4"))) == [ok(TOPIC_RESOURCE, "mytopic")]
    assert h.image.topic_by_name("mytopic").configs[key] == "0:1,0:2,0:3,0:4"
    alter(h, topic("mytopic", (key, SUBTRACT, "0:1,0:3,0:9")))
    assert h.image.topic_by_name("mytopic").configs[key] == "0:2,0:4"
    alter(h, topic("mytopic", (key, DELETE, "ignored")))
    assert h.last.records == (cfg(TOPIC_RESOURCE, "mytopic", key, None),)
    assert key not in h.image.topic_by_name("mytopic").configs


def test_an_unchanged_topic_value_writes_nothing_but_a_broker_value_is_written_again(h):
    # KAFKA-14136: brokers reload their dynamic configs on the record.
    alter(
        h,
        topic("mytopic", ("retention.ms", SET, "1000")),
        broker("", ("num.io.threads", SET, "16")),
    )
    assert len(h.last.records) == 2
    before = h.image.next_offset
    answers = alter(
        h,
        topic("mytopic", ("retention.ms", SET, "1000")),
        broker("", ("num.io.threads", SET, "16")),
    )
    assert answers == [ok(TOPIC_RESOURCE, "mytopic"), ok(BROKER_RESOURCE, "")]
    assert h.last.records == (cfg(BROKER_RESOURCE, "", "num.io.threads", "16"),)
    assert h.image.next_offset == before + 1


@pytest.mark.parametrize(
    "resource, error, message",
    [
        (topic("nope", ("retention.ms", SET, "1")), Errors.UNKNOWN_TOPIC_OR_PARTITION,
         "The topic 'nope' does not exist."),
        (topic("", ("retention.ms", SET, "1")), Errors.INVALID_REQUEST,
         "Default topic resources are not allowed."),
        (topic("mytopic", ("retention.mss", SET, "1")), Errors.INVALID_CONFIG,
         "Unknown topic config name: retention.mss"),
        (topic("mytopic", ("retention.ms", SET, "-2")), Errors.INVALID_CONFIG,
         "Invalid value -2 for configuration retention.ms: Value must be at least -1"),
        (topic("mytopic", ("segment.bytes", SET, "1e9")), Errors.INVALID_CONFIG,
         "Invalid value 1e9 for configuration segment.bytes: Not a number of type INT"),
        (topic("mytopic", ("preallocate", SET, "yes")), Errors.INVALID_CONFIG,
         "Invalid value yes for configuration preallocate: Expected value to be either true or false"),
        (topic("mytopic", ("cleanup.policy", SET, "compact,shred")), Errors.INVALID_CONFIG,
         "Invalid value compact,shred for configuration cleanup.policy: String must be one of: compact, delete"),
        (topic("mytopic", ("min.compaction.lag.ms", SET, "10"), ("max.compaction.lag.ms", SET, "5")),
         Errors.INVALID_CONFIG, "conflict topic config setting min.compaction.lag.ms (10) > max.compaction.lag.ms (5)"),
        (topic("mytopic", ("retention.ms", SET, None)), Errors.INVALID_REQUEST,
         "Null value not supported for : retention.ms"),
        (topic("mytopic", ("retention.ms", SET, "1"), ("retention.ms", DELETE, None)),
         Errors.INVALID_REQUEST, "Error due to duplicate config keys: retention.ms"),
        (topic("mytopic", ("retention.ms", 7, "1")), Errors.INVALID_REQUEST,
         "Unknown config operation 7 (0 SET, 1 DELETE, 2 APPEND, 3 SUBTRACT)"),
        (broker("x", ("num.io.threads", SET, "1")), Errors.INVALID_REQUEST, "Unable to parse broker name x"),
        (broker("007", ("num.io.threads", SET, "1")), Errors.INVALID_REQUEST, "Unable to parse broker name 007"),
        (broker("2147483648", ("num.io.threads", SET, "1")), Errors.INVALID_REQUEST,
         "Unable to parse broker name 2147483648"),
        (broker("-1", ("num.io.threads", SET, "1")), Errors.INVALID_REQUEST, "Invalid negative broker ID."),
        (broker("1", ("num.io.threads", SET, "0")), Errors.INVALID_CONFIG,
         "Invalid value 0 for configuration num.io.threads: Value must be at least 1"),
        (broker("", ("log.dirs", SET, "/data")), Errors.INVALID_CONFIG,
         "Cannot update these configs dynamically: log.dirs"),
        (broker("", ("log.retention.hours", SET, "a day")), Errors.INVALID_CONFIG,
         "Invalid value a day for configuration log.retention.hours: Not a number of type INT"),
        (AlterConfigsResource(8, "1", (AlterableConfig("kafka.server", SET, "DEBUG"),)),
         Errors.INVALID_REQUEST, "BROKER_LOGGER configs are not kept in the metadata log: send them to the broker itself."),
        (AlterConfigsResource(32, "g", ()), Errors.INVALID_REQUEST,
         "Unknown resource type 32 (metaquorum keeps TOPIC = 2 and BROKER = 4)"),
    ],
)  # fmt: skip
def test_refusals_name_the_problem_and_write_nothing(h, resource, error, message):
    before = h.image
    assert alter(h, resource) == [(resource.resource_type, resource.resource_name, error, message)]
    assert h.last.records == () and h.image == before


def test_a_resource_named_twice_is_refused_once_and_the_rest_decided(h):
    answers = alter(
        h,
        topic("mytopic", ("retention.ms", SET, "1")),
        broker("1", ("num.io.threads", SET, "4")),
        topic("mytopic", ("retention.ms", SET, "2")),
    )
    assert answers == [
        (TOPIC_RESOURCE, "mytopic", Errors.INVALID_REQUEST, "Duplicate resource."),
        ok(BROKER_RESOURCE, "1"),
    ]
    assert h.last.records == (cfg(BROKER_RESOURCE, "1", "num.io.threads", "4"),)


def test_custom_broker_configs_pass_as_kafka_lets_plugins_read_them(h):
    assert alter(h, broker("2", ("my.plugin.mode", SET, "fast"))) == [ok(BROKER_RESOURCE, "2")]
    assert h.image.broker_configs == {"2": {"my.plugin.mode": "fast"}}
    # Only LIST keys split: a custom key has no type, so no APPEND.
    assert alter(h, broker("2", ("my.plugin.mode", APPEND, "x")))[0][2] is Errors.INVALID_CONFIG


def test_validate_only_answers_as_a_real_request_and_writes_nothing(h):
    before = h.image
    answers = alter(
        h,
        topic("mytopic", ("retention.ms", SET, "1")),
        topic("nope", ("retention.ms", SET, "1")),
        validate_only=True,
    )
    assert answers == [
        ok(TOPIC_RESOURCE, "mytopic"),
        (
            TOPIC_RESOURCE,
            "nope",
            Errors.UNKNOWN_TOPIC_OR_PARTITION,
            "The topic 'nope' does not exist.",
        ),
    ]
    assert h.last.records == () and h.image == before


def test_deleting_the_last_config_of_a_broker_removes_the_resource(h):
    alter(h, broker("", ("num.io.threads", SET, "4"), ("background.threads", SET, "2")))
    assert h.image.broker_configs == {"": {"num.io.threads": "4", "background.threads": "2"}}
    alter(h, broker("", ("num.io.threads", DELETE, None), ("background.threads", DELETE, None)))
    assert h.image.broker_configs == {}


def test_a_deleted_topic_takes_its_configs_and_a_new_one_of_that_name_starts_clean(h):
    alter(h, topic("mytopic", ("retention.ms", SET, "1")))
    h.run(DeleteTopicsRequest(("mytopic",)))
    h.create_topic("mytopic", 1, 3)
    assert h.image.topic_by_name("mytopic").configs == {}


def test_the_cluster_default_makes_leaderless_partitions_elect_uncleanly(h):
    """unclean.leader.election.enable resolves topic -> cluster default ->
    false; the periodic sweep then elects the partitions it allows."""
    h.create_topic("t", assignments=((0, (1, 2)),))
    h.heartbeat(2, want_fence=True)
    h.heartbeat(1, want_fence=True)
    assert h.partition("t").leader == -1 and h.partition("t").isr == (1,)
    h.heartbeat(2)
    h.heartbeat(2)  # unfenced: 2 is alive but out of the ISR
    assert h.partition("t").leader == -1

    alter(h, broker("", ("unclean.leader.election.enable", SET, "true")))
    h.advance(h.config.unclean_election_interval_ms)
    result = h.controller.maybe_elect_unclean_leaders(h.now_ms)
    h.commit(result.records)
    assert h.partition("t").leader == 2 and h.partition("t").isr == (2,)

    # A topic's own false wins over the cluster default.
    h.create_topic(
        "u", assignments=((0, (3, 1)),), configs=(("unclean.leader.election.enable", "false"),)
    )
    assert h.controller.replication.election_for(h.topic_id("u")).name == "ONLINE"
    assert h.controller.replication.election_for(h.topic_id("t")).name == "UNCLEAN"


def test_past_the_record_cap_every_resource_is_refused_and_nothing_written(h):
    resources = [
        broker(str(b), *((f"custom.{i}", SET, "v") for i in range(64))) for b in range(160)
    ]
    before = h.image
    answers = alter(h, *resources)
    assert len(answers) == 160
    assert {(a[2], a[3].split(":")[0]) for a in answers} == {
        (Errors.POLICY_VIOLATION, "Unable to perform excessively large batch operation")
    }
    assert h.last.records == () and h.image == before
