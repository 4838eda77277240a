"""The web console at ``/ui`` (docs/console.md): read-only pages over the API's
own reads, served by every voter, behind the same auth as the API.

The pages are static files of api/console/ (HTML, one style sheet, ES
modules: no framework, nothing fetched from any network), sent with a strict
Content-Security-Policy (scripts and styles from this origin only, no inline
script), so that even a value the page failed to escape could not run. What
they draw comes from the API (``/v1/...``) and from two pages of the image
here, ``/ui/data/brokers`` and ``/ui/data/partitions``: the API's lists are
whole (100,000 partitions are tens of MB), the console needs a page of a
filtered list and the counts beside it. Neither is in the OpenAPI document:
they are the console's, not a contract.

Signing in: ``POST /ui/login`` with a token as its bearer header answers
the session cookie (api/console_session.py); a client certificate needs no
sign-in. Before it, only the sign-in page and its assets are served
(api/edge.py sends any other console page to it).
"""

from __future__ import annotations

import asyncio
import bisect
import importlib.resources
from dataclasses import dataclass
from typing import Annotated, Literal

from fastapi import FastAPI, Query, Request
from starlette.responses import RedirectResponse, Response

from metadata_records.errors import Errors
from metadata_records.image import MetadataImage, TopicImage

from .. import console_session
from ..errors import ApiProblem, JsonResponse
from .context import OFFLOAD_PARTITIONS, RouteContext, with_offset
from .params import ReadCaller

# No script but this origin's files, no inline script or style, no framing,
# no form posting elsewhere; fetches to this origin only.
CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; "
    "img-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'"
)
SECURITY_HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
}
TYPES = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
}
MAX_PAGE = 1_000


def _load_assets() -> dict[str, tuple[bytes, str]]:
    """Every file of api/console/ by name, read once: (content, media type)."""
    folder = importlib.resources.files("api") / "console"
    return {
        f.name: (f.read_bytes(), TYPES[suffix])
        for f in folder.iterdir()
        if (suffix := "." + f.name.rpartition(".")[2]) in TYPES
    }


ASSETS = _load_assets()


def _file(name: str, cache: str = "no-store") -> Response:
    content, media_type = ASSETS[name]
    return Response(
        content, media_type=media_type, headers={**SECURITY_HEADERS, "Cache-Control": cache}
    )


# ---------------------------------------------------------------- pages of the image


def broker_state(fenced: bool, in_controlled_shutdown: bool) -> str:
    if fenced:
        return "fenced"
    return "shuttingDown" if in_controlled_shutdown else "active"


def brokers_page(image: MetadataImage, state: str, start: int, limit: int) -> dict:
    """A page of the brokers in ``state`` ("all" for every one), by id, and the count of each state."""
    rows = []
    counts = {"all": 0, "active": 0, "fenced": 0, "shuttingDown": 0}
    for broker_id, b in sorted(image.brokers.items()):
        s = broker_state(b.fenced, b.in_controlled_shutdown)
        counts["all"] += 1
        counts[s] += 1
        if state in ("all", s):
            rows.append(
                {
                    "brokerId": broker_id,
                    "state": s,
                    "rack": b.rack,
                    "brokerEpoch": b.epoch,
                    "registrationOffset": b.registration_offset,
                }
            )
    return {
        "offset": image.last_offset,
        "total": len(rows),
        "from": start,
        "limit": limit,
        "counts": counts,
        "brokers": rows[start : start + limit],
    }


@dataclass(frozen=True)
class PartitionIndex:
    """The image's partitions in order (topic name, partition id), the ones
    under-replicated or offline, and their counts: made once per image, so
    that paging through 100,000 partitions costs a slice, not a walk."""

    offset: int
    topics: list[TopicImage]  # by name
    starts: list[int]  # the index of each topic's first partition in the whole order
    problems: list[tuple[str, int]]  # (topic id, partition id)
    under_replicated: int
    offline: int

    @staticmethod
    def of(image: MetadataImage) -> PartitionIndex:
        topics = sorted(image.topics.values(), key=lambda t: t.name)
        starts, problems = [], []
        total = under = offline = 0
        for t in topics:
            starts.append(total)
            total += len(t.partitions)
            for pid, p in sorted(t.partitions.items()):
                if p.leader < 0:
                    offline += 1
                    problems.append((t.topic_id, pid))
                elif len(p.isr) < len(p.replicas):
                    under += 1
                    problems.append((t.topic_id, pid))
        return PartitionIndex(image.last_offset, topics, starts, problems, under, offline)


def partition_row(topic: TopicImage, pid: int) -> dict:
    p = topic.partitions[pid]
    status = []
    if p.leader < 0:
        status.append("offline")
    if len(p.isr) < len(p.replicas):
        status.append("underReplicated")
    return {
        "topic": topic.name,
        "topicId": topic.topic_id,
        "partition": pid,
        "leader": p.leader,
        "leaderEpoch": p.leader_epoch,
        "replicas": list(p.replicas),
        "isr": list(p.isr),
        "elr": list(p.elr),
        "status": status,
    }


