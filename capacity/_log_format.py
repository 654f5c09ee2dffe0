"""Compiling an nginx ``log_format`` string into one regular expression over a whole chunk.

Each ``$variable`` becomes a capture group whose pattern depends on what nginx writes for it
(numbers, times, the several values of an upstream variable); literal text is escaped.  Used by
:func:`capacity.logs.read_nginx` and :func:`capacity.logs.iter_nginx`.
"""
from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

__all__: list[str] = []   # private: capacity.logs is the public face

_VAR_RE = re.compile(r"\$(?:\{(\w+)\}|(\w+))")
_NUM = r"(?:[\d.]+|-)"
_MULTI_SEP = r"(?:, | : )"  # nginx: ", " between servers of one upstream, " : " across internal redirects

# Variables nginx writes as several values when a request went to more than one upstream server.
_MULTI_FLOAT_VARS = {
    "upstream_response_time",
    "upstream_connect_time",
    "upstream_header_time",
    "upstream_queue_time",
}
_FLOAT_VARS = {"request_time"}
_INT_VARS = {"body_bytes_sent", "bytes_sent", "request_length", "connection", "connection_requests"}
_TIME_VARS = ("msec", "time_iso8601", "time_local")  # preference order when a format has several
_TIME_PATTERNS = {
    "time_local": r"\d\d/[A-Za-z]{3}/\d{4}:\d\d:\d\d:\d\d [+-]\d{4}",
    "time_iso8601": r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d[+-]\d\d:\d\d",
    "msec": r"\d+(?:\.\d+)?",
}
_RENAME = {"body_bytes_sent": "bytes"}


@dataclass
class _Field:
    var: str          # nginx variable name
    columns: tuple    # output columns it feeds
    groups: list = field(default_factory=list)  # regex group names, in order


@dataclass
class _CompiledFormat:
    log_format: str
    regex: re.Pattern
    group_names: list   # findall tuple order
    witness: int        # index of a group that is non-empty on every matching line
    bad: int            # index of the catch-all group (the whole line when it does not match)
    fields: list
    time_var: str | None
    columns: list       # output columns, in format order


def _normalise_format(log_format: str) -> str:
    """Accept a bare format string or a pasted ``log_format name '...' '...';`` directive."""
    m = re.match(r"\s*log_format\s+\S+\s+(?:escape=\S+\s+)?(.*?);?\s*$", log_format, re.S)
    if m:
        pieces = re.findall(r"'([^']*)'|\"([^\"]*)\"", m.group(1))
        if pieces:
            return "".join(a or b for a, b in pieces)
    return log_format


def _compile_format(log_format: str, usecols: Sequence[str] | None = None) -> _CompiledFormat:
    if not isinstance(log_format, str):
        raise ValueError(f"log_format must be an nginx log_format string, got {log_format!r}")
    fmt = _normalise_format(log_format)
    parts = _VAR_RE.split(fmt)
    # parts = [lit0, braced1, plain1, lit1, braced2, plain2, lit2, ...]
    literals = parts[0::3]
    names = [a or b for a, b in zip(parts[1::3], parts[2::3])]
    if not names:
        raise ValueError(f"log_format must contain at least one $variable, got {log_format!r}")
    time_var = next((v for v in _TIME_VARS if v in names), None)

    def outputs(var: str) -> tuple:
        if var == "request":
            return ("method", "path", "protocol")
        if var == time_var:
            return ("time",)
        if var in _MULTI_FLOAT_VARS:
            return (var, "upstream_attempts") if var == "upstream_response_time" else (var,)
        return (_RENAME.get(var, var),)

    all_columns = [c for v in dict.fromkeys(names) for c in outputs(v)]
    if usecols is not None:
        usecols = list(usecols)
        unknown = [c for c in usecols if c not in all_columns]
        if unknown:
            raise ValueError(f"usecols names columns {unknown!r} that log_format does not produce; "
                             f"available: {all_columns!r}")
    wanted = set(all_columns if usecols is None else usecols)

    pieces = ["^(?:"]
    group_names: list[str] = []
    fields: list[_Field] = []
    seen: set[str] = set()
    witness = None
    for i, var in enumerate(names):
        before, after = literals[i], literals[i + 1]
        pieces.append(re.escape(before))
        nxt = after[:1]
        quoted = before.endswith('"') and nxt == '"'
        stop = re.escape(nxt) if nxt else r"\r"
        plain = rf"[^{stop}\n]+"
        capture = var not in seen and any(c in wanted for c in outputs(var))
        seen.add(var)
        nonempty = True
        if var == "request":
            tail = rf'[^ {stop}\n]'
            sub = (rf"(?:(?P<g_method>[A-Za-z]+) (?P<g_path>{tail}+)(?: (?P<g_protocol>{tail}+))?"
                   rf"|(?P<g_request>[^{stop}\n]*))")
            grp = ["g_method", "g_path", "g_protocol", "g_request"]
            nonempty = False
        elif var in _TIME_PATTERNS:
            sub, grp = _TIME_PATTERNS[var], None
        elif var == "status":
            sub, grp = r"\d{3}", None
        elif var in _FLOAT_VARS or var in _INT_VARS:
            sub, grp = _NUM, None
        elif var in _MULTI_FLOAT_VARS:
            sub, grp = rf"{_NUM}(?:{_MULTI_SEP}{_NUM})*", None
        elif var.startswith("upstream_"):
            # multi-valued strings (upstream_addr, upstream_status): values may be joined by ", " or " : "
            one = rf'[^ ,{stop}\n]+'
            sub, grp = rf"{one}(?:{_MULTI_SEP}{one})*", None
        elif quoted:
            sub, grp, nonempty = r'[^"\n]*', None, False
        else:
            sub, grp = plain, None
        if not capture:
            if grp:  # strip the group names
                sub = re.sub(r"\(\?P<\w+>", "(?:", sub)
            pieces.append(f"(?:{sub})")
            continue
        if grp is None:
            gname = f"g_{var}"
            pieces.append(f"(?P<{gname}>{sub})")
            grp = [gname]
        else:
            pieces.append(sub)
        if witness is None and nonempty:
            witness = len(group_names)
        group_names.extend(grp)
        fields.append(_Field(var, outputs(var), grp))
    pieces.append(re.escape(literals[-1]))
    if witness is None:
        # Every captured group may be empty: capture the first character of a matching line instead.
        pieces.insert(1, "(?=(?P<g__witness>.))")
        group_names.insert(0, "g__witness")
        witness = 0
    pieces.append(r"|(?P<g__bad>.*))\r?$")
    # re.ASCII: nginx writes ASCII digits; \d must not accept other scripts' digits (and is cheaper).
    regex = re.compile("".join(pieces), re.M | re.ASCII)
    # findall returns groups in pattern order: recover it from the compiled pattern.
    order = sorted(regex.groupindex, key=regex.groupindex.get)
    columns = [c for c in all_columns if c in wanted]
    return _CompiledFormat(
        log_format=fmt,
        regex=regex,
        group_names=order,
        witness=order.index(group_names[witness]),
        bad=order.index("g__bad"),
        fields=fields,
        time_var=time_var,
        columns=columns,
    )
