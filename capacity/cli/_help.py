"""The command line's help texts and the worked example ``capacity example`` prints."""
from __future__ import annotations

import numpy as np

from .._version import __version__

EXAMPLE_HELP = """\
example:
  capacity example                  # 25 ms of CPU per request, p99 <= 1 s
  capacity example --cpu-ms 40 --p99-ms 500
"""

MAIN_HELP = """\
examples:
  capacity example                                        # the README's worked example
  capacity ceiling --cpu 25ms --slo p99=500ms             # QPS before p99 breaks (event loop)
  capacity ceiling --cpu 25ms --scv 2 --servers 1,2,4,8 --discipline fcfs --slo p99=500ms,p99.9=2s
  capacity servers --qps 500 --cpu 25ms --slo p99=200ms --per-machine 4 --redundancy 1
  capacity timeout --cpu 25ms --servers 4 --timeout 1s --max-fraction 0.1%
  capacity timeout --p999 120ms --user-limit 2s            # the 3 x P99.9 rule
  capacity scaling --qps 300 --cpu 25ms --slo p99=500ms --cores-per-machine 8   # cluster vs machine
  capacity gc --cpu 9.4ms --gc-share 27.5% --new-gc-share 7.14% --pause 47ms --new-pause 38ms
  capacity threads --qps 1000 --response 100ms --calls 3   # threads: blocking calls vs NIO
  capacity handoff --task 1.6ms --servers 2 --cpu-util 31% --burst 5ms   # does a thread pool pay?
  capacity pool --qps 800 --cpu 2ms --delay 20ms --cores 4   # a thread pool's size, its cores shared
  capacity steal --cpu 25ms --servers 4 --qps 100 --max-loss 20%   # CPU steal: when to move host
  capacity cache --hit-cpu 1ms --miss-cpu 25ms --qps 60   # the ceiling a cache hit ratio buys
  capacity endpoints /api=20qps:40ms,/static=50qps:1ms   # per-endpoint latency on one event loop
  capacity warmup --qps 60 --cpu 10ms --cold 3 --warmup-requests 2000   # the traffic ramp a fresh process needs
  capacity deploy --qps 500 --cpu 10ms --processes 10 --cold 3 --warmup-time 30s --ramp 60s   # rolling deploy
  capacity fit p50=45ms,p90=80ms,p99=300ms --qps 8 --slo p99=500ms   # CPU/request from a dashboard
  capacity fit --log access.log --slo p99=500ms           # ... or from an nginx access log
  capacity ceiling --cpu 25ms --slo p99=500ms --json      # machine-readable output

Times take units (250us, 25ms, 1.5s, 2min; a bare number is seconds); rates take
qps or a bare number.
"""

CEILING_HELP = """\
examples:
  capacity ceiling --cpu 25ms --slo p99=500ms
  capacity ceiling --cpu 25ms --scv 4 --family hyperexponential --slo p99=500ms,p99.9=2s
  capacity ceiling --cpu 25ms --servers 1,2,4,8 --discipline fcfs --slo p99=500ms --delay 5ms
"""

SERVERS_HELP = """\
examples:
  capacity servers --qps 500 --cpu 25ms --slo p99=200ms
  capacity servers --qps 500 --cpu 25ms --slo p99=200ms --per-machine 4 --redundancy 1
  capacity servers --qps 0.0556 --cpu 180s --discipline fcfs --slo-on wait --slo p80=20s   # Erlang C
"""

TIMEOUT_HELP = """\
examples:
  capacity timeout --cpu 25ms --servers 4 --timeout 1s --max-fraction 0.1%   # timeout-safe QPS
  capacity timeout --p999 120ms                                              # core call: 3 x P99.9
  capacity timeout --p999 120ms --non-core --user-limit 150ms
  capacity timeout --p999 120ms --cpu 25ms --qps 20 --discipline fcfs        # + model's timed-out share
  capacity timeout --cpu 25ms --timeout 1s --burst-qps 60                    # + how long a 60 QPS burst may last
"""

