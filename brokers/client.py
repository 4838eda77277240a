"""An async HTTP client for metaquorum (httpx), as brokers and operators use it.

* Leader discovery: a write answered 307 is retried on the leader it names,
  and that leader is remembered; a connection error, a 503 (that voter knows
  no leader: it is cut off from the majority, or an election is on), and a
  write whose outcome is unknown (its node may be paused, cut off or
  deposed), move on to the next seed.
* Bounded retries with exponential backoff and full jitter on 503, 429 and
  connection errors, honouring ``Retry-After``.
* A write that timed out, or whose answer was lost, is an **unknown outcome**:
  the client raises ``OutcomeUnknown`` and never claims it failed (it may
  commit later; Kafka's epochs make a retry safe).
* Protocol errors (``errorCode`` != 0 with HTTP 200) are answers, not
  exceptions: they come back in the typed response for the caller to act on.
* TLS (``tls``, brokers/tls.py): the server's certificate is verified, host
  name included. A server certificate this client cannot trust raises
  ``TlsFailure`` at once, with one line saying why (unknown CA, name
  mismatch, expired): retrying would not change it. A connection the server
  drops is probed for a TLS cause (a refused client certificate), and the
  cause, if found, is the reason the request gives up with (or is named in
  its ``OutcomeUnknown``).
* The transport is a seam: ``http`` is httpx's ``AsyncClient`` (the default)
  or ``brokers/lean_http.LeanHttp`` (the simulator's hot path, a tenth of the
  CPU); both raise httpx's exceptions, so everything above is shared.
"""

from __future__ import annotations

import asyncio
import random
import ssl
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import httpx

from .lean_http import LeanHttp, LeanResponse
from .tls import ClientTls, Prober, explain, tls_error

Response = httpx.Response | LeanResponse


class ClientError(Exception):
    """The request could not be answered by any controller."""


class OutcomeUnknown(ClientError):
    """The write may or may not have committed."""


class TlsFailure(ClientError):
    """No TLS connection this client may use: the message says why, in one line."""


class RequestRejected(ClientError):
    """HTTP 4xx other than 429: the request itself is wrong (or not allowed)."""

    def __init__(self, status: int, body: dict[str, Any]) -> None:
        super().__init__(f"HTTP {status} {body.get('errorName')}: {body.get('errorMessage')}")
        self.status = status
        self.body = body


def _principal(text: str) -> dict[str, str]:
    """ "User:alice" as Kafka's (principalType, principalName)."""
    kind, colon, name = text.partition(":")
    if not colon or not kind or not name:
        raise ValueError(f"{text!r} is not a principal: write it type:name (User:alice)")
    return {"principalType": kind, "principalName": name}


# ------------------------------------------------------------------ responses

# DescribeClientQuotas' query parameter per entity type.
_QUOTA_PARAMS = {"user": "user", "client-id": "clientId", "ip": "ip"}


@dataclass(frozen=True)
class Answer:
    """Any protocol answer: ``errorCode``/``errorName``/``errorMessage`` and the body."""

    error_code: int
    error_name: str
    error_message: str | None
    body: dict[str, Any] = field(repr=False)
    metadata_offset: int | None = None  # X-Metadata-Offset of reads

    @property
    def ok(self) -> bool:
        return self.error_code == 0


@dataclass(frozen=True)
class Registration(Answer):
    broker_epoch: int = -1


@dataclass(frozen=True)
class Heartbeat(Answer):
    is_caught_up: bool = False
    is_fenced: bool = True
    should_shut_down: bool = False


@dataclass(frozen=True)
class PartitionResult:
    topic: str  # topicName (v0-1) or topicId (v2+), as sent
    partition_index: int
    error_code: int
    error_name: str
    error_message: str | None
    leader_id: int
    leader_epoch: int
    isr: tuple[int, ...]
    leader_recovery_state: int
    partition_epoch: int


@dataclass(frozen=True)
class AlterPartitionAnswer(Answer):
    partitions: tuple[PartitionResult, ...] = ()


