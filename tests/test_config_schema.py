"""Kafka's config definitions and their resolution (metadata_records.config_schema)."""

import pytest

from metadata_records.config_schema import (
    BROKER_CONFIGS,
    TOPIC_CONFIGS,
    ConfigKey,
    ConfigSource,
    ConfigType,
    ResourceType,
    broker_configs_problem,
    config_type,
    describe_broker_configs,
    is_sensitive,
    parse,
    resolve_topic_configs,
    topic_config_value,
    topic_configs_problem,
)

S = ConfigSource


def effective(topic=None, cluster=None, **kw):
    return {e.name: e for e in resolve_topic_configs(topic or {}, cluster or {}, **kw)}


def test_every_default_passes_its_own_check():
    for key in (*TOPIC_CONFIGS.values(), *BROKER_CONFIGS.values()):
        if key.default is not None:
            parse(key, key.default)
    assert topic_configs_problem({k.name: k.default for k in TOPIC_CONFIGS.values()}) is None


def test_resolution_order_topic_broker_cluster_static_default():
    name = "retention.ms"
    levels = dict(
        topic={name: "1"},
        broker={"log.retention.ms": "2"},
        cluster={"log.retention.ms": "3"},
        static={"log.retention.ms": "4"},
    )
    want = [
        (S.TOPIC_CONFIG, "1"),
        (S.DYNAMIC_BROKER_CONFIG, "2"),
        (S.DYNAMIC_DEFAULT_BROKER_CONFIG, "3"),
        (S.STATIC_BROKER_CONFIG, "4"),
        (S.DEFAULT_CONFIG, "604800000"),
    ]
    for drop in range(5):
        entry = effective(**{k: v for i, (k, v) in enumerate(levels.items()) if i >= drop})[name]
        assert (entry.source, entry.value) == want[drop]
        assert [(s, v) for s, _, v in entry.synonyms] == want[drop:]


def test_hours_and_minutes_synonyms_become_milliseconds_and_ms_wins():
    entry = effective({}, {"log.retention.hours": "24"})["retention.ms"]
    assert (entry.source, entry.value) == (S.DYNAMIC_DEFAULT_BROKER_CONFIG, "86400000")
    assert entry.synonyms[0][1] == "log.retention.hours"
    both = effective({}, {"log.retention.minutes": "1", "log.retention.ms": "5"})["retention.ms"]
    assert both.value == "5" and [n for _, n, _ in both.synonyms] == [
        "log.retention.ms",
        "log.retention.minutes",
        "retention.ms",
    ]


def test_the_controller_value_is_the_same_resolution():
    for topic, cluster in [
        ({}, {}),
        ({}, {"log.retention.hours": "2"}),
        ({"retention.ms": "7"}, {}),
    ]:
        want = effective(topic, cluster)["retention.ms"].value
        assert topic_config_value("retention.ms", topic, cluster) == want
    assert topic_config_value("unclean.leader.election.enable", {}, {}) == "false"


def test_every_topic_config_appears_once_with_its_type():
    entries = resolve_topic_configs({}, {})
    assert [e.name for e in entries] == list(TOPIC_CONFIGS)
    assert effective({}, {})["cleanup.policy"].type is ConfigType.LIST


@pytest.mark.parametrize(
    "configs, problem",
    [
        ({"retention.ms": " 100 "}, None),
        ({"min.cleanable.dirty.ratio": "1.5"}, "Value must be no more than 1"),
        ({"min.cleanable.dirty.ratio": "nan"}, "Not a number of type DOUBLE"),
        ({"max.message.bytes": "2147483648"}, "Not a number of type INT"),
        ({"compression.gzip.level": "0"}, "between 1 and 9, or -1"),
        ({"compression.gzip.level": "-1"}, None),
        ({"leader.replication.throttled.replicas": "*"}, None),
        ({"leader.replication.throttled.replicas": "0:1,x"}, "must be the literal '*'"),
        ({"cleanup.policy": ""}, None),
        ({"retention.ms": None}, "Null value not supported for topic configs: retention.ms"),
    ],
)
def test_topic_checks(configs, problem):
    found = topic_configs_problem(configs)
    assert found is None if problem is None else problem in found


def test_broker_checks_know_kafka_names_and_pass_custom_ones():
    assert broker_configs_problem({"my.plugin": "anything"}) is None
    assert "at least 0" in broker_configs_problem({"leader.replication.throttled.rate": "-1"})
    assert "dynamically: broker.id, node.id" in broker_configs_problem(
        {"node.id": "1", "broker.id": "1"}
    )


