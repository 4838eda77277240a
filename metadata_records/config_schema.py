"""Kafka's config definitions for the resources the controller keeps configs
of: topics (Kafka's ``LogConfig``) and brokers (the dynamic broker configs of
``DynamicBrokerConfig``), with their types, defaults and validators, and the
broker synonyms a topic config falls back to (``KafkaConfigSchema``).

Pure data and functions over plain dicts, so a broker can resolve its topics'
configs from its own metadata cache exactly as the controller does:

    effective = resolve_topic_configs(topic.configs, image.broker_configs.get("", {}))

Resolution order (Kafka's ``resolveEffectiveTopicConfig``): the topic's own
value, then a synonym set for the broker (``broker``: the describing broker's
dynamic configs), then a synonym set as the cluster default, then the broker's
static file (``static``), then Kafka's default. The controller passes no
broker and no static file, so its decisions are a function of the log alone
(docs/decisions.md 102).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import IntEnum

from .records import BROKER_RESOURCE, TOPIC_RESOURCE


class ConfigType(IntEnum):
    """DescribeConfigsResponse's configType (Kafka's ConfigDef.Type ids)."""

    UNKNOWN = 0
    BOOLEAN = 1
    STRING = 2
    INT = 3
    SHORT = 4
    LONG = 5
    DOUBLE = 6
    LIST = 7
    CLASS = 8
    PASSWORD = 9


# An enum member looked up once: ``ConfigType.PASSWORD`` costs about 0.5 us
# each time, and is_sensitive runs per ConfigRecord a read caller is shown.
_PASSWORD = ConfigType.PASSWORD


class ConfigSource(IntEnum):
    """DescribeConfigsResponse's configSource: where an effective value came from."""

    UNKNOWN = 0
    TOPIC_CONFIG = 1
    DYNAMIC_BROKER_CONFIG = 2
    DYNAMIC_DEFAULT_BROKER_CONFIG = 3
    STATIC_BROKER_CONFIG = 4
    DEFAULT_CONFIG = 5


class ResourceType(IntEnum):
    """Kafka's ConfigResource.Type ids; the controller keeps TOPIC and BROKER."""

    UNKNOWN = 0
    TOPIC = TOPIC_RESOURCE
    BROKER = BROKER_RESOURCE
    BROKER_LOGGER = 8
    CLIENT_METRICS = 16
    GROUP = 32


class OpType(IntEnum):
    """IncrementalAlterConfigs' configOperation (Kafka's AlterConfigOp.OpType)."""

    SET = 0
    DELETE = 1
    APPEND = 2
    SUBTRACT = 3


LONG_MAX = 2**63 - 1
HIDDEN = "[hidden]"  # a sensitive value in a message (Kafka's Password.toString)
_INT = (-(2**31), 2**31 - 1)
_LONG = (-(2**63), LONG_MAX)

Check = Callable[[object], str | None]


def at_least(low: float) -> Check:
    """Kafka's Range.atLeast."""
    return lambda v: None if v >= low else f"Value must be at least {low}"


def between(low: float, high: float) -> Check:
    """Kafka's Range.between."""

    def check(v: object) -> str | None:
        if v < low:
            return f"Value must be at least {low}"
        if v > high:
            return f"Value must be no more than {high}"
        return None

    return check


def one_of(*allowed: str) -> Check:
    """Kafka's ValidString.in (a LIST checks each element)."""

    def check(v: object) -> str | None:
        values = v if isinstance(v, list) else [v]
        bad = [x for x in values if x not in allowed]
        return None if not bad else f"String must be one of: {', '.join(allowed)}"

    return check


def _gzip_level(v: object) -> str | None:
    # GzipCompression.LevelValidator: 1-9, or -1 (Deflater.DEFAULT_COMPRESSION).
    return None if v == -1 or 1 <= v <= 9 else "Value must be between 1 and 9, or -1"


_REPLICA = re.compile(r"\d+:\d+")


def _throttled_replicas(v: object) -> str | None:
    # Kafka's ThrottledReplicaListValidator.
    if v == ["*"] or all(_REPLICA.fullmatch(x) for x in v):
        return None
    return (
        "must be the literal '*' or a list of replicas in the following format: "
        "[partitionId]:[brokerId],[partitionId]:[brokerId],..."
    )


