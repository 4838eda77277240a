"""Finding 4: input Kafka refuses is refused. Before: a negative broker id
registered, duplicate JSON keys were taken silently (the last won), and a
body sent as text/plain or with no content type was processed."""

from __future__ import annotations

import orjson

from tests.local_node import registration_body

from .attackers import client_records, hostile_cluster

JSON = {"Content-Type": "application/json"}


def test_negative_ids_duplicate_keys_and_non_json_bodies_are_refused(tmp_path):
    with hostile_cluster(tmp_path) as c:
        url = c.url(0)

        def post(path, body: bytes, headers=JSON):
            return c.client.post(url + path, content=body, headers=headers)

        negative = {
            "/v1/brokers/register": {**registration_body(c.cluster_id, 1), "brokerId": -1},
            "/v1/brokers/heartbeat": {"brokerId": -1, "currentMetadataOffset": 0},
            "/v1/alter-partition": {"brokerId": -5, "brokerEpoch": 1, "topics": []},
            "/v1/quorum/transfer-leadership": {"targetNodeId": -1},
        }
        for path, body in negative.items():
            r = post(path, orjson.dumps(body))
            assert r.status_code == 400, (path, r.text)
            message = r.json()["errorMessage"]
            assert "is not a broker id: broker ids are in [0, 2147483647]" in message, message
            assert message.split(":")[0] in ("brokerId", "targetNodeId"), message

        # Two values for one field: refused, whichever comes last.
        reg = orjson.dumps(registration_body(c.cluster_id, 7))
        twice = reg[:-1] + b', "brokerId": 8}'
        r = post("/v1/brokers/register", twice)
        assert r.status_code == 400, r.text
        assert 'duplicate key "brokerId"' in r.json()["errorMessage"], r.text
        nested = b'{"brokerId": 1, "brokerEpoch": 2, "topics": [{"topicName": "t", '
        nested += b'"topicName": "u", "partitions": []}]}'
        r = post("/v1/alter-partition?version=1", nested)  # the quick path's parser too
        assert r.status_code == 400, r.text
        assert 'duplicate key "topicName"' in r.json()["errorMessage"]

        # A body must say it is JSON.
        for headers in ({"Content-Type": "text/plain"}, {}, {"Content-Type": "application/xml"}):
            r = c.client.post(
                url + "/v1/brokers/register", content=reg, headers={"Content-Type": ""} | headers
            )
            assert r.status_code == 415, (headers, r.text)
            assert "Content-Type: application/json" in r.json()["errorMessage"]
        r = post("/v1/brokers/register", reg, {"Content-Type": "application/json; charset=latin-1"})
        assert r.status_code == 415 and "only UTF-8" in r.text

        assert client_records(c) == []  # nothing was written
        # The same registration, well formed: accepted.
        ok = post("/v1/brokers/register", reg, {"Content-Type": "application/json; charset=utf-8"})
        assert ok.status_code == 200 and ok.json()["errorName"] == "NONE", ok.text