def partitions_page(
    image: MetadataImage, index: PartitionIndex, only: str, topic: str, start: int, limit: int
) -> dict:
    """A page of the partitions (``only`` "problems": the under-replicated and
    offline ones), of one topic if ``topic`` names one, with the whole counts."""
    rows: list[dict] = []
    if only == "problems":
        chosen = index.problems
        if topic:
            wanted = image.topic_by_name(topic)
            chosen = [x for x in chosen if wanted is not None and x[0] == wanted.topic_id]
        total = len(chosen)
        rows = [partition_row(image.topics[tid], pid) for tid, pid in chosen[start : start + limit]]
    elif topic:
        t = image.topic_by_name(topic)
        pids = sorted(t.partitions) if t is not None else []
        total = len(pids)
        rows = [] if t is None else [partition_row(t, pid) for pid in pids[start : start + limit]]
    else:
        total = image.partition_count
        rows = _slice_all(index, start, limit)
    return {
        "offset": image.last_offset,
        "total": total,
        "from": start,
        "limit": limit,
        "counts": {
            "topics": len(index.topics),
            "partitions": image.partition_count,
            "underReplicated": index.under_replicated,
            "offline": index.offline,
        },
        "partitions": rows,
    }


def _slice_all(index: PartitionIndex, start: int, limit: int) -> list[dict]:
    rows: list[dict] = []
    i = max(0, bisect.bisect_right(index.starts, start) - 1)
    skip = start - index.starts[i] if index.starts else 0
    while i < len(index.topics) and len(rows) < limit:
        t = index.topics[i]
        pids = sorted(t.partitions)[skip : skip + limit - len(rows)]
        rows.extend(partition_row(t, pid) for pid in pids)
        skip = 0
        i += 1
    return rows


# ---------------------------------------------------------------- routes


def pages(app: FastAPI, ctx: RouteContext) -> None:
    last_index: list[PartitionIndex] = []  # the index of the newest image asked for

    async def index_of(image: MetadataImage) -> PartitionIndex:
        if last_index and last_index[0].offset == image.last_offset:
            return last_index[0]
        if image.partition_count > OFFLOAD_PARTITIONS:
            index = await asyncio.to_thread(PartitionIndex.of, image)  # the image is immutable
        else:
            index = PartitionIndex.of(image)
        last_index[:] = [index]
        return index

    @app.get("/ui/login", include_in_schema=False)
    async def login_page() -> Response:
        return _file("login.html")

    @app.post("/ui/login", include_in_schema=False)
    async def login(request: Request, caller: ReadCaller) -> Response:
        cookie = ctx.auth.session_cookie(caller)
        headers = dict(SECURITY_HEADERS)
        if cookie is not None:
            secure = request.url.scheme == "https"
            headers["Set-Cookie"] = console_session.set_cookie(cookie, secure)
        return JsonResponse(
            {
                "principal": caller.name,
                "session": cookie is not None,
                "expiresInS": console_session.LIFETIME_S if cookie is not None else None,
            },
            headers=headers,
        )

    @app.get("/ui/logout", include_in_schema=False)
    async def logout() -> Response:
        return RedirectResponse(
            console_session.LOGIN_PAGE,
            status_code=303,
            headers={
                **SECURITY_HEADERS,
                "Set-Cookie": console_session.set_cookie("", False, max_age=0),
            },
        )

    @app.get("/ui/assets/{name}", include_in_schema=False)
    async def asset(name: str) -> Response:
        # The edge let only the sign-in page's assets through without a credential.
        if name not in ASSETS or name.endswith(".html"):
            raise ApiProblem(
                404, Errors.INVALID_REQUEST, f"no such console asset: {name[:60]!r} (see /ui)"
            )
        return _file(name, cache="no-cache")

    @app.get("/ui/data/brokers", include_in_schema=False)
    async def brokers_data(
        caller: ReadCaller,
        state: Literal["all", "active", "fenced", "shuttingDown"] = "all",
        start: Annotated[int, Query(alias="from", ge=0)] = 0,
        limit: Annotated[int, Query(ge=1, le=MAX_PAGE)] = 100,
    ) -> Response:
        image = await ctx.read_image(None)
        return with_offset(brokers_page(image, state, start, limit), image)

    @app.get("/ui/data/partitions", include_in_schema=False)
    async def partitions_data(
        caller: ReadCaller,
        only: Literal["all", "problems"] = "all",
        topic: str = "",
        start: Annotated[int, Query(alias="from", ge=0)] = 0,
        limit: Annotated[int, Query(ge=1, le=MAX_PAGE)] = 100,
    ) -> Response:
        image = await ctx.read_image(None)
        index = await index_of(image)
        return with_offset(partitions_page(image, index, only, topic, start, limit), image)

    @app.get("/ui", include_in_schema=False)
    @app.get("/ui/{page:path}", include_in_schema=False)
    async def console(caller: ReadCaller) -> Response:
        return _file("index.html")