@dataclass(frozen=True, slots=True)
class Synonym:
    """A broker config a topic config falls back to; values times ``to_ms``
    (log.retention.hours counts hours, retention.ms milliseconds)."""

    name: str
    to_ms: int = 1


@dataclass(frozen=True, slots=True)
class ConfigKey:
    name: str
    type: ConfigType
    default: str | None
    doc: str
    check: Check | None = None
    synonyms: tuple[Synonym, ...] = ()

    @property
    def sensitive(self) -> bool:
        """Kafka's ConfigDef.Type.isSensitive: a PASSWORD's value is never shown."""
        return self.type is _PASSWORD


def _key(name, type_, default, doc, check=None, *synonyms) -> ConfigKey:
    syns = tuple(s if isinstance(s, Synonym) else Synonym(s) for s in synonyms)
    return ConfigKey(name, type_, default, doc, check, syns)


B, S, INT, L, D, LS, P = (
    ConfigType.BOOLEAN,
    ConfigType.STRING,
    ConfigType.INT,
    ConfigType.LONG,
    ConfigType.DOUBLE,
    ConfigType.LIST,
    ConfigType.PASSWORD,
)
HOUR_MS, MINUTE_MS = 3_600_000, 60_000
COMPRESSION_TYPES = ("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")

# Kafka 4.0's topic configs (TopicConfig / LogConfig), with their broker synonyms.
TOPIC_CONFIGS: dict[str, ConfigKey] = {
    k.name: k
    for k in (
        _key("cleanup.policy", LS, "delete", "delete and/or compact old segments",
             one_of("compact", "delete"), "log.cleanup.policy"),
        _key("compression.type", S, "producer", "the final compression of the topic's data",
             one_of(*COMPRESSION_TYPES), "compression.type"),
        _key("compression.gzip.level", INT, "-1", "gzip level when compression.type is gzip",
             _gzip_level, "compression.gzip.level"),
        _key("compression.lz4.level", INT, "9", "lz4 level when compression.type is lz4",
             between(1, 17), "compression.lz4.level"),
        _key("compression.zstd.level", INT, "3", "zstd level when compression.type is zstd",
             between(-131072, 22), "compression.zstd.level"),
        _key("delete.retention.ms", L, "86400000", "how long compaction tombstones are kept",
             at_least(0), "log.cleaner.delete.retention.ms"),
        _key("file.delete.delay.ms", L, "60000", "delay before a deleted segment's file goes",
             at_least(0), "log.segment.delete.delay.ms"),
        _key("flush.messages", L, str(LONG_MAX), "messages between forced fsyncs",
             at_least(1), "log.flush.interval.messages"),
        _key("flush.ms", L, str(LONG_MAX), "time between forced fsyncs",
             at_least(0), "log.flush.interval.ms"),
        _key("follower.replication.throttled.replicas", LS, "", "replicas throttled on the follower side",
             _throttled_replicas),
        _key("index.interval.bytes", INT, "4096", "bytes between offset index entries",
             at_least(0), "log.index.interval.bytes"),
        _key("leader.replication.throttled.replicas", LS, "", "replicas throttled on the leader side",
             _throttled_replicas),
        _key("local.retention.bytes", L, "-2", "local bytes kept with tiered storage (-2: retention.bytes)",
             at_least(-2), "log.local.retention.bytes"),
        _key("local.retention.ms", L, "-2", "local time kept with tiered storage (-2: retention.ms)",
             at_least(-2), "log.local.retention.ms"),
        _key("max.compaction.lag.ms", L, str(LONG_MAX), "longest a message stays uncompacted",
             at_least(1), "log.cleaner.max.compaction.lag.ms"),
        _key("max.message.bytes", INT, "1048588", "the largest record batch",
             at_least(0), "message.max.bytes"),
        _key("message.timestamp.after.max.ms", L, "3600000", "how far ahead of the broker a timestamp may be",
             at_least(0), "log.message.timestamp.after.max.ms"),
        _key("message.timestamp.before.max.ms", L, str(LONG_MAX), "how far behind the broker a timestamp may be",
             at_least(0), "log.message.timestamp.before.max.ms"),
        _key("message.timestamp.type", S, "CreateTime", "CreateTime or LogAppendTime",
             one_of("CreateTime", "LogAppendTime"), "log.message.timestamp.type"),
        _key("min.cleanable.dirty.ratio", D, "0.5", "dirty share of a log that starts compaction",
             between(0, 1), "log.cleaner.min.cleanable.ratio"),
        _key("min.compaction.lag.ms", L, "0", "shortest a message stays uncompacted",
             at_least(0), "log.cleaner.min.compaction.lag.ms"),
        _key("min.insync.replicas", INT, "1", "ISR size an acks=all write needs",
             at_least(1), "min.insync.replicas"),
        _key("preallocate", B, "false", "preallocate segment files", None, "log.preallocate"),
        _key("remote.log.copy.disable", B, "false", "stop copying to tiered storage"),
        _key("remote.log.delete.on.disable", B, "false", "delete tiered data when tiering is turned off"),
        _key("remote.storage.enable", B, "false", "tiered storage for the topic"),
        _key("retention.bytes", L, "-1", "bytes a partition keeps (-1: no limit)",
             None, "log.retention.bytes"),
        _key("retention.ms", L, "604800000", "time a segment is kept (-1: no limit)",
             at_least(-1), "log.retention.ms", Synonym("log.retention.minutes", MINUTE_MS),
             Synonym("log.retention.hours", HOUR_MS)),
        _key("segment.bytes", INT, "1073741824", "size of a segment file",
             at_least(1048576), "log.segment.bytes"),
        _key("segment.index.bytes", INT, "10485760", "size of a segment's offset index",
             at_least(4), "log.index.size.max.bytes"),
        _key("segment.jitter.ms", L, "0", "random jitter subtracted from segment.ms",
             at_least(0), "log.roll.jitter.ms", Synonym("log.roll.jitter.hours", HOUR_MS)),
        _key("segment.ms", L, "604800000", "time after which a segment rolls",
             at_least(1), "log.roll.ms", Synonym("log.roll.hours", HOUR_MS)),
        _key("unclean.leader.election.enable", B, "false",
             "elect an out-of-sync replica when no ISR member may lead (data loss)",
             None, "unclean.leader.election.enable"),
    )
}  # fmt: skip
UNCLEAN_LEADER_ELECTION_ENABLE = "unclean.leader.election.enable"
MIN_INSYNC_REPLICAS = "min.insync.replicas"