SCALING_HELP = """\
examples:
  capacity scaling --qps 300 --cpu 25ms --slo p99=500ms --cores-per-machine 8
  capacity scaling --qps 300 --cpu 25ms --slo p99=500ms --cores 16 --cores-per-machine 4 \\
      --cost-per-machine 120 --cost-per-core 15 --memory-per-process 300MB --machine-memory 8GB
  capacity scaling --qps 300 --cpu 25ms --option 1x16:rr --option 4x4:lc --option 4x4:rr --option 4x4:pooled

--option MxP[xS][:DISPATCH]: M machines x P worker processes (x S cores each, default 1);
DISPATCH is rr (round robin, default), lc (least connections), random or pooled (the ideal).
"""

GC_HELP = """\
examples:
  # seed article: 3 Node processes saturate at 320 QPS (9.4 ms CPU/request); semi-space 16 -> 64 MB
  capacity gc --cpu 9.375ms --processes 3 --gc-share 27.5% --pause 47.3ms --pause-rate 5.6 \\
      --new-gc-share 7.14% --new-pause 37.8ms --new-pause-rate 1.73 --measured-gain 10%
  capacity gc --cpu 9.4ms --gc-share 27.5% --new-gc-share 7.14% --pause 55ms --discipline ps
"""

JVM_GC_HELP = """\
examples:
  # seed article 001, 3.5: G1 young GC 27 -> 11 pauses/min, 560 -> 250 ms/min after G1NewSizePercent=35
  # (the JVM's CPU, cores and traffic are assumed: 4 ms CPU/request, 2 cores, 250 QPS)
  capacity jvm-gc --cpu 4ms --servers 2 --qps 250 --pauses 27 --pause-time 560ms \\
      --new-pauses 11 --new-pause-time 250ms --timeout 50ms --pause-scv 1
  # -Xms = -Xmx: heap-resizing pauses (here 6 of 300 ms total per minute) gone after the change
  capacity jvm-gc --cpu 4ms --servers 2 --qps 250 --pauses 27 --pause-time 560ms \\
      --resize-pauses 6 --resize-pause-time 300ms --fixed-heap --timeout 50ms
"""

THREADS_HELP = """\
examples:
  # seed article 001, 3.6: 100 concurrent requests (1000/s x 100 ms), 3 parallel blocking calls each
  capacity threads --qps 1000 --response 100ms --calls 3
  capacity threads --qps 1000 --response 100ms --calls 3 --call-time 60ms
  capacity threads --qps 20 --response 50ms --cpu-util 45% --servers 2 --load 2.2   # load vs utilisation
"""

POOL_HELP = """\
examples:
  # 800 tasks/s, 2 ms of CPU and 20 ms of blocking IO each, on 4 cores: which pool size?
  capacity pool --qps 800 --cpu 2ms --delay 20ms --cores 4
  capacity pool --qps 800 --cpu 2ms --delay 20ms --cores 4 --threads 16,18,20,24,40 --max-mean 25ms
  capacity pool --qps 450 --cpu 2ms --threads 1,2,8 --switch-cost 50us   # pure CPU: one thread per core
"""

HANDOFF_HELP = """\
examples:
  # seed article 001, 3.4: a 1.6 ms task handed to a pool on a 2-core host
  capacity handoff --task 1.6ms --servers 2 --cpu-util 31% --burst 5ms
  capacity handoff --task 5ms --parallel 3 --servers 2 --cpu-util 31% --burst 5ms --switch-cost 5us
"""

STEAL_HELP = """\
examples:
  capacity steal --cpu 25ms --servers 4 --slo p99=500ms --qps 100 --max-loss 20%
  capacity steal --cpu 25ms --discipline fcfs --slo p99=500ms --steal 0,5%,10%,20% --qps 25
"""