def test_describing_a_broker_resolves_broker_then_cluster_then_default():
    entries = {e.name: e for e in describe_broker_configs("1", {"num.io.threads": "16"}, {
        "num.io.threads": "12", "background.threads": "4", "custom.x": "y"})}  # fmt: skip
    assert (entries["num.io.threads"].source, entries["num.io.threads"].value) == (
        S.DYNAMIC_BROKER_CONFIG,
        "16",
    )
    assert [s for s, _, _ in entries["num.io.threads"].synonyms] == [
        S.DYNAMIC_BROKER_CONFIG,
        S.DYNAMIC_DEFAULT_BROKER_CONFIG,
        S.DEFAULT_CONFIG,
    ]
    assert entries["background.threads"].source is S.DYNAMIC_DEFAULT_BROKER_CONFIG
    assert entries["num.network.threads"].source is S.DEFAULT_CONFIG
    assert entries["custom.x"].type is ConfigType.UNKNOWN
    # The cluster default resource shows only what is set there, as Kafka's.
    default = describe_broker_configs("", {}, {"num.io.threads": "12"})
    assert [(e.name, e.value, e.source) for e in default] == [
        ("num.io.threads", "12", S.DYNAMIC_DEFAULT_BROKER_CONFIG)
    ]


# Kafka's dynamic broker configs of type PASSWORD (KafkaConfig's definitions of
# SslConfigs.RECONFIGURABLE_CONFIGS and sasl.jaas.config).
KAFKA_DYNAMIC_PASSWORDS = (
    "sasl.jaas.config",
    "ssl.key.password",
    "ssl.keystore.certificate.chain",
    "ssl.keystore.key",
    "ssl.keystore.password",
    "ssl.truststore.certificates",
    "ssl.truststore.password",
)


def test_kafka_dynamic_passwords_are_known_as_passwords():
    for name in KAFKA_DYNAMIC_PASSWORDS:
        assert BROKER_CONFIGS[name].type is ConfigType.PASSWORD, name
        assert BROKER_CONFIGS[name].sensitive, name
    assert {k.name for k in BROKER_CONFIGS.values() if k.sensitive} == set(KAFKA_DYNAMIC_PASSWORDS)
    assert not any(k.sensitive for k in TOPIC_CONFIGS.values())
    # Not dynamic in Kafka: refused, as Kafka refuses them.
    assert "dynamically: password.encoder.secret" in broker_configs_problem(
        {"password.encoder.secret": "s"}
    )


@pytest.mark.parametrize(
    "resource, name, kind, sensitive",
    [
        (ResourceType.BROKER, "ssl.keystore.password", ConfigType.PASSWORD, True),
        (ResourceType.BROKER, "num.io.threads", ConfigType.INT, False),
        (ResourceType.BROKER, "log.retention.hours", ConfigType.INT, False),
        (ResourceType.BROKER, "my.plugin.secret", ConfigType.UNKNOWN, True),
        # Per listener: the type of the config after the listener prefix, as
        # Kafka's KafkaConfig.configType over brokerConfigSynonyms.
        (ResourceType.BROKER, "listener.name.internal.ssl.keystore.password", ConfigType.PASSWORD, True),
        (ResourceType.BROKER, "listener.name.internal.sasl.jaas.config", ConfigType.PASSWORD, True),
        (ResourceType.BROKER, "listener.name.internal.plain.sasl.jaas.config", ConfigType.PASSWORD, True),
        (ResourceType.BROKER, "listener.name.internal.ssl.keystore.type", ConfigType.STRING, False),
        (ResourceType.BROKER, "listener.name.internal.max.connections", ConfigType.INT, False),
        (ResourceType.BROKER, "listener.name.internal.sasl.enabled.mechanisms", ConfigType.UNKNOWN, True),
        (ResourceType.BROKER, "listener.name.ssl.keystore.password", ConfigType.UNKNOWN, True),
        (ResourceType.TOPIC, "retention.ms", ConfigType.LONG, False),
        (ResourceType.TOPIC, "ssl.keystore.password", ConfigType.UNKNOWN, True),
        (ResourceType.BROKER_LOGGER, "kafka.server", ConfigType.UNKNOWN, True),
    ],
)  # fmt: skip
def test_a_password_or_a_config_of_unknown_type_is_sensitive(resource, name, kind, sensitive):
    assert config_type(resource, name) is kind
    assert is_sensitive(resource, name) is sensitive


def test_describing_a_broker_marks_sensitive_entries_and_keeps_their_values():
    entries = {e.name: e for e in describe_broker_configs("1", {
        "ssl.keystore.password": "k", "listener.name.a.ssl.key.password": "p", "x.y": "z"}, {})}  # fmt: skip
    assert [
        (n, entries[n].value, entries[n].type, entries[n].sensitive)
        for n in ("ssl.keystore.password", "listener.name.a.ssl.key.password", "x.y")
    ] == [
        ("ssl.keystore.password", "k", ConfigType.PASSWORD, True),
        ("listener.name.a.ssl.key.password", "p", ConfigType.PASSWORD, True),
        ("x.y", "z", ConfigType.UNKNOWN, True),
    ]
    assert not entries["num.io.threads"].sensitive
    assert not any(e.sensitive for e in resolve_topic_configs({}, {}))


def test_a_refused_sensitive_value_is_not_echoed():
    with pytest.raises(ValueError, match=r"^Invalid value \[hidden\] for configuration p: no") as e:
        parse(ConfigKey("p", ConfigType.PASSWORD, None, "", lambda v: "no"), "hunter2")
    assert "hunter2" not in str(e.value)
    with pytest.raises(ValueError, match="^Invalid value x for configuration i: Not a number"):
        parse(ConfigKey("i", ConfigType.INT, None, ""), "x")