def _broker_synonyms() -> dict[str, ConfigKey]:
    """Every broker synonym of a topic config, with its topic config's type and
    check (hours and minutes are INTs of at least 1 in KafkaConfig)."""
    keys = {}
    for topic_key in TOPIC_CONFIGS.values():
        for syn in topic_key.synonyms:
            if syn.to_ms == 1:
                keys[syn.name] = ConfigKey(
                    syn.name, topic_key.type, topic_key.default, topic_key.doc, topic_key.check
                )
            else:
                keys[syn.name] = ConfigKey(syn.name, INT, None, topic_key.doc, at_least(0))
    return keys


# Kafka's dynamic broker configs that metaquorum type-checks: the topic
# defaults above under their broker names, the common per-broker ones, and the
# keystores and truststores a broker reloads (Kafka's DynamicBrokerConfig
# .DynamicSecurityConfigs, SslConfigs.RECONFIGURABLE_CONFIGS, and sasl.jaas.config
# of DynamicListenerConfig), with Kafka's types: their PASSWORDs are never shown
# (``is_sensitive``). Other names are accepted as they are (plugins' custom
# configs), as Kafka does, and are shown as sensitive, since their type is unknown.
BROKER_CONFIGS: dict[str, ConfigKey] = {
    **_broker_synonyms(),
    **{
        k.name: k
        for k in (
            _key("background.threads", INT, "10", "threads for background tasks", at_least(1)),
            _key("follower.replication.throttled.rate", L, str(LONG_MAX), "follower throttle, bytes/s", at_least(0)),
            _key("leader.replication.throttled.rate", L, str(LONG_MAX), "leader throttle, bytes/s", at_least(0)),
            _key("log.cleaner.threads", INT, "1", "log cleaner threads", at_least(0)),
            _key("max.connection.creation.rate", INT, str(2**31 - 1), "new connections per second", at_least(0)),
            _key("max.connections", INT, str(2**31 - 1), "connections the broker accepts", at_least(0)),
            _key("max.connections.per.ip", INT, str(2**31 - 1), "connections per client address", at_least(0)),
            _key("num.io.threads", INT, "8", "request handler threads", at_least(1)),
            _key("num.network.threads", INT, "3", "network threads", at_least(1)),
            _key("num.recovery.threads.per.data.dir", INT, "2", "log recovery threads", at_least(1)),
            _key("num.replica.fetchers", INT, "1", "replica fetcher threads", at_least(1)),
            _key("replica.alter.log.dirs.io.max.bytes.per.second", L, str(LONG_MAX),
                 "bytes/s moved between log dirs", at_least(0)),
            _key("sasl.jaas.config", P, None, "the JAAS login context of SASL connections"),
            _key("ssl.key.password", P, None, "the password of the key in the keystore"),
            _key("ssl.keystore.certificate.chain", P, None, "the certificate chain, PEM"),
            _key("ssl.keystore.key", P, None, "the private key, PEM"),
            _key("ssl.keystore.location", S, None, "the keystore file"),
            _key("ssl.keystore.password", P, None, "the keystore's password"),
            _key("ssl.keystore.type", S, "JKS", "the keystore's file format"),
            _key("ssl.truststore.certificates", P, None, "the trusted certificates, PEM"),
            _key("ssl.truststore.location", S, None, "the truststore file"),
            _key("ssl.truststore.password", P, None, "the truststore's password"),
            _key("ssl.truststore.type", S, "JKS", "the truststore's file format"),
        )
    },
}  # fmt: skip