FIT_HELP = """\
examples:
  capacity fit p50=45ms,p90=80ms,p99=300ms --qps 8                   # what does a request cost?
  capacity fit p50=45ms,p90=80ms,p99=300ms,p99.9=600ms --qps 8 --discipline fcfs --slo p99=500ms
  capacity fit p50=45ms,p99=300ms --qps 8 --cpu-util 35% --delay constant --requests 28800
  capacity fit --log access.log --slo p99=500ms                      # nginx log (combined + times)
  capacity fit --log requests.csv --discipline fcfs --json           # CSV: time, duration_ms[, endpoint]
  capacity fit --log requests.csv --duration-unit ms                 # a duration column named without a unit
  capacity fit --prometheus http://localhost:9090 --histogram http_request_duration_seconds \
      --selector 'job="api"' --since 24h --step 5min --slo p99=500ms  # a day of a histogram + CPU
  capacity fit --prometheus buckets.json --discipline fcfs           # a saved query_range answer
  capacity fit --timeseries grafana.csv --slo p99=500ms              # qps, cpu_percent, p50_ms, p99_ms, ...
  capacity fit --k6 run.json --step 1min                             # k6 run --out json=run.json

Percentiles are pQ=TIME pairs (p50, p99, p99.9; 0.999=2s also works; p999 is ambiguous and
refused). What is not given -- discipline, CPU-time family, delay -- is chosen from the data
(every candidate fitted and compared by QAIC; the table lists the best five, --json every
one); --discipline, --family and --delay hold any of them.
"""


def _rate_where_p99_crosses(response_quantile, service, threshold: float) -> float:
    """Arrival rate at which the p99 response time equals ``threshold`` (s).

    p99 rises monotonically with load, so bracket the root in utilisation
    (0, 1) and let the shared solver find it.
    """
    from .._common import solve_increasing

    mean = float(service.mean)
    utilization = solve_increasing(
        lambda rho: np.asarray(response_quantile(0.99, rho / mean, service), dtype=float),
        np.asarray(threshold), np.asarray(1e-9), np.asarray(1 - 1e-9), log=False, rtol=1e-10)
    return float(utilization) / mean


def _example(cpu_ms: float, p99_ms: float) -> str:
    from .. import fcfs, ps
    from ..distributions import Service

    service = Service.exponential(cpu_ms / 1000.0)
    threshold = p99_ms / 1000.0
    capacity_qps = 1.0 / service.mean
    lines = [
        f"capacity {__version__} - worked example",
        f"A Node.js process spends {cpu_ms:g} ms of CPU per request (exponential, one core).",
        f"At what request rate does the p99 latency cross {p99_ms:g} ms?",
        "",
        f"{'discipline':<30}{'p99 crosses at':>16}{'utilisation':>13}{'capacity':>12}",
    ]
    for name, module in (("processor sharing (event loop)", ps), ("FCFS (blocking server)", fcfs)):
        if float(module.response_quantile(0.99, 0.0, service)) > threshold:
            lines.append(f"{name:<30}{'never (p99 > SLO even idle)':>41}")
            continue
        rate = _rate_where_p99_crosses(module.response_quantile, service, threshold)
        lines.append(f"{name:<30}{rate:>12.1f} QPS{rate * service.mean:>13.3f}{capacity_qps:>8.1f} QPS")
    lines += ["", "p99 latency (ms) by load:", f"{'QPS':>8}{'util':>7}{'PS p99':>10}{'FCFS p99':>10}"]
    rates = capacity_qps * np.array([0.25, 0.5, 0.7, 0.8, 0.9, 0.95])
    ps_p99 = np.asarray(ps.response_quantile(0.99, rates, service)) * 1000
    fcfs_p99 = np.asarray(fcfs.response_quantile(0.99, rates, service)) * 1000
    for rate, a, b in zip(rates, ps_p99, fcfs_p99):
        lines.append(f"{rate:>8.1f}{rate * service.mean:>7.2f}{a:>10.0f}{b:>10.0f}")
    lines += ["", "Same mean latency, heavier tail: an event loop shares the CPU, so one slow",
              "second slows every in-flight request at once."]
    return "\n".join(lines)
