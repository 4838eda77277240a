"""k8s/grafana/metaquorum-dashboard.json: every metric a panel queries is one
a real app serves on /metrics (no panel that stays empty for a typo)."""

import json
import re

from .k8s_render import K8S_DIR

DASHBOARD = K8S_DIR / "grafana" / "metaquorum-dashboard.json"
METRIC = re.compile(r"\bmetaquorum_[a-z_]+\b")


def _exposed(text: str) -> set[str]:
    names = set()
    for line in text.splitlines():
        if line and not line.startswith("#"):
            names.add(re.split(r"[{ ]", line, maxsplit=1)[0])
    return names


def test_every_dashboard_metric_is_served(local, app):
    dashboard = json.loads(DASHBOARD.read_text())
    exprs = [t["expr"] for p in dashboard["panels"] for t in p["targets"]]
    used = {m for e in exprs for m in METRIC.findall(e)}
    assert len(used) >= 20
    # One request first: the per-route series appear once a route was called.
    assert local.request(app, "GET", "/v1/quorum/status").status_code == 200
    local.request(app, "GET", "/metrics")
    exposed = _exposed(local.request(app, "GET", "/metrics").text)
    missing = sorted(used - exposed)
    assert not missing, f"the dashboard queries metrics /metrics does not serve: {missing}"


def test_panels_are_laid_out_and_use_the_datasource_variable():
    dashboard = json.loads(DASHBOARD.read_text())
    assert dashboard["uid"] == "metaquorum"
    assert [v["name"] for v in dashboard["templating"]["list"]] == ["datasource"]
    ids = [p["id"] for p in dashboard["panels"]]
    assert len(ids) == len(set(ids))
    for p in dashboard["panels"]:
        assert p["datasource"]["uid"] == "${datasource}"
        g = p["gridPos"]
        assert 0 <= g["x"] and g["x"] + g["w"] <= 24 and g["h"] > 0
        assert p["targets"] and all(t["expr"] for t in p["targets"])
