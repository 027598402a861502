"""The console's pages. Each view asks the HTTP API (console/api.py) and renders a template;
an API problem is shown on the page with its status, code and sentence.

State changes (offset reset, DLQ re-drive) are two POSTs: the first renders what would
happen and asks to confirm, the second (with `confirmed=yes`) does it. A POST from another
origin is refused (the browser's Origin header), so a foreign page cannot submit them.
"""

from __future__ import annotations

import json
import time
from urllib.parse import quote, urlsplit

from flask import (
    Blueprint,
    abort,
    current_app,
    jsonify,
    redirect,
    render_template,
    request,
    url_for,
)
from tidemq.common import problems
from tidemq.common.errors import InvalidArgument, TideMQError
from tidemq.common.system_topics import is_system_topic
from tidemq.gateway.auth import GUARD
from tidemq.gateway.console import api, pages, series
from tidemq.gateway.console.api import ApiProblem, path_of

console_bp = Blueprint("tidemq_console", __name__, url_prefix="/console",
                       template_folder="templates", static_folder="static")
DLQ_LIMIT = 200
THROUGHPUT_WINDOW_S = 60   # a topic page's rate: messages written in the last minute
HISTORY_LIMIT = 50
SERIES_EVERY_S = 5       # the charts poll /console/series this often
SERIES_WINDOW_S = 900    # and keep this much history in the browser tab


@console_bp.before_request
def same_origin_posts():
    if request.method == "POST":
        origin = request.headers.get("Origin")
        if origin and urlsplit(origin).netloc != request.host:
            abort(403, "console forms only accept posts from the console's own pages")


@console_bp.errorhandler(ApiProblem)
def api_problem(problem: ApiProblem):
    if problem.status == 401 and current_app.extensions.get(GUARD) is not None:
        return redirect(url_for(".login", next=request.full_path))  # e.g. the token expired
    return render_template("console/problem.html", problem=problem), problem.status


@console_bp.errorhandler(TideMQError)
def form_problem(exc: TideMQError):
    problem = ApiProblem(exc.http_status, exc.code, exc.message, request.path)
    return render_template("console/problem.html", problem=problem), problem.status


@console_bp.context_processor
def chart_settings():
    return {"series_every_s": SERIES_EVERY_S, "series_window_s": SERIES_WINDOW_S}


@console_bp.app_template_filter("utc")
def _utc(ms):
    return pages.utc(ms)


def _trace_base() -> str:
    settings = current_app.extensions.get("tidemq_settings")
    return pages.trace_ui_base(getattr(settings, "trace_ui_url", ""))


def _confirmed() -> bool:
    return request.form.get("confirmed") == "yes"


@console_bp.get("/")
def index():
    return redirect(url_for(".cluster"))


@console_bp.get("/cluster")
def cluster():
    brokers = api.get("/v1/cluster")
    try:
        plane, plane_problem = api.get("/v1/cluster/control-plane"), None
    except ApiProblem as problem:  # no config center answers: the brokers still show
        plane, plane_problem = None, problem
    try:
        throttled = api.get("/v1/cluster/throttled")
    except ApiProblem:  # the brokers' answers are shown above; this table is a nicety
        throttled = None
    return render_template("console/cluster.html", cluster=brokers, plane=plane,
                           plane_problem=plane_problem, throttled=throttled, charts=True)


@console_bp.get("/series")
def series_sample():
    """One sample of the charts' counters (console/series.py), as JSON; a script reads it,
    so its errors are problem+json too (an expired login answers 401, not the login page)."""
    try:
        if request.args:
            raise InvalidArgument(f"/console/series takes no parameters, got "
                                  f"{', '.join(sorted(request.args))[:200]}")
        return jsonify(series.sample(api.get))
    except ApiProblem as problem:
        body = problems.problem_body(problem.status, problem.code, problem.detail)
    except TideMQError as exc:
        body = problems.problem_body(exc.http_status, exc.code, exc.message)
    return current_app.response_class(json.dumps(body), status=body["status"],
                                      mimetype="application/problem+json")


@console_bp.get("/topics")
def topics():
    every = api.get("/v1/topics")["topics"]
    return render_template(
        "console/topics.html", charts=True,
        topics=[t for t in every if not is_system_topic(t["name"])],
        system_topics=[t for t in every if is_system_topic(t["name"])],
        show_system=pages.parse_flag(request.args.get("system"), "system"))


