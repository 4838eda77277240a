"""IncrementalAlterConfigs (Kafka's ``ConfigurationControlManager``, with the
checks of ``ControllerApis`` and ``ControllerConfigurationValidator``).

Configs are ``ConfigRecord``s: a topic's (resource type 2, by topic name) and
a broker's (resource type 4, by broker id, or "" for the cluster-wide
default). Each resource of a request is decided on its own and is all or
nothing: one bad key refuses the resource and none of its changes is written.
The types and checks are ``metadata_records.config_schema``'s, so a broker's
metadata cache can resolve the same values.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable

from metadata_records.config_schema import (
    OpType,
    ResourceType,
    broker_configs_problem,
    is_splittable,
    list_parts,
    topic_configs_problem,
)
from metadata_records.delta import ImageDelta
from metadata_records.errors import Errors
from metadata_records.records import ConfigRecord, Record

from .messages import (
    AlterConfigsResource,
    AlterConfigsResourceResponse,
    ControllerResult,
    IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse,
)
from .record_cap import TOO_MANY_RECORDS, over_cap
from .rejected import Rejected


def _invalid(message: str, rule: str) -> Rejected:
    return Rejected(Errors.INVALID_REQUEST, message, rule)


class ConfigurationControlManager:
    def __init__(self, view: Callable[[], ImageDelta]) -> None:
        self._view = view  # the controller's view (committed image + pending records)

    def current(self, resource_type: int, resource_name: str) -> dict[str, str]:
        """The configs set on a resource (the view: committed and pending)."""
        view = self._view()
        if resource_type == ResourceType.BROKER:
            return view.broker_configs(resource_name)
        topic_id = view.topic_id(resource_name)
        return {} if topic_id is None else view.topic_configs(topic_id)

    def incremental_alter_configs(
        self, req: IncrementalAlterConfigsRequest, now_ms: int
    ) -> ControllerResult:
        """One answer per resource, in the order each first appears; a resource
        named twice is refused once (``ControllerApis``: "Duplicate resource.")."""
        counts = Counter((r.resource_type, r.resource_name) for r in req.resources)
        records: list[Record] = []
        answers: list[AlterConfigsResourceResponse] = []
        answered: set[tuple[int, str]] = set()
        for resource in req.resources:
            key = (resource.resource_type, resource.resource_name)
            if key in answered:
                continue
            answered.add(key)
            answer = AlterConfigsResourceResponse(*key)
            try:
                if counts[key] > 1:
                    raise _invalid("Duplicate resource.", "config.resource-duplicate")
                records += self._alter(resource)
            except Rejected as r:
                answer.error, answer.error_message, answer.rule = r.code, r.message, r.rule
            answers.append(answer)
            if over_cap(records):
                refused = TOO_MANY_RECORDS
                return ControllerResult(
                    (),
                    IncrementalAlterConfigsResponse(
                        tuple(
                            AlterConfigsResourceResponse(
                                t, n, refused.error, refused.message, refused.rule
                            )
                            for t, n in dict.fromkeys(
                                (r.resource_type, r.resource_name) for r in req.resources
                            )
                        )
                    ),
                )
        response = IncrementalAlterConfigsResponse(tuple(answers))
        if req.validate_only:
            # Every check of a real request, the same answers, nothing written.
            return ControllerResult((), response)
        return ControllerResult(tuple(records), response)

    # ------------------------------------------------------------ one resource

    def _alter(self, resource: AlterConfigsResource) -> list[ConfigRecord]:
        kind, name = resource.resource_type, resource.resource_name
        self._check_resource(kind, name)
        names = Counter(c.name for c in resource.configs)
        twice = sorted(n for n, k in names.items() if k > 1)
        if twice:
            raise _invalid(
                f"Error due to duplicate config keys: {', '.join(twice)}", "config.key-duplicate"
            )
        nulls = [
            c.name
            for c in resource.configs
            if c.value is None and c.config_operation != OpType.DELETE
        ]
        if nulls:
            raise _invalid(
                f"Null value not supported for : {', '.join(nulls)}", "config.value-null"
            )

        current = self.current(kind, name)
        after = dict(current)
        records: list[ConfigRecord] = []
        for change in resource.configs:
            old = current.get(change.name)
            new = self._new_value(kind, change.name, change.config_operation, change.value, old)
            if new is None:
                after.pop(change.name, None)
            else:
                after[change.name] = new
            # KAFKA-14136: a broker resource writes even an unchanged value, so
            # brokers reload it; a topic only what changes.
            if new != old or kind == ResourceType.BROKER:
                records.append(
                    ConfigRecord(
                        resource_type=kind, resource_name=name, name=change.name, value=new
                    )
                )
        problem = (
            topic_configs_problem(after)
            if kind == ResourceType.TOPIC
            else broker_configs_problem({c.name: after.get(c.name) for c in resource.configs})
        )
        if problem is not None:
            raise Rejected(Errors.INVALID_CONFIG, problem, "config.value-invalid")
        if kind == ResourceType.TOPIC and self._view().topic_id(name) is None:
            raise Rejected(
                Errors.UNKNOWN_TOPIC_OR_PARTITION,
                f"The topic '{name}' does not exist.",
                "topic.unknown",
            )
        return records

    @staticmethod
    def _check_resource(kind: int, name: str) -> None:
        """``ControllerConfigurationValidator.validate(resource)``."""
        if kind == ResourceType.TOPIC:
            if not name:
                raise _invalid("Default topic resources are not allowed.", "config.default-topic")
        elif kind == ResourceType.BROKER:
            # Kafka takes any Integer.valueOf; "007" or "+7" would be stored
            # under a name broker 7 never reads, so only the plain form passes.
            if name and (
                not re.fullmatch(r"-?[0-9]{1,10}", name)
                or str(int(name)) != name
                or int(name) >= 2**31
            ):
                raise _invalid(f"Unable to parse broker name {name}", "config.broker-name-invalid")
            if name and int(name) < 0:
                raise _invalid("Invalid negative broker ID.", "config.broker-id-negative")
        elif kind == ResourceType.BROKER_LOGGER:
            raise _invalid(
                "BROKER_LOGGER configs are not kept in the metadata log: "
                "send them to the broker itself.",
                "config.broker-logger",
            )
        else:
            raise _invalid(
                f"Unknown resource type {kind} (metaquorum keeps TOPIC = 2 and BROKER = 4)",
                "config.resource-type-unknown",
            )

    @staticmethod
    def _new_value(kind: int, name: str, op: int, value: str | None, old: str | None) -> str | None:
        if op == OpType.SET:
            return value
        if op == OpType.DELETE:
            return None
        if op in (OpType.APPEND, OpType.SUBTRACT):
            if not is_splittable(kind, name):
                raise Rejected(
                    Errors.INVALID_CONFIG,
                    f"Can't {OpType(op).name} to key {name} because its type is not LIST.",
                    "config.not-list",
                )
            parts = list_parts(kind, name, old)
            for part in value.split(","):
                if op == OpType.APPEND and part not in parts:
                    parts.append(part)
                elif op == OpType.SUBTRACT and part in parts:
                    parts.remove(part)
            return ",".join(parts)
        raise _invalid(
            f"Unknown config operation {op} (0 SET, 1 DELETE, 2 APPEND, 3 SUBTRACT)",
            "config.op-unknown",
        )
