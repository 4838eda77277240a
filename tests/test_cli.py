import orjson

from metadata_records.codec import record_from_obj
from metaquorum.cli import main


def test_demo_prints_a_dense_log_of_a_controlled_shutdown(capsys):
    assert main(["demo", "--json"]) == 0
    lines = [orjson.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [r["offset"] for r in lines] == list(range(len(lines)))
    records = [record_from_obj(r) for r in lines]
    types = [r.TYPE for r in records]
    assert types[0] == "LEADER_CHANGE" and types.count("REGISTER_BROKER_RECORD") == 3
    shutdown = next(
        r
        for r in records
        if getattr(r, "in_controlled_shutdown", 0) == 1 and r.TYPE.startswith("BROKER")
    )
    assert shutdown.broker_id == 1
    last = records[-1]
    assert last.TYPE == "BROKER_REGISTRATION_CHANGE_RECORD" and last.fenced == 1


def test_demo_for_people_explains_each_step(capsys):
    assert main(["demo"]) == 0
    out = capsys.readouterr().out
    assert "broker 2 epoch mismatch" in out or "epoch mismatch" in out
    assert "broker 1 is in controlled shutdown" in out
    assert "shouldShutDown=True" in out
