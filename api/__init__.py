"""metaquorum's HTTP API (docs/api.md) over a ``quorum.node.QuorumNode``.

``create_app(node, tokens=..., body_limit_bytes=...)`` builds the FastAPI app.
It parses and range-checks requests (``models``), authenticates bearer tokens
(``auth``), hands each request to the active controller and maps the node's
errors to HTTP statuses (``errors``); it holds no business rule.

Statuses: 200 whenever the active controller processed the request (the
outcome is in ``errorCode``); 400 invalid request (``INVALID_REQUEST``, the
message names the field); 401/403 auth (``CLUSTER_AUTHORIZATION_FAILED``); 307
to the leader (``NOT_CONTROLLER``); 413 body too large; 415 a body without
``Content-Type: application/json``; 429 admission control
(``THROTTLING_QUOTA_EXCEEDED``); 503 + ``Retry-After`` when no leader is known,
the node is replaying, not ready or stopping, or cannot write its disk (the
message names the data dir, its free and needed space; ``NOT_CONTROLLER``). The HTTP
server itself (``connections``) answers 408 (a head or body too slow), 414 and
431 (a head over its limits) and 503 (too many connections), then closes.
Every limit is in ``metadata_records/limits.py`` and docs/limits.md.

A write whose outcome is unknown (``OutcomeUnknownError``: no answer in time,
or leadership lost while its batch was in flight) answers **503 with
``Retry-After`` and ``REQUEST_TIMED_OUT`` (7)**, and its message says the write
may still commit: Raft may yet commit the batch. Clients retry; the protocol's
epochs make a retry safe (a re-registration of the same incarnation keeps its
epoch, a repeated AlterPartition with a stale partition epoch is refused).

Where docs/api.md is silent, this package decides (and its tests pin it):

* Every 429 and 503 from the node also carries ``retryAfterMs`` in its body:
  ``Retry-After`` has whole seconds only (HTTP), and a leader elected in a
  fifth of a second should not cost brokers a whole one. ``brokers/client.py``
  prefers it.

* Unknown body fields are ignored (as Kafka's JSON converters do); fields of
  another AlterPartition version and CreatePartitions' ``validateOnly: true``
  are refused (400).
  Snake_case spellings are not accepted. Integers, booleans and strings are
  strict (``"5"`` is not an int32, ``true`` is not an int).
* AlterPartition answers echo ``topicName`` (v0-1) or ``topicId`` (v2+), never
  both; ``leaderRecoveryState`` is in every partition entry.
* Admin responses use Kafka's response field names: DeleteTopics
  ``responses``, CreatePartitions ``results``, AlterPartitionReassignments
  ``responses``, ElectLeaders ``replicaElectionResults[].partitionResult[]``;
  each also carries the top-level ``errorCode``. DELETE /v1/topics/{name} and
  CreatePartitions name one topic, so their top-level error is that topic's.
  CreatePartitions ``assignments`` take ``{"brokerIds": [...]}`` or a bare list.
  ElectLeaders without ``topicPartitions`` (or null) means every partition.
  AlterPartitionReassignments requires ``replicas`` (null cancels).
* Topic ``configs`` are shown as ``[{name, value}]``, sorted, like the request.
* A sensitive config (a PASSWORD, or a config of unknown type) is never shown
  by DescribeConfigs (``value`` null, ``isSensitive`` true, to every role); in
  the records of /v1/log and /v1/snapshot its value is ``(redacted)`` unless
  the caller is an admin or a broker, or asks with ``includeSensitive``
  (``true``: admins only, 403 otherwise; ``false``: the marker to anyone).
  A SCRAM credential's salt and keys are shown to no one: empty in every
  UserScramCredentialRecord a read shows, whatever the role.
* Reads answer from the local image whenever it is whole: 503 only while the
  node replays its log, refuses to serve (corrupt data) or its Raft thread is
  dead. A voter cut off from the leader still answers local reads, with
  ``X-Metadata-Offset`` saying how fresh they are; ``?consistency=linearizable``
  needs a leader. /readyz stays strict (replay done, leader known, caught up).
* /v1/log: ``fromOffset`` default 0, ``maxRecords`` 1..10000 (default 1000),
  ``waitMs`` 0..60000 (default 0); the answer also has ``oldestOffset``. With
  NDJSON, ``X-Next-Offset``, ``X-High-Watermark`` and ``X-Oldest-Offset`` carry
  the page's offsets. 410 has ``errorCode`` 1 ``OFFSET_OUT_OF_RANGE``.
* /v1/snapshot: ``{offset, nextOffset, records}``; every record has ``offset``
  = the image's last offset and the timestamp of the image's last record.
* /v1/quorum/status voters: ``url`` is the HTTP URL when known (this node, the
  leader), ``raftAddress`` the Raft host:port; ``lagRecords`` counts the
  metadata records behind the commit index, known on the leader (Raft entries
  when the records of those entries are not known here: not yet applied, or
  compacted away);
  ``lastCaughtUpMs`` is when this node last saw the voter caught up (sampled
  on /v1/quorum/status, /readyz and /metrics); ``logEndOffset`` (the record
  offset after what the leader knows the voter holds) and ``lastFetchMs``
  (when the leader last heard it answer; null for a voter not heard since the
  election) are Kafka's LogEndOffset and LastFetchTimestamp, known on the
  leader (``metaquorum status``: docs/cli.md). Extra fields: ``active``,
  ``ready``, ``replaying``, ``queueDepth``, ``raftCommitIndex``,
  ``raftLastApplied``.
* 401 carries ``WWW-Authenticate: Bearer``; 404 for an unknown broker is
  ``BROKER_ID_NOT_REGISTERED`` (102), for a topic ``UNKNOWN_TOPIC_OR_PARTITION``
  (3); an unknown route is 404 and a wrong method 405, both ``INVALID_REQUEST``
  (with auth on, 401 first: the caller is identified before routing). A bug is
  500 ``UNKNOWN_SERVER_ERROR`` (-1) with an incident id, never the exception's
  text. /openapi.json, /docs and /redoc need a token (any role) unless
  ``public_docs`` (``serve --public-docs``).
* POST /v1/quorum/transfer-leadership: 400 when there is no other voter or
  ``targetNodeId`` is not one; 200 ``{leaderId}`` once another voter leads; 409
  ``PREFERRED_LEADER_NOT_AVAILABLE`` with ``{leaderId, term}`` when it did not
  move (the target lost or did not stand; that voter leads and takes writes);
  503 ``REQUEST_TIMED_OUT`` if no leader is known in time.
"""

from importlib import import_module
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .app import create_app
    from .auth import TokensFileError, TokenTable, load_tokens, parse_tokens

__all__ = ["TokenTable", "TokensFileError", "create_app", "load_tokens", "parse_tokens"]

# Imported when first asked for: FastAPI and pydantic cost about a second of
# CPU to import, and what imports one ``api`` module alone (the CLI's TLS
# and token checks) builds no app.
_HOME = {
    "create_app": ".app",
    "TokenTable": ".auth",
    "TokensFileError": ".auth",
    "load_tokens": ".auth",
    "parse_tokens": ".auth",
}


def __getattr__(name: str):
    if name not in _HOME:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(import_module(_HOME[name], __name__), name)
