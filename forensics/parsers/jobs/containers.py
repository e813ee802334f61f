"""Format "container-status": how a container ended, as `kubectl describe pod` and `docker inspect`
print it (docs/formats.md §12).

- `kubectl describe pod`: each container's `State:` / `Last State:  Terminated` block with `Reason:`,
  `Exit Code:`, `Started:`, `Finished:` (RFC 1123 with the zone offset), and its `Restart Count:`; the
  pod's `Name:` and `Namespace:`, the container's name (the line ending in `:` above its `Container ID:`
  or `Image:`).
- `docker inspect`: the `"State"` object's `"OOMKilled": true|false`, `"ExitCode"`, `"StartedAt"`,
  `"FinishedAt"` (RFC 3339, nanoseconds), the container's `"Name"`.

`Reason: OOMKilled` or `"OOMKilled": true` is an `oom_kill` of the container's cgroup (its memory
limit, host memory); an exit code of 137 (128 + SIGKILL) without it is a `job_killed` whose cause was
not recorded (`Reason: Error` says nothing of memory); another non-zero exit is a `job_killed` only
above 128 (a signal). Each event is timed by `Finished`, its evidence the `Reason`/`OOMKilled` line,
else the `Exit Code` line; `detail` has `pod` (namespace/pod/container), `container`, `exit_code`,
`signal`, `reason`, `started`, `restart_count`, `scope` "memcg" (an OOM kill) and `cause_recorded`.
"""
from __future__ import annotations

import json
import re
from datetime import datetime, timezone

from forensics.model import Parsed, events_frame
from forensics.parsers.contract import Format

NAME = "container-status"

_TERMINATED = re.compile(r"^\s*(?:Last State|State):\s+Terminated\s*$")
_STATE_FIELD = re.compile(r"^\s+(?:Reason|Exit Code):\s+\S")
_INSPECT_MARK = re.compile(r'^\s*"(?:OOMKilled|ExitCode|FinishedAt)"\s*:')
_FIELD = re.compile(r"^(?P<indent>\s*)(?P<k>[A-Za-z][\w .-]*?):(?:\s+(?P<v>.*?))?\s*$")
_JSON_FIELD = re.compile(r'^\s*"(?P<k>[A-Za-z]+)"\s*:\s*(?P<v>"(?:[^"\\]|\\.)*"|true|false|-?[0-9]+)\s*,?\s*$')
# a JSON document's structure (brackets, a key opening an object or list): no field, nothing to count
_JSON_STRUCTURE = re.compile(r'^\s*(?:"[^"]*"\s*:\s*)?[\[\]{}]*,?\s*$')
# `docker inspect -f '{{json .State}}'` (or `{{json .}}`): the whole object on one line
_ONE_LINE = re.compile(r"^\s*[\[{]")
_SIGNALS = {9: "SIGKILL", 15: "SIGTERM", 6: "SIGABRT", 11: "SIGSEGV", 7: "SIGBUS", 2: "SIGINT", 1: "SIGHUP"}


def sniff(head: list[str]) -> str | None:
    text = [ln for ln in head[:200] if not ln.lstrip().startswith("# source:")]
    for i, ln in enumerate(text):
        # a Terminated state with its reason or exit code below it (pasted from kubectl describe pod)
        if _TERMINATED.search(ln) and any(_STATE_FIELD.match(x) for x in text[i + 1:i + 4]):
            return "kubectl describe pod (a container's Terminated state)"
    inspect = {m.group(0).split('"')[1] for ln in text if (m := _INSPECT_MARK.search(ln))}
    if {"OOMKilled", "ExitCode"} <= inspect:
        return "docker inspect (a container's State)"
    if any(_ONE_LINE.match(ln) and '"OOMKilled":' in ln and '"ExitCode":' in ln for ln in text):
        return "docker inspect (a container's State as one line of JSON)"
    return None


def _time(text: str | None) -> datetime | None:
    if not text:
        return None
    text = text.strip().strip('"')
    try:
        t = datetime.strptime(text, "%a, %d %b %Y %H:%M:%S %z")
    except ValueError:
        m = re.match(r"([0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2})(?:\.([0-9]+))?(Z|[+-][0-9]{2}:[0-9]{2})$", text)
        if not m:
            return None
        frac = (m[2] or "")[:6].ljust(6, "0")
        try:
            t = datetime.fromisoformat(f"{m[1]}.{frac}{'+00:00' if m[3] == 'Z' else m[3]}")
        except ValueError:
            return None
    # a never-run container's zero time (docker's 0001-01-01) is no time
    return t.astimezone(timezone.utc) if t.year >= 1970 else None


def _event(rec: dict, pod: str | None, ns: str | None) -> dict | None:
    code = rec.get("exit_code")
    oom = rec.get("oom")
    if not oom and (code is None or code <= 128):
        return None
    signal = _SIGNALS.get(code - 128, f"signal {code - 128}") if code is not None and code > 128 else None
    container = rec.get("container")
    who = "/".join(x for x in (ns, pod, container) if x) or None
    line, text = rec.get("reason_at") or rec.get("code_at") or (None, None)
    d = {"reporter": rec["reporter"], "pod": who if pod else None, "container": container, "exit_code": code,
         "signal": signal, "reason": rec.get("reason"), "started": rec.get("started"),
         "restart_count": rec.get("restarts"), "scope": "memcg" if oom else None, "ran_out": "host" if oom else None,
         "cause_recorded": bool(oom)}
    return {"kind": "oom_kill" if oom else "job_killed", "time": _time(rec.get("finished")),
            "process": (f"pod {who}" if pod else f"container {who}") if who else None,
            "line": line, "text": text, "detail": json.dumps({k: v for k, v in d.items() if v is not None})}