# Broker configs Kafka only reads from the broker's file ("Cannot update these
# configs dynamically"): a dynamic value would be silently ignored.
STATIC_BROKER_CONFIGS = frozenset(
    (
        "broker.id",
        "node.id",
        "process.roles",
        "log.dir",
        "log.dirs",
        "controller.listener.names",
        "controller.quorum.voters",
        "controller.quorum.bootstrap.servers",
        "inter.broker.listener.name",
        "broker.rack",
        # PASSWORDs that encode the others in Kafka's ZooKeeper days; read from
        # the file only (Kafka's PasswordEncoderConfigs are not dynamic).
        "password.encoder.secret",
        "password.encoder.old.secret",
    )
)

# Kafka's DynamicBrokerConfig.ListenerConfigRegex: a config set for one
# listener, ``listener.name.<listener>.<config>``.
_LISTENER_CONFIG = re.compile(r"listener\.name\.[^.]*\.(.*)")
LISTENER_PREFIX = "listener.name."


def _broker_key(name: str) -> ConfigKey | None:
    """The known broker config ``name`` sets: itself, or for a per-listener
    name the config after the listener prefix, or after the listener and SASL
    mechanism prefixes (``listener.name.internal.plain.sasl.jaas.config``):
    Kafka's KafkaConfig.configType over DynamicBrokerConfig.brokerConfigSynonyms
    (name, matchListenerOverride = true), the first one known."""
    key = BROKER_CONFIGS.get(name)
    if key is not None or not name.startswith(LISTENER_PREFIX):
        return key
    match = _LISTENER_CONFIG.fullmatch(name)
    if match is None:
        return None
    base = match.group(1)
    return BROKER_CONFIGS.get(base) or BROKER_CONFIGS.get(base[base.find(".") + 1 :])


def _config_key(resource_type: int, name: str) -> ConfigKey | None:
    if resource_type == TOPIC_RESOURCE:
        return TOPIC_CONFIGS.get(name)
    if resource_type == BROKER_RESOURCE:
        return _broker_key(name)
    return None


def config_type(resource_type: int, name: str) -> ConfigType:
    """A config's type as this service knows it (UNKNOWN: a custom config, or
    one of a resource type it keeps no definitions of)."""
    key = _config_key(resource_type, name)
    return ConfigType.UNKNOWN if key is None else key.type


def is_sensitive(resource_type: int, name: str) -> bool:
    """Whether a config's value is kept from whoever reads it: a PASSWORD, or a
    config whose type is unknown, since it may hold one (Kafka's
    KafkaConfigSchema.isSensitive and KafkaConfig.maybeSensitive). The one
    test of every surface that shows a config value: DescribeConfigs shows
    null (``ConfigEntry.sensitive``), the log and the export a marker
    (``metadata_records.redaction``)."""
    key = _config_key(resource_type, name)
    return key is None or key.type is _PASSWORD


# ---------------------------------------------------------------- parsing