def _answer(cls, body: dict, offset: int | None = None, **extra) -> Any:
    return cls(
        error_code=body.get("errorCode", 0),
        error_name=body.get("errorName", "NONE"),
        error_message=body.get("errorMessage"),
        body=body,
        metadata_offset=offset,
        **extra,
    )


# ------------------------------------------------------------------ the client


class MetaquorumClient:
    def __init__(
        self,
        seeds: Sequence[str],
        *,
        token: str | None = None,
        timeout_s: float = 10.0,
        max_attempts: int = 8,
        backoff_s: float = 0.05,
        max_backoff_s: float = 2.0,
        http: httpx.AsyncClient | LeanHttp | None = None,
        rng: random.Random | None = None,
        tls: ClientTls | None = None,
    ) -> None:
        """``http``: a client of the caller's, httpx's or a ``LeanHttp`` (its
        ``verify`` / ``ssl_context`` must be ``tls.context`` for https URLs); ``tls``: the CA to trust and this
        client's certificate (brokers/tls.py)."""
        if not seeds:
            raise ValueError("at least one seed URL is needed")
        self.seeds = [s.rstrip("/") for s in seeds]
        self.leader: str | None = None
        self._seed = 0
        self.max_attempts = max_attempts
        self.backoff_s = backoff_s
        self.max_backoff_s = max_backoff_s
        self._rng = rng or random.Random()
        headers = {"authorization": f"Bearer {token}"} if token else {}
        self._own_http = http is None
        self.http = http or httpx.AsyncClient(
            timeout=timeout_s,
            headers=headers,
            limits=httpx.Limits(max_connections=200, max_keepalive_connections=100),
            verify=tls.context if tls is not None else True,
        )
        self._prober = Prober(tls.context if tls else None, tls.has_cert if tls else False)
        if http is not None and headers:
            self.http.headers.update(headers)

    async def close(self) -> None:
        if self._own_http:
            await self.http.aclose()

    async def __aenter__(self) -> MetaquorumClient:
        return self

    async def __aexit__(self, *exc) -> None:
        await self.close()

    # ------------------------------------------------------------ transport

    def _base(self, write: bool) -> str:
        if write and self.leader:
            return self.leader
        return self.seeds[self._seed % len(self.seeds)]

    def _next_seed(self) -> None:
        self._seed += 1
        self.leader = None

    def _delay(self, attempt: int, retry_after: str | None, body: dict | None = None) -> float:
        hint = (body or {}).get("retryAfterMs")
        if type(hint) is int and hint >= 0:  # exact, where the header has whole seconds
            return min(hint / 1000, self.max_backoff_s * 4)
        if retry_after:
            try:
                return min(float(retry_after), self.max_backoff_s * 4)
            except ValueError:
                pass
        cap = min(self.max_backoff_s, self.backoff_s * (2**attempt))
        return self._rng.uniform(0, cap)

    async def request(
        self,
        method: str,
        path: str,
        *,
        json: Any = None,
        params: dict | None = None,
        write: bool = False,
        headers: dict | None = None,
    ) -> Response:
        """Sends until a controller answers (200/404/410/4xx) or attempts run out."""
        last_problem = "no attempt made"
        for attempt in range(self.max_attempts):
            base = self._base(write)
            try:
                r = await self.http.request(
                    method, base + path, json=json, params=params, headers=headers
                )
            except httpx.TimeoutException as e:
                if write and not isinstance(e, httpx.ConnectTimeout):
                    # It may have reached the leader and may still commit. That
                    # leader may also be paused, cut off or deposed: the next
                    # write asks the next seed (one redirect if it was fine).
                    self._next_seed()
                    raise OutcomeUnknown(f"{method} {path} timed out at {base}: {e!r}") from e
                last_problem = f"timeout at {base}"
                self._next_seed()
                await asyncio.sleep(self._delay(attempt, None))
                continue
            except (httpx.ConnectError, httpx.RemoteProtocolError, httpx.ReadError) as e:
                tls_problem = explain(e, base)
                if isinstance(tls_error(e), ssl.SSLCertVerificationError):
                    assert tls_problem is not None
                    raise TlsFailure(tls_problem) from e  # never sent: retrying cannot help
                if tls_problem is None and not isinstance(e, httpx.ConnectError):
                    tls_problem = await self._prober.problem(base, write)  # refused?
                if write and isinstance(e, httpx.ReadError | httpx.RemoteProtocolError):
                    self._next_seed()
                    why = f"; {tls_problem}" if tls_problem else ""
                    raise OutcomeUnknown(
                        f"{method} {path}: the answer was lost ({e!r}){why}"
                    ) from e
                if tls_problem is not None:
                    raise TlsFailure(tls_problem) from e  # a read: nothing was done
                last_problem = f"cannot reach {base} ({e.__class__.__name__})"
                self._next_seed()
                await asyncio.sleep(self._delay(attempt, None))
                continue
            if r.status_code == 307:
                location = r.headers.get("location", "")
                leader = r.json().get("leaderUrl") if _is_json(r) else None
                self.leader = (leader or location.split("/v1/")[0]).rstrip("/") or None
                last_problem = f"redirected to {self.leader}"
                continue
            if r.status_code in (429, 503):
                body = r.json() if _is_json(r) else {}
                if r.status_code == 503 and body.get("errorName") == "REQUEST_TIMED_OUT":
                    self._next_seed()
                    raise OutcomeUnknown(f"{method} {path}: {body.get('errorMessage')}")
                last_problem = (
                    f"HTTP {r.status_code} {body.get('errorName')}: {body.get('errorMessage')}"
                )
                if r.status_code == 503:
                    # This voter knows no leader (cut off from the majority, an
                    # election, its disk, a stop): ask the next one, as Kafka's
                    # clients move through their bootstrap servers.
                    self._next_seed()
                await asyncio.sleep(self._delay(attempt, r.headers.get("retry-after"), body))
                continue
            if r.status_code >= 400 and r.status_code not in (404, 410):
                raise RequestRejected(
                    r.status_code, r.json() if _is_json(r) else {"errorMessage": r.text}
                )
            if write and self.leader is None:
                self.leader = base
            return r
        raise ClientError(
            f"{method} {path}: gave up after {self.max_attempts} attempts ({last_problem})"
        )

    async def _post(self, path: str, body: dict, params: dict | None = None) -> dict:
        r = await self.request("POST", path, json=body, params=params, write=True)
        return r.json()

    async def _get(self, path: str, params: dict | None = None) -> Response:
        return await self.request("GET", path, params=params)

    # ------------------------------------------------------------ broker endpoints

    async def register(
        self,
        broker_id: int,
        cluster_id: str,
        incarnation_id: str,
        listeners: Sequence[dict],
        features: Sequence[dict],
        rack: str | None = None,
        previous_broker_epoch: int = -1,
    ) -> Registration:
        body = await self._post(
            "/v1/brokers/register",
            {
                "brokerId": broker_id,
                "clusterId": cluster_id,
                "incarnationId": incarnation_id,
                "listeners": list(listeners),
                "features": list(features),
                "rack": rack,
                "previousBrokerEpoch": previous_broker_epoch,
            },
        )
        return _answer(Registration, body, broker_epoch=body.get("brokerEpoch", -1))

    async def heartbeat(
        self,
        broker_id: int,
        broker_epoch: int,
        current_metadata_offset: int,
        want_fence: bool = False,
        want_shut_down: bool = False,
    ) -> Heartbeat:
        body = await self._post(
            "/v1/brokers/heartbeat",
            {
                "brokerId": broker_id,
                "brokerEpoch": broker_epoch,
                "currentMetadataOffset": current_metadata_offset,
                "wantFence": want_fence,
                "wantShutDown": want_shut_down,
            },
        )
        return _answer(
            Heartbeat,
            body,
            is_caught_up=body.get("isCaughtUp", False),
            is_fenced=body.get("isFenced", True),
            should_shut_down=body.get("shouldShutDown", False),
        )

    async def alter_partition(
        self, broker_id: int, broker_epoch: int, topics: Sequence[dict], version: int = 3
    ) -> AlterPartitionAnswer:
        """``topics`` in docs/api.md's request shape for ``version``."""
        body = await self._post(
            "/v1/alter-partition",
            {"brokerId": broker_id, "brokerEpoch": broker_epoch, "topics": list(topics)},
            params={"version": version},
        )
        results = []
        for topic in body.get("topics") or []:
            name = topic.get("topicId") or topic.get("topicName")
            for p in topic.get("partitions") or []:
                results.append(
                    PartitionResult(
                        name,
                        p["partitionIndex"],
                        p.get("errorCode", 0),
                        p.get("errorName", "NONE"),
                        p.get("errorMessage"),
                        p.get("leaderId", 0),
                        p.get("leaderEpoch", 0),
                        tuple(p.get("isr") or ()),
                        p.get("leaderRecoveryState", 0),
                        p.get("partitionEpoch", 0),
                    )
                )
        return _answer(AlterPartitionAnswer, body, partitions=tuple(results))

    async def allocate_producer_ids(self, broker_id: int, broker_epoch: int) -> Answer:
        """The next block of producer ids (``producerIdStart``, ``producerIdLen``)."""
        body = {"brokerId": broker_id, "brokerEpoch": broker_epoch}
        return _answer(Answer, await self._post("/v1/brokers/allocate-producer-ids", body))

    # ------------------------------------------------------------ admin endpoints

    async def create_topics(self, topics: Sequence[dict], validate_only: bool = False) -> Answer:
        """``validate_only``: every check of a real request, nothing created."""
        body = {"topics": list(topics), "validateOnly": validate_only}
        return _answer(Answer, await self._post("/v1/topics", body))

    async def create_topic(
        self,
        name: str,
        partitions: int = -1,
        replication_factor: int = -1,
        configs: dict | None = None,
    ) -> Answer:
        topic = {"name": name, "numPartitions": partitions, "replicationFactor": replication_factor}
        if configs:
            topic["configs"] = [{"name": k, "value": v} for k, v in configs.items()]
        return await self.create_topics([topic])

    async def delete_topic(self, name: str) -> Answer:
        r = await self.request("DELETE", f"/v1/topics/{name}", write=True)
        return _answer(Answer, r.json())

    async def delete_topics(self, names: Sequence[str]) -> Answer:
        """DeleteTopics by several names: each one's outcome under ``responses``."""
        return _answer(Answer, await self._post("/v1/topics/delete", {"topicNames": list(names)}))

    async def unregister_broker(self, broker_id: int) -> Answer:
        """Decommissions ``broker_id`` for good (Kafka's UnregisterBroker)."""
        r = await self.request("DELETE", f"/v1/brokers/{broker_id}", write=True)
        return _answer(Answer, r.json())

    async def create_partitions(self, name: str, count: int) -> Answer:
        return _answer(Answer, await self._post(f"/v1/topics/{name}/partitions", {"count": count}))

    async def reassign(self, topics: Sequence[dict]) -> Answer:
        return _answer(Answer, await self._post("/v1/reassignments", {"topics": list(topics)}))

    async def elect_leaders(
        self, election_type: int, topic_partitions: Sequence[dict] | None
    ) -> Answer:
        body = {"electionType": election_type, "topicPartitions": topic_partitions}
        return _answer(Answer, await self._post("/v1/elect-leaders", body))

    async def update_features(
        self, name: str, level: int, upgrade_type: int = 1, validate_only: bool = False
    ) -> Answer:
        """UpdateFeatures for one feature: ``upgrade_type`` 1 upgrade, 2 safe
        downgrade, 3 unsafe downgrade (Kafka's FeatureUpdate.UpgradeType)."""
        body = {
            "name": name,
            "level": level,
            "upgradeType": upgrade_type,
            "validateOnly": validate_only,
        }
        return _answer(Answer, await self._post("/v1/features", body))

    async def alter_configs(self, resources: Sequence[dict], validate_only: bool = False) -> Answer:
        """IncrementalAlterConfigs: ``resources`` as the body's (resourceType,
        resourceName, configs [{name, configOperation, value}]); each resource's
        outcome is in ``body["responses"]``."""
        body = {"resources": list(resources), "validateOnly": validate_only}
        return _answer(Answer, await self._post("/v1/configs", body))

    async def alter_client_quotas(
        self, entries: Sequence[dict], validate_only: bool = False
    ) -> Answer:
        """AlterClientQuotas: ``entries`` as the body's (entity [{entityType,
        entityName}], ops [{key, value, remove}]); each entity's outcome is in
        ``body["entries"]``."""
        body = {"entries": list(entries), "validateOnly": validate_only}
        return _answer(Answer, await self._post("/v1/client-quotas", body))

    async def describe_client_quotas(
        self,
        filter: dict[str, str | None] | None = None,
        any_of: Sequence[str] = (),
        strict: bool = False,
        linearizable: bool = False,
    ) -> Answer:
        """DescribeClientQuotas: ``filter`` maps an entity type ("user",
        "client-id", "ip") to a name, or None for its default entity;
        ``any_of`` names types matched with any name. Entries are in
        ``body["entries"]``; a bad filter raises RequestRejected (400)."""
        params: dict[str, str] = {}
        for entity_type, name in (filter or {}).items():
            param = _QUOTA_PARAMS[entity_type]
            if name is None:
                params[f"{param}Default"] = "true"
            else:
                params[param] = name
        for entity_type in any_of:
            param = _QUOTA_PARAMS[entity_type]
            params["any" + param[0].upper() + param[1:]] = "true"
        if strict:
            params["strict"] = "true"
        return await self._read("/v1/client-quotas", params, linearizable=linearizable)

    async def alter_user_scram_credentials(
        self, deletions: Sequence[dict] = (), upsertions: Sequence[dict] = ()
    ) -> Answer:
        """AlterUserScramCredentials: ``deletions`` [{name, mechanism}],
        ``upsertions`` [{name, mechanism, iterations, salt, saltedPassword}]
        (salt and salted password base64; never the password: the caller
        salts it, as Kafka's Admin does); each user's outcome is in
        ``body["results"]``."""
        body = {"deletions": list(deletions), "upsertions": list(upsertions)}
        return _answer(Answer, await self._post("/v1/scram-credentials", body))

    async def describe_user_scram_credentials(
        self, users: Sequence[str] = (), linearizable: bool = False
    ) -> Answer:
        """DescribeUserScramCredentials: each user's mechanisms and
        iterations (every user when ``users`` is empty), in ``body["results"]``."""
        params = {"user": list(users)} if users else {}
        return await self._read("/v1/scram-credentials", params, linearizable=linearizable)

    async def create_delegation_token(
        self,
        renewers: Sequence[str] = (),
        owner: str | None = None,
        max_lifetime_ms: int = -1,
    ) -> Answer:
        """CreateDelegationToken: a token owned by the caller (or ``owner``,
        "type:name"), renewable by ``renewers`` ("User:name" each); the
        answer's ``body["hmac"]`` (base64) is the token's password."""
        body: dict = {
            "renewers": [_principal(r) for r in renewers],
            "maxLifetimeMs": max_lifetime_ms,
        }
        if owner is not None:
            owner_principal = _principal(owner)
            body["ownerPrincipalType"] = owner_principal["principalType"]
            body["ownerPrincipalName"] = owner_principal["principalName"]
        return _answer(Answer, await self._post("/v1/delegation-tokens", body))

    async def renew_delegation_token(self, hmac: str, renew_period_ms: int = -1) -> Answer:
        """RenewDelegationToken by the token's HMAC (base64)."""
        body = {"hmac": hmac, "renewPeriodMs": renew_period_ms}
        return _answer(Answer, await self._post("/v1/delegation-tokens/renew", body))

    async def expire_delegation_token(self, hmac: str, expiry_time_period_ms: int = -1) -> Answer:
        """ExpireDelegationToken by the token's HMAC (base64): a negative
        period removes it now."""
        body = {"hmac": hmac, "expiryTimePeriodMs": expiry_time_period_ms}
        return _answer(Answer, await self._post("/v1/delegation-tokens/expire", body))

    async def describe_delegation_tokens(
        self, owners: Sequence[str] = (), linearizable: bool = False
    ) -> Answer:
        """DescribeDelegationToken: the tokens the caller may see (those whose
        owner or a renewer is in ``owners``, "type:name", when given), in
        ``body["tokens"]``."""
        params = {"owner": list(owners)} if owners else {}
        return await self._read("/v1/delegation-tokens", params, linearizable=linearizable)

    async def create_acls(self, creations: Sequence[dict]) -> Answer:
        """CreateAcls: ``creations`` as the body's (resourceType, resourceName,
        resourcePatternType, principal, host, operation, permissionType; enums
        by Kafka's name); each creation's outcome is in ``body["results"]``."""
        return _answer(Answer, await self._post("/v1/acls", {"creations": list(creations)}))

    async def delete_acls(self, filters: Sequence[dict]) -> Answer:
        """DeleteAcls: ``filters`` as the body's (resourceTypeFilter, ...);
        what each deleted is in ``body["filterResults"]``."""
        return _answer(Answer, await self._post("/v1/acls/delete", {"filters": list(filters)}))

    async def transfer_leadership(self, target_node_id: int | None = None) -> Answer:
        body = {} if target_node_id is None else {"targetNodeId": target_node_id}
        return _answer(Answer, await self._post("/v1/quorum/transfer-leadership", body))

    async def add_voter(self, node_id: int, address: str, timeout_ms: int = 30_000) -> Answer:
        body = {"nodeId": node_id, "address": address, "timeoutMs": timeout_ms}
        return _answer(Answer, await self._post("/v1/quorum/add-voter", body))

    async def update_voter(self, node_id: int, directory_id: str, raft_address: str) -> Answer:
        body = {"nodeId": node_id, "directoryId": directory_id, "raftAddress": raft_address}
        return _answer(Answer, await self._post("/v1/quorum/update-voter", body))

    async def remove_voter(self, node_id: int) -> Answer:
        return _answer(Answer, await self._post("/v1/quorum/remove-voter", {"nodeId": node_id}))

    # ------------------------------------------------------------ reads

    async def _read(
        self, path: str, params: dict | None = None, linearizable: bool = False
    ) -> Answer:
        params = dict(params or {})
        if linearizable:
            params["consistency"] = "linearizable"
        r = await self._get(path, params)
        body = r.json()
        offset = r.headers.get("x-metadata-offset")
        wrapped = body if isinstance(body, dict) else {"items": body}
        wrapped.setdefault("errorCode", 0 if r.status_code == 200 else body.get("errorCode", -1))
        return _answer(Answer, wrapped, int(offset) if offset else None)

    async def brokers(self, linearizable: bool = False) -> Answer:
        return await self._read("/v1/brokers", linearizable=linearizable)

    async def topics(self, linearizable: bool = False) -> Answer:
        return await self._read("/v1/topics", linearizable=linearizable)

    async def topic(self, name: str, linearizable: bool = False) -> Answer:
        return await self._read(f"/v1/topics/{name}", linearizable=linearizable)

    async def describe_configs(
        self,
        topic: str | None = None,
        broker_id: int | None = None,
        include_synonyms: bool = False,
        linearizable: bool = False,
    ) -> Answer:
        """DescribeConfigs of a topic, a broker, or (neither given) the
        cluster-wide default."""
        if topic is not None:
            path = f"/v1/configs/topics/{topic}"
        elif broker_id is not None:
            path = f"/v1/configs/brokers/{broker_id}"
        else:
            path = "/v1/configs/cluster"
        params = {"includeSynonyms": "true"} if include_synonyms else {}
        return await self._read(path, params, linearizable=linearizable)

    async def describe_acls(self, linearizable: bool = False, **acl_filter: str | None) -> Answer:
        """DescribeAcls from the serving node's image; ``acl_filter``: the query's
        resourceType, resourceName, patternType, principal, host, operation,
        permissionType (absent or None: any)."""
        params = {k: v for k, v in acl_filter.items() if v is not None}
        return await self._read("/v1/acls", params, linearizable=linearizable)

    async def status(self) -> Answer:
        return await self._read("/v1/quorum/status")

    async def log(
        self,
        from_offset: int,
        max_records: int = 1000,
        wait_ms: int = 0,
        filters: dict[str, str | int] | None = None,
    ) -> Answer:
        """One page of the metadata log; 410 (``oldestOffset``) means load the
        snapshot. ``filters``: GET /v1/log's (principal, api, brokerId, topic,
        since, until); then ``nextOffset`` is where the server's scan stopped."""
        params = {"fromOffset": from_offset, "maxRecords": max_records, "waitMs": wait_ms}
        params.update(filters or {})
        r = await self.request("GET", "/v1/log", params=params)
        body = r.json()
        body.setdefault("errorCode", 0 if r.status_code == 200 else body.get("errorCode", -1))
        return _answer(Answer, body)

    async def snapshot(self) -> Answer:
        return await self._read("/v1/snapshot")

    async def image(
        self,
        at_offset: int | None = None,
        at_time: str | None = None,
        only: str | None = None,
        topics: str | None = None,
    ) -> Answer:
        """GET /v1/image: the cluster after ``at_offset`` (or at ``at_time``;
        neither: now), the parts ``only`` names; 410 (``oldestOffset``) beyond
        the voter's history window."""
        given = {"atOffset": at_offset, "atTime": at_time, "only": only, "topics": topics}
        return await self._read("/v1/image", {k: v for k, v in given.items() if v is not None})

    async def what_if(self, lose: Sequence[str], limit: int) -> Answer:
        """GET /v1/what-if: what losing brokers (``brokers:3,4``) or racks
        (``racks:r1``) would do, at most ``limit`` changed partitions listed."""
        return await self._read("/v1/what-if", {"lose": list(lose), "limit": limit})

    async def explain_broker(self, broker_id: int) -> Answer:
        """GET /v1/explain/brokers/{id}: why the broker is in its state."""
        return await self._read(f"/v1/explain/brokers/{broker_id}")

    async def explain_partition(self, topic: str, partition: int) -> Answer:
        """GET /v1/explain/partitions/{topic}/{partition}: why the partition is as it is."""
        return await self._read(f"/v1/explain/partitions/{topic}/{partition}")

    async def list_reassignments(
        self, topics: Sequence[str] | None = None, linearizable: bool = False
    ) -> Answer:
        """GET /v1/reassignments: those in progress, of every topic or of the
        ones given (``orders`` or ``orders:0,3``)."""
        params = {"topic": list(topics)} if topics else None
        return await self._read("/v1/reassignments", params, linearizable)

    async def describe_features(self, linearizable: bool = False) -> Answer:
        """GET /v1/features: each feature's supported range and finalized level."""
        return await self._read("/v1/features", linearizable=linearizable)

    async def image_diff(self, from_offset: int, to_offset: int, max_changes: int) -> Answer:
        """GET /v1/image/diff: every entity that changed between two offsets."""
        params = {"from": from_offset, "to": to_offset, "maxChanges": max_changes}
        return await self._read("/v1/image/diff", params)


def _is_json(r: Response) -> bool:
    return r.headers.get("content-type", "").startswith("application/json")