def _one_line_states(text: str) -> list[dict] | None:
    """The container states of a one-line JSON document (a State object, an inspect object or a list
    of them), with the container's name where the object has it; None when it is not JSON."""
    try:
        doc = json.loads(text)
    except ValueError:
        return None
    states = []
    for obj in doc if isinstance(doc, list) else [doc]:
        if not isinstance(obj, dict):
            continue
        state = obj if "OOMKilled" in obj else obj.get("State")
        if isinstance(state, dict) and "OOMKilled" in state:
            name = obj.get("Name")
            states.append({**state, "_name": name.lstrip("/") if isinstance(name, str) and name.strip("/") else None})
    return states


def parse(src, opts) -> Parsed:
    out = Parsed(clock="wall")
    frame = src.frame()
    pod = ns = container = None
    restarts = None
    section, cindent = None, None   # the top-level block (Containers:, ...) and its containers' indent
    rec: dict | None = None
    rows = []

    def close():
        nonlocal rec
        if rec is not None:
            ev = _event(rec, pod, ns)
            if ev is not None:
                rows.append(ev)
        rec = None

    for line_no, text in frame.select("line", "text").iter_rows():
        text = text or ""
        if text.lstrip().startswith("# source:") or _JSON_STRUCTURE.match(text):
            continue
        if _ONE_LINE.match(text) and '"OOMKilled"' in text:
            states = _one_line_states(text.strip())
            if states is None:
                out.skipped.add("a line of JSON that does not parse (cut or wrapped?)", line_no)
            for st in states or []:
                close()
                code = st.get("ExitCode")
                rec = {"reporter": "docker", "container": st["_name"] or container, "oom": st["OOMKilled"] is True,
                       "exit_code": code if isinstance(code, int) else None, "code_at": (line_no, text),
                       "reason_at": (line_no, text) if st["OOMKilled"] is True else None,
                       "started": st.get("StartedAt"), "finished": st.get("FinishedAt")}
                close()
            continue
        j = _JSON_FIELD.match(text)
        f = None if j else _FIELD.match(text)
        if not j and not f:
            out.skipped.add("not a field of a container's state", line_no)
            continue
        if j:
            k, v = j["k"], j["v"]
            if k == "Name" and v.startswith('"'):
                container = json.loads(v).lstrip("/") or None
            elif k == "OOMKilled":
                rec = rec or {"reporter": "docker", "container": container}
                rec["oom"] = v == "true"
                rec["reason_at"] = (line_no, text) if v == "true" else None
            elif k == "ExitCode" and rec is not None:
                rec["exit_code"], rec["code_at"] = int(v), (line_no, text)
            elif k in ("StartedAt", "FinishedAt") and rec is not None:
                rec["started" if k == "StartedAt" else "finished"] = json.loads(v)
                if k == "FinishedAt":
                    close()
            continue
        k, v, indent = f["k"], f["v"] or "", len(f["indent"].expandtabs(8))
        if indent == 0:
            section, cindent = k, None
        if indent == 0 and k in ("Name", "Namespace"):
            close()
            if k == "Name":
                pod, ns, container = v or None, None, None
            else:
                ns = v or None
        elif k in ("State", "Last State"):
            close()
            if v.startswith("Terminated"):
                rec = {"reporter": "kubernetes", "container": container, "restarts": restarts}
        elif not v and indent > 0 and section in ("Containers", "Init Containers") and cindent in (None, indent):
            close()
            container, restarts, cindent = k, None, indent   # a container's own block starts with its name
        elif rec is not None and rec["reporter"] == "kubernetes" and k == "Reason":
            rec["reason"], rec["oom"], rec["reason_at"] = v, v == "OOMKilled", (line_no, text)
        elif rec is not None and rec["reporter"] == "kubernetes" and k == "Exit Code" and v.lstrip("-").isdigit():
            rec["exit_code"], rec["code_at"] = int(v), (line_no, text)
        elif rec is not None and rec["reporter"] == "kubernetes" and k in ("Started", "Finished"):
            rec[k.lower()] = v
        elif k == "Restart Count" and v.isdigit():
            restarts = int(v)
            if rec is not None:
                rec["restarts"] = restarts
            for r in rows:
                d = json.loads(r["detail"])
                if d.get("container") == container and d.get("reporter") == "kubernetes":
                    r["detail"] = json.dumps({**d, "restart_count": restarts})
    close()
    if not rows:
        out.notes.append("no container ended by a signal or out of memory in it")
    out.events = events_frame(rows)
    return out


# the one name the parser list reads (parsers/contract.py)
FORMAT = Format(
    name=NAME,
    sniff=sniff,
    parse=parse,
    files="`kubectl describe pod` (`Last State: Terminated`, `Reason: OOMKilled`, `Exit Code: 137`) and `docker "
          'inspect` (`"OOMKilled"`, `"ExitCode"`)',
    yields="`oom_kill`, or `job_killed` for a 137 whose cause was not recorded",
)