def parse(key: ConfigKey, value: str) -> object:
    """Kafka's ConfigDef.parseType, then the key's validator. Raises ValueError
    with Kafka's message ("Invalid value X for configuration Y: ..."); a
    sensitive value is shown as Kafka's Password.toString shows it, "[hidden]"."""
    text = value.strip()
    shown = HIDDEN if key.sensitive else value
    try:
        parsed = _parse_type(key.type, text)
    except ValueError as e:
        raise ValueError(f"Invalid value {shown} for configuration {key.name}: {e}") from None
    problem = key.check(parsed) if key.check is not None else None
    if problem is not None:
        raise ValueError(f"Invalid value {shown} for configuration {key.name}: {problem}")
    return parsed


def _parse_type(kind: ConfigType, text: str) -> object:
    if kind is ConfigType.BOOLEAN:
        if text.lower() in ("true", "false"):
            return text.lower() == "true"
        raise ValueError("Expected value to be either true or false")
    if kind in (ConfigType.INT, ConfigType.LONG):
        low, high = _INT if kind is ConfigType.INT else _LONG
        if re.fullmatch(r"[+-]?\d+", text) and low <= int(text) <= high:
            return int(text)
        raise ValueError(f"Not a number of type {kind.name}")
    if kind is ConfigType.DOUBLE:
        try:
            number = float(text)
        except ValueError:
            number = math.nan
        if math.isnan(number) or math.isinf(number):
            raise ValueError("Not a number of type DOUBLE")
        return number
    if kind is ConfigType.LIST:
        return [] if not text else re.split(r"\s*,\s*", text)
    return text


def default_value(resource_type: int, name: str) -> str | None:
    key = (TOPIC_CONFIGS if resource_type == TOPIC_RESOURCE else BROKER_CONFIGS).get(name)
    return None if key is None else key.default


def list_parts(resource_type: int, name: str, value: str | None) -> list[str]:
    """A LIST value's elements (Kafka's getParts: the default when unset,
    empty elements dropped)."""
    if value is None:
        value = default_value(resource_type, name)
    return [] if value is None else [p for p in value.split(",") if p]


def is_splittable(resource_type: int, name: str) -> bool:
    """Whether APPEND and SUBTRACT apply (Kafka's KafkaConfigSchema.isSplittable)."""
    key = (TOPIC_CONFIGS if resource_type == TOPIC_RESOURCE else BROKER_CONFIGS).get(name)
    return key is not None and key.type is ConfigType.LIST


def topic_configs_problem(configs: Mapping[str, str | None]) -> str | None:
    """Why a topic's whole set of configs is invalid (Kafka's LogConfig.validate),
    or None."""
    nulls = sorted(n for n, v in configs.items() if v is None)
    if nulls:
        return f"Null value not supported for topic configs: {','.join(nulls)}"
    parsed = {}
    for name, value in sorted(configs.items()):
        key = TOPIC_CONFIGS.get(name)
        if key is None:
            return f"Unknown topic config name: {name}"
        try:
            parsed[name] = parse(key, value)
        except ValueError as e:
            return str(e)
    low = parsed.get("min.compaction.lag.ms", 0)
    high = parsed.get("max.compaction.lag.ms", LONG_MAX)
    if low > high:
        return (
            f"conflict topic config setting min.compaction.lag.ms ({low}) > "
            f"max.compaction.lag.ms ({high})"
        )
    return None


def broker_configs_problem(configs: Mapping[str, str | None]) -> str | None:
    """Why a broker's (or the cluster default's) dynamic configs are invalid, or
    None: static-only names refused, known names type-checked (Kafka's
    DynamicBrokerConfig.validate); other names pass as custom configs. No
    message holds a sensitive value (``parse``)."""
    static = sorted(n for n in configs if n in STATIC_BROKER_CONFIGS)
    if static:
        return f"Cannot update these configs dynamically: {', '.join(static)}"
    for name, value in sorted(configs.items()):
        key = BROKER_CONFIGS.get(name)
        if key is not None and value is not None:
            try:
                parse(key, value)
            except ValueError as e:
                return str(e)
    return None


# ---------------------------------------------------------------- resolution


