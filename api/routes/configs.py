"""DescribeConfigs: a topic's, a broker's and the cluster-wide default's
configs, each resolved through the levels Kafka resolves them (the resource's
own, the cluster default, Kafka's default); metadata_records/config_schema.py
holds the rules, this module only reads them out of the image.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import FastAPI, Path
from starlette.responses import Response

from metadata_records.config_schema import (
    ResourceType,
    describe_broker_configs,
    resolve_topic_configs,
)
from metadata_records.errors import Errors

from .. import models as M
from ..openapi_doc import READ_RESPONSES, not_found
from ..reads import configs_obj
from .context import RouteContext, topic_or_404, with_offset
from .params import (
    INT32_MAX,
    ConfigurationKeys,
    Consistency,
    IncludeSynonyms,
    ReadCaller,
    TopicName,
)


def reads(app: FastAPI, ctx: RouteContext) -> None:
    @app.get(
        "/v1/configs/topics/{name}",
        operation_id="describeTopicConfigs",
        tags=["reads"],
        summary="DescribeConfigs for a topic",
        response_model=M.DescribeConfigsOut,
        responses={
            **READ_RESPONSES,
            **not_found(
                Errors.UNKNOWN_TOPIC_OR_PARTITION, "topic 'orders' does not exist", "no such topic"
            ),
        },
    )
    async def describe_topic_configs(
        name: TopicName,
        caller: ReadCaller,
        consistency: Consistency = None,
        include_synonyms: IncludeSynonyms = False,
        keys: ConfigurationKeys = None,
    ) -> Response:
        """Every topic config with its effective value: the topic's own, else
        the cluster default's broker synonym, else Kafka's default."""
        image = await ctx.read_image(consistency)
        topic = topic_or_404(image, name)
        entries = resolve_topic_configs(topic.configs, image.broker_configs.get("", {}))
        return with_offset(
            configs_obj(ResourceType.TOPIC, name, entries, include_synonyms, keys), image
        )

    @app.get(
        "/v1/configs/brokers/{id}",
        operation_id="describeBrokerConfigs",
        tags=["reads"],
        summary="DescribeConfigs for a broker",
        response_model=M.DescribeConfigsOut,
        responses=READ_RESPONSES,
    )
    async def describe_broker_configs_route(
        id: Annotated[int, Path(ge=0, le=INT32_MAX, description="the broker id")],
        caller: ReadCaller,
        consistency: Consistency = None,
        include_synonyms: IncludeSynonyms = False,
        keys: ConfigurationKeys = None,
    ) -> Response:
        """The broker's dynamic configs, resolved broker -> cluster default ->
        Kafka's default (whether or not the broker is registered: configs may
        be set before it starts)."""
        image = await ctx.read_image(consistency)
        entries = describe_broker_configs(
            str(id), image.broker_configs.get(str(id), {}), image.broker_configs.get("", {})
        )
        return with_offset(
            configs_obj(ResourceType.BROKER, str(id), entries, include_synonyms, keys), image
        )

    @app.get(
        "/v1/configs/cluster",
        operation_id="describeClusterConfigs",
        tags=["reads"],
        summary="DescribeConfigs for the cluster-wide default",
        response_model=M.DescribeConfigsOut,
        responses=READ_RESPONSES,
    )
    async def describe_cluster_configs(
        caller: ReadCaller,
        consistency: Consistency = None,
        include_synonyms: IncludeSynonyms = False,
        keys: ConfigurationKeys = None,
    ) -> Response:
        """The configs set for every broker (Kafka's BROKER resource ""): only
        what is set."""
        image = await ctx.read_image(consistency)
        entries = describe_broker_configs("", {}, image.broker_configs.get("", {}))
        return with_offset(
            configs_obj(ResourceType.BROKER, "", entries, include_synonyms, keys), image
        )