@console_bp.get("/topics/<topic>")
def topic(topic: str):
    since_ms = int(time.time() * 1000) - THROUGHPUT_WINDOW_S * 1000
    described = api.get(path_of("v1", "topics", topic))
    try:
        then = api.get(path_of("v1", "topics", topic, "offsets"), timestamp_ms=since_ms)
    except ApiProblem as problem:  # a broker group down: the page still shows the rest
        then, rate_problem = None, problem
    else:
        rate_problem = None
    queues = (pages.with_recent_counts(described["queues"], then["offsets"]) if then
              else described["queues"])
    return render_template("console/topic.html", topic=described, queues=queues,
                           totals=pages.queue_totals(queues), window_s=THROUGHPUT_WINDOW_S,
                           rate_problem=rate_problem, charts=not is_system_topic(topic))


@console_bp.get("/groups")
def groups():
    return render_template("console/groups.html",
                           live=api.get("/v1/consumer-groups")["groups"],
                           defined=api.get("/v1/groups"), charts=True)


@console_bp.get("/groups/<group>")
def group(group: str):
    described = api.get(path_of("v1", "consumer-groups", group))
    topics = sorted({o["topic"] for o in described["offsets"]}
                    | {t for m in described["members"] for t in m["topics"]})
    return render_template("console/group.html", group=described, topics=topics, charts=True)


@console_bp.post("/groups/<group>/reset-offsets")
def reset_offsets(group: str):
    topic = request.form.get("topic", "")
    timestamp_ms = pages.parse_form_time(request.form.get("to"), "to")
    if not _confirmed():
        return render_template("console/confirm_reset.html", group=group, topic=topic,
                               to=request.form.get("to", ""), timestamp_ms=timestamp_ms)
    done = api.post(path_of("v1", "consumer-groups", group, "reset-offsets"),
                    {"topic": topic, "timestamp_ms": timestamp_ms})
    return render_template("console/reset_done.html", reset=done)


@console_bp.get("/messages")
def messages():
    form = {name: request.args.get(name, "").strip()
            for name in ("topic", "key", "msg_id", "begin", "end")}
    found, searched = [], False
    if form["msg_id"]:
        return redirect(url_for(".message", msg_id=form["msg_id"]))
    if form["topic"]:
        searched = True
        found = api.get(path_of("v1", "topics", form["topic"], "messages"), key=form["key"],
                        begin_ms=pages.parse_form_time(form["begin"], "begin"),
                        end_ms=pages.parse_form_time(form["end"], "end"))["messages"]
    base = _trace_base()
    return render_template("console/messages.html", form=form, searched=searched,
                           found=[(m, pages.message_trace_links(base, m)) for m in found])


@console_bp.get("/messages/<msg_id>")
def message(msg_id: str):
    shown = api.get(path_of("v1", "messages", msg_id))
    return render_template("console/message.html", message=shown,
                           links=pages.message_trace_links(_trace_base(), shown))


@console_bp.get("/dlq")
def dlq():
    group = request.args.get("group", "").strip()
    letters = (api.get(path_of("v1", "groups", group, "dlq"), limit=DLQ_LIMIT)["messages"]
               if group else [])
    return render_template("console/dlq.html", group=group, letters=letters)


@console_bp.post("/dlq/<group>/redrive")
def redrive(group: str):
    every = request.form.get("all") == "yes"
    msg_ids = request.form.getlist("msg_id")
    if not _confirmed():
        return render_template("console/confirm_redrive.html", group=group, every=every,
                               msg_ids=msg_ids)
    body = {"all": True} if every else {"msg_ids": msg_ids}
    done = api.post(path_of("v1", "groups", group, "dlq", "redrive"), body)
    return render_template("console/redrive_done.html", group=group, redriven=done["redriven"])


@console_bp.get("/config")
def config():
    prefix = request.args.get("prefix", "/tidemq/").strip() or "/"
    listed = api.get("/v1/config" + _key_path(prefix), prefix="true")
    return render_template("console/config.html", prefix=prefix, listing=listed)


@console_bp.get("/config/key")
def config_key():
    key = request.args.get("key", "").strip()
    if not key:
        return redirect(url_for(".config"))
    path = "/v1/config" + _key_path(key)
    try:
        current = api.get(path)
    except ApiProblem as problem:
        if problem.status != 404:
            raise
        current = None  # deleted (or never written): its history still tells what it was
    history = api.get(path, history="true", limit=HISTORY_LIMIT)["events"]
    return render_template("console/config_key.html", key=key, current=current,
                           history=list(reversed(history)))


def _key_path(key: str) -> str:
    """A config key as the API's path (`/tidemq/topics/a` → `/tidemq/topics/a`, quoted)."""
    return quote("/" + key.lstrip("/"), safe="/")