@dataclass(frozen=True, slots=True)
class ConfigEntry:
    """One config as DescribeConfigs reports it, with the values it overrides
    (``synonyms``: source, name, value; the effective one first). A
    ``sensitive`` entry keeps its values here, for a broker resolving its own
    configs; DescribeConfigs' answer shows them as null (api/reads.configs_obj)."""

    name: str
    value: str | None
    source: ConfigSource
    type: ConfigType
    doc: str
    sensitive: bool = False
    read_only: bool = False
    synonyms: tuple[tuple[ConfigSource, str, str | None], ...] = ()


def _in_ms(value: str, to_ms: int) -> str:
    try:
        return str(int(value.strip()) * to_ms) if to_ms != 1 else value
    except ValueError:
        return value  # not a number: reported as set, the broker refuses it


def resolve_topic_config(
    key: ConfigKey,
    topic: Mapping[str, str],
    cluster: Mapping[str, str],
    broker: Mapping[str, str] | None = None,
    static: Mapping[str, str] | None = None,
) -> ConfigEntry:
    """One topic config's effective value and every level that sets it."""
    levels: list[tuple[ConfigSource, str, str | None]] = []
    if key.name in topic:
        levels.append((ConfigSource.TOPIC_CONFIG, key.name, topic[key.name]))
    for source, configs in (
        (ConfigSource.DYNAMIC_BROKER_CONFIG, broker),
        (ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG, cluster),
        (ConfigSource.STATIC_BROKER_CONFIG, static),
    ):
        for syn in key.synonyms:
            if configs and syn.name in configs:
                levels.append((source, syn.name, _in_ms(configs[syn.name], syn.to_ms)))
    levels.append((ConfigSource.DEFAULT_CONFIG, key.name, key.default))
    source, _, value = levels[0]
    return ConfigEntry(
        key.name, value, source, key.type, key.doc, sensitive=key.sensitive, synonyms=tuple(levels)
    )


def resolve_topic_configs(
    topic: Mapping[str, str],
    cluster: Mapping[str, str],
    broker: Mapping[str, str] | None = None,
    static: Mapping[str, str] | None = None,
) -> list[ConfigEntry]:
    """Every topic config, resolved (Kafka's resolveEffectiveTopicConfigs)."""
    return [
        resolve_topic_config(key, topic, cluster, broker, static) for key in TOPIC_CONFIGS.values()
    ]


def topic_config_value(name: str, topic: Mapping[str, str], cluster: Mapping[str, str]) -> str:
    """The value the controller decides with (``resolve_topic_config`` without
    the entry it builds, as this runs per partition): the topic's, else the
    cluster default's synonym, else Kafka's default."""
    value = topic.get(name)
    if value is not None:
        return value
    key = TOPIC_CONFIGS[name]
    for syn in key.synonyms if cluster else ():
        if syn.name in cluster:
            return _in_ms(cluster[syn.name], syn.to_ms)
    return key.default or ""


def describe_broker_configs(
    broker_id: str, broker: Mapping[str, str], cluster: Mapping[str, str]
) -> list[ConfigEntry]:
    """A broker resource's dynamic configs: for a broker id, every known
    dynamic config and every custom one set, resolved broker -> cluster default
    -> default; for "" (the cluster default), only what is set there (as
    Kafka's describe of the default resource)."""
    if broker_id == "":
        return [_broker_entry(name, [(ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG, name, v)])
                for name, v in sorted(cluster.items())]  # fmt: skip
    entries = []
    for name in sorted(BROKER_CONFIGS.keys() | broker.keys() | cluster.keys()):
        levels: list[tuple[ConfigSource, str, str | None]] = []
        if name in broker:
            levels.append((ConfigSource.DYNAMIC_BROKER_CONFIG, name, broker[name]))
        if name in cluster:
            levels.append((ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG, name, cluster[name]))
        key = BROKER_CONFIGS.get(name)
        if key is not None and key.default is not None:
            levels.append((ConfigSource.DEFAULT_CONFIG, name, key.default))
        if levels:
            entries.append(_broker_entry(name, levels))
    return entries


def _broker_entry(name: str, levels: list) -> ConfigEntry:
    key = _broker_key(name)
    source, _, value = levels[0]
    return ConfigEntry(
        name,
        value,
        source,
        key.type if key else ConfigType.UNKNOWN,
        key.doc if key else "a custom config (metaquorum does not know it): shown as sensitive",
        sensitive=is_sensitive(BROKER_RESOURCE, name),
        synonyms=tuple(levels),
    )
