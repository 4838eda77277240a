"""Every size limit on what a request may carry into the replicated log, in one
place (docs/limits.md lists them with their values and reasons).

Invariant: a field that reaches a record is bounded here or by Kafka's own
rule (topic names: ``records.TOPIC_NAME_MAX_LENGTH``; new partitions per
request: ``controller.topic_control.MAX_PARTITIONS_PER_REQUEST``; records per
operator write: ``controller.record_cap.MAX_RECORDS_PER_USER_OP``), so no
caller, a broker's own token included, can grow one record, the image or a
voter's memory without bound. The HTTP models check these before anything is
decided; an error names the field and the limit.
"""

from __future__ import annotations

# Kafka's node ids (broker.id, node.id) are int32 and must be >= 0.
BROKER_ID_MIN, BROKER_ID_MAX = 0, 2**31 - 1

# BrokerRegistration. Kafka has no explicit caps; these are far above any real
# broker (a few listeners, a handful of features) and keep a registration
# record under 64 KiB (56,835 bytes encoded with every field at its longest).
MAX_LISTENERS = 64
MAX_FEATURES = 64
MAX_HOST_LENGTH = 255  # a DNS name is at most 253 characters
MAX_NAME_LENGTH = 255  # listener, feature and config names
MAX_RACK_LENGTH = 255
MAX_CLUSTER_ID_LENGTH = 64  # Kafka's cluster ids are 22 characters

# Configs: CreateTopics' per topic, IncrementalAlterConfigs' per resource
# (Kafka has 33 topic configs; a broker resource may hold custom ones too),
# and the resources of one IncrementalAlterConfigs (Kafka's kafka-configs.sh
# sends one; 100 x 64 stays under the 10,000 records of one operator write).
MAX_TOPIC_CONFIGS = 64
MAX_CONFIG_VALUE_LENGTH = 4096
MAX_CONFIG_RESOURCES = 100
# AlterClientQuotas: entities per request (at most 4 keys each stays under the
# 10,000 records of one operator write); components and ops per entity.
MAX_QUOTA_ENTRIES = 2_000
MAX_QUOTA_COMPONENTS = 8
MAX_QUOTA_OPS = 16

# ACLs: the creations or filters of one CreateAcls / DeleteAcls (the
# creations at the 10,000 records of one operator write), and the length of a
# binding's strings (Kafka has no cap; group ids and principals are short).
MAX_ACLS_PER_REQUEST = 10_000
MAX_ACL_FILTERS_PER_REQUEST = 1_000
MAX_ACL_STRING_LENGTH = 1024

# AlterUserScramCredentials: deletions and upsertions of one request (one
# record each, far under the 10,000 of one operator write); a user name (Kafka
# has no cap; a principal's name is short); a salt and a salted password
# (Kafka's client sends a 26-byte salt and a 32- or 64-byte salted password).
MAX_SCRAM_ALTERATIONS = 1_000
MAX_SCRAM_USER_LENGTH = 1024
MAX_SCRAM_BYTES = 1024
# DescribeUserScramCredentials: users one read names.
MAX_SCRAM_DESCRIBE_USERS = 1_000

# Delegation tokens: the renewers of one CreateDelegationToken, a principal's
# type and name (Kafka has no cap; principals are short), an HMAC (HmacSHA512:
# 64 bytes; more is no token's), and the owners one DescribeDelegationToken names.
MAX_DELEGATION_TOKEN_RENEWERS = 100
MAX_PRINCIPAL_PART_LENGTH = 1024
MAX_DELEGATION_TOKEN_HMAC_BYTES = 64
MAX_DELEGATION_TOKEN_DESCRIBE_OWNERS = 1_000

# Everything that names topics or partitions in one request (CreateTopics,
# AlterPartition, reassignments, elections): bounded like Kafka's
# MAX_PARTITIONS_PER_BATCH, so one request stays one reasonable batch.
MAX_TOPICS_PER_REQUEST = 10_000
MAX_PARTITIONS_PER_TOPIC_ENTRY = 10_000
MAX_REPLICAS = 1_000  # brokerIds of one assignment, ISR members

# HTTP: the body of any request, and the request head.
MAX_BODY_BYTES = 16 << 20
# Body bytes of one caller (a token; with auth off, a client address) in the
# process at once, arriving or waiting for their answer: four largest bodies.
MAX_BODY_BYTES_PER_CALLER = 64 << 20
MAX_HEADERS = 100
MAX_HEADER_BYTES = 64 << 10  # all header names and values together
MAX_URL_BYTES = 8 << 10

# Who asked for a batch's records (records.Who), replicated with every batch:
# bounded so that a batch's who stays small beside its records. A principal is
# ``role:identity``; a certificate's name (a DNS SAN is at most 253
# characters) fits, a longer one is cut at the bound with "...". An address is
# an IPv6 host in brackets and a port (at most 53 characters). A request id is
# the caller's X-Request-Id: at most 64 printable ASCII characters, else 400.
MAX_WHO_PRINCIPAL_LENGTH = 320
MAX_WHO_API_LENGTH = 64
MAX_WHO_ADDRESS_LENGTH = 64
MAX_REQUEST_ID_LENGTH = 64
MAX_WHO_RULE_LENGTH = 64
