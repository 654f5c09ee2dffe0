#!/usr/bin/env node
// Open-loop load generator: Poisson arrivals at a fixed rate, never waiting
// for responses.  Node.js built-ins only (no dependencies).  Loopback only.
//
//   node loadgen.js --port N --path '/cpu?ms=5' --rate 50 \
//        [--count 100000] [--duration 10] [--seed 1] [--out run.csv]
//        [--host 127.0.0.1] [--warm-sockets 64] [--max-sockets 4096]
//        [--drain-timeout 15] [--spin-ms 2]
//        [--max-p99-lag-ms 1] [--max-mean-lag-frac 0.01] [--server-stats 1|0]
//   node loadgen.js --port N --path P --schedule day.json ...
//        [--metrics-port M] [--linger S]
//
// Schedule.  Interarrival times are exponential with mean 1/rate, drawn from
// a seeded mulberry32 PRNG, so a (rate, seed) pair always gives the same
// schedule.  With --schedule FILE (a JSON list of [seconds, rate] phases,
// instead of --rate) the rate is piecewise constant: within each phase the
// gaps are exponential at its rate, restarted at the phase's start (exact
// for a non-homogeneous Poisson process: the exponential is memoryless), and
// --duration defaults to the phases' total.  The run stops scheduling at
// --count requests or --duration seconds, whichever comes first, then waits at most --drain-timeout seconds
// for the responses still outstanding (those count as failed, status -1).
//
// Sending.  Each request is fired at its scheduled time with http.request,
// whatever happened to earlier ones.  Timing: the loop sleeps with setTimeout
// until --spin-ms before the next send, then polls with setImmediate (which
// still lets responses be processed) so the send is not late by a timer's
// ~1 ms granularity.
//
// Connections.  One http.Agent with keepAlive and a large maxSockets: opening
// a TCP connection per request would add a connect round trip and the
// server's accept/close CPU to every request (and the server's CPU per
// request would then not be the handler's).  Before the schedule starts,
// --warm-sockets connections are opened (that many concurrent /noop
// requests) and kept in the pool; a burst that needs more sockets opens new
// ones (counted in the summary as sockets_opened_during_run) rather than
// queueing inside the agent, which would hide queueing on the client side.
//
// Output.  --out gets one CSV row per request:
//   i,sched_ms,sent_ms,end_ms,status
// times in ms since the schedule's origin (performance.now()): sched is the
// scheduled send time, sent the actual one (sent - sched is the schedule
// lag), end when the response's last byte arrived; end - sent is the
// response time the server's queue produced, end - sched the one a user
// would see.  status is the HTTP status, or -1 for an error or no response.
// A one-line JSON summary goes to stdout.  With --server-stats 1 (default;
// needs the validation server) the generator GETs /reset right after warming
// the pool and /stats right after the last response, and puts the server's
// own counters (process CPU time, wall time, requests) in summary.server, so
// CPU per request = server.cpu_ms / server.requests_completed and measured
// utilisation = server.cpu_ms / server.wall_ms cover exactly this schedule.
//
// Exporting.  With --metrics-port M (0: off, the default) the generator serves
// GET /metrics on 127.0.0.1:M in Prometheus's text format: the histogram
// loadgen_request_duration_seconds{path} of end - sent of every successful
// scheduled request (not the warm-up), with the validation server's fine
// buckets (2^(k/4) from 0.25 ms to 4 s), observed when the response ends --
// what a proxy in front of the server (nginx's $request_time) would export,
// queue included.  --linger S keeps serving it S seconds after the report, so
// a scraper sees the last responses.
//
// Refusing to report.  The arrival process is only Poisson if the sends
// kept to the schedule.  The run is rejected when
//   p99 schedule lag > --max-p99-lag-ms (default 1 ms)  or
//   mean schedule lag > --max-mean-lag-frac (default 1 %) of the mean
//   interarrival time,
// i.e. when the realised arrival process deviated from the Poisson one by
// more than a small fraction of the times being measured (the handlers here
// take 2-20 ms).  Then the per-request rows go to OUT.rejected instead of OUT,
// summary.ok is false, a message says why on stderr and the exit code is 3.
// Failed requests (errors, non-2xx, no response) give exit code 4.
'use strict';

const http = require('node:http');
const fs = require('node:fs');
const { performance } = require('node:perf_hooks');

const EXIT_USAGE = 2;
const EXIT_SCHEDULE = 3;
const EXIT_FAILED = 4;

function usage(msg) {
  if (msg) process.stderr.write(`loadgen: ${msg}\n`);
  process.stderr.write('usage: node loadgen.js --port N --path P --rate R [--count C] [--duration S] '
    + '[--seed N] [--out FILE] [--host H] [--warm-sockets W] [--max-sockets M] [--drain-timeout S] '
    + '[--spin-ms MS] [--max-p99-lag-ms MS] [--max-mean-lag-frac F] [--server-stats 1|0] '
    + '[--schedule FILE] [--metrics-port M] [--linger S]\n');
  process.exit(EXIT_USAGE);
}

function parseArgs(argv) {
  const o = {
    host: '127.0.0.1', port: null, path: null, rate: null, count: 100000, duration: 10,
    seed: 1, out: null, warmSockets: 64, maxSockets: 4096, drainTimeout: 15, spinMs: 2,
    maxP99LagMs: 1, maxMeanLagFrac: 0.01, serverStats: 1, metricsPort: 0, linger: 0,
  };
  const numeric = {
    '--port': 'port', '--rate': 'rate', '--count': 'count', '--duration': 'duration',
    '--seed': 'seed', '--warm-sockets': 'warmSockets', '--max-sockets': 'maxSockets',
    '--drain-timeout': 'drainTimeout', '--spin-ms': 'spinMs', '--max-p99-lag-ms': 'maxP99LagMs',
    '--max-mean-lag-frac': 'maxMeanLagFrac', '--server-stats': 'serverStats',
    '--metrics-port': 'metricsPort', '--linger': 'linger',
  };
  for (let i = 2; i < argv.length; i++) {
    const a = argv[i];
    if (a === '--help' || a === '-h') usage();
    if (i + 1 >= argv.length) usage(`${a} needs a value`);
    const v = argv[++i];
    if (a in numeric) {
      const x = Number(v);
      if (!Number.isFinite(x)) usage(`${a} wants a number, got ${v}`);
      o[numeric[a]] = x;
    } else if (a === '--path') o.path = v;
    else if (a === '--out') o.out = v;
    else if (a === '--host') o.host = v;
    else if (a === '--schedule') o.phases = readPhases(v);
    else usage(`unknown argument ${a}`);
  }
  if (o.phases) {
    if (o.rate !== null) usage('give --rate or --schedule, not both');
    const total = o.phases.reduce((acc, [sec]) => acc + sec, 0);
    if (!argv.includes('--duration')) o.duration = total;
    o.rate = o.phases.reduce((acc, [sec, r]) => acc + sec * r, 0) / total;   // the mean rate
  } else {
    o.phases = null;
  }
  if (o.port === null || o.path === null || o.rate === null) usage('--port, --path and --rate (or --schedule) are required');
  if (!(o.rate > 0)) usage('--rate must be > 0');
  if (!(o.count >= 1) || !(o.duration > 0)) usage('--count and --duration must be positive');
  if (!['127.0.0.1', 'localhost', '::1'].includes(o.host)) usage('loopback hosts only');
  if (!o.path.startsWith('/')) usage('--path must start with /');
  if (!(o.linger >= 0) || !(o.metricsPort >= 0)) usage('--linger and --metrics-port must be >= 0');
  return o;
}

// The fine bucket layout of the validation server: 2^(k/4) from 0.25 ms to 4 s.
function fineBuckets() {
  const out = [];
  for (let k = 0; k <= 56; k++) out.push(Number((0.00025 * 2 ** (k / 4)).toPrecision(6)));
  return out;
}

// A Prometheus histogram of response times, served as text on /metrics.
function latencyExporter(port, path) {
  const le = fineBuckets();
  const counts = new Float64Array(le.length + 1);   // per bucket (not cumulative), last is +Inf
  let sum = 0;
  const label = path.replace(/\\/g, '\\\\').replace(/"/g, '\\"').replace(/\n/g, '\\n');
  const name = 'loadgen_request_duration_seconds';
  function text() {
    const lines = [`# HELP ${name} response time seen by the load generator (end - sent), seconds`,
      `# TYPE ${name} histogram`];
    let cum = 0;
    for (let j = 0; j < le.length; j++) {
      cum += counts[j];
      lines.push(`${name}_bucket{path="${label}",le="${le[j]}"} ${cum}`);
    }
    cum += counts[le.length];
    lines.push(`${name}_bucket{path="${label}",le="+Inf"} ${cum}`);
    lines.push(`${name}_sum{path="${label}"} ${sum}`);
    lines.push(`${name}_count{path="${label}"} ${cum}`);
    return lines.join('\n') + '\n';
  }
  const server = http.createServer((req, res) => {
    if (req.url !== '/metrics') {
      res.statusCode = 404;
      return res.end('not found\n');
    }
    res.setHeader('Content-Type', 'text/plain; version=0.0.4');
    res.end(text());
  });
  server.listen(port, '127.0.0.1');
  return {
    observe(seconds) {
      let j = 0;
      while (j < le.length && seconds > le[j]) j++;
      counts[j] += 1;
      sum += seconds;
    },
  };
}

// mulberry32: a small, fast, seeded 32-bit PRNG (public domain, T. Ettinger).
function mulberry32(seed) {
  let a = seed >>> 0;
  return function next() {
    a = (a + 0x6D2B79F5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

function readPhases(file) {
  let phases;
  try {
    phases = JSON.parse(fs.readFileSync(file, 'utf8'));
  } catch (e) {
    usage(`--schedule ${file}: ${e.message}`);
  }
  if (!Array.isArray(phases) || phases.length === 0
      || !phases.every((p) => Array.isArray(p) && p.length === 2 && p[0] > 0 && p[1] >= 0)) {
    usage(`--schedule ${file}: want a non-empty JSON list of [seconds > 0, rate >= 0] pairs`);
  }
  return phases;
}

function schedule(rate, count, durationS, seed, phases) {
  const rand = mulberry32(seed);
  const out = [];
  const list = phases || [[durationS, rate]];
  let begin = 0;
  for (const [sec, r] of list) {
    const stop = Math.min(begin + sec * 1000, durationS * 1000);
    let t = begin;
    while (r > 0) {
      t += -Math.log(1 - rand()) * (1000 / r); // 1 - u is in (0, 1]
      if (out.length >= count || t > stop) break;
      out.push(t);
    }
    begin += sec * 1000;
    if (out.length >= count || begin >= durationS * 1000) break;
  }
  return out;
}

function quantile(sorted, q) {
  if (sorted.length === 0) return NaN;
  const pos = q * (sorted.length - 1);
  const lo = Math.floor(pos);
  const hi = Math.min(lo + 1, sorted.length - 1);
  return sorted[lo] + (sorted[hi] - sorted[lo]) * (pos - lo);
}

function main() {
  const o = parseArgs(process.argv);
  const sched = schedule(o.rate, o.count, o.duration, o.seed, o.phases);
  const n = sched.length;
  const sent = new Float64Array(n).fill(NaN);
  const end = new Float64Array(n).fill(NaN);
  const status = new Int32Array(n).fill(-1);
  const agent = new http.Agent({ keepAlive: true, maxSockets: o.maxSockets, maxFreeSockets: o.maxSockets });
  let opened = 0;
  let openedDuringRun = 0;
  let running = false;
  let outstanding = 0;
  let t0 = 0;
  let nextIdx = 0;
  let finished = false;
  const errors = {};

  // Hard bound on the whole process, whatever happens.
  const hardLimitS = o.duration + o.drainTimeout + o.linger + 30;
  const exporter = o.metricsPort > 0 ? latencyExporter(o.metricsPort, o.path) : null;
  setTimeout(() => {
    process.stderr.write(`loadgen: hard time limit ${hardLimitS} s reached, aborting\n`);
    process.exit(EXIT_FAILED);
  }, hardLimitS * 1000).unref();

  function request(path, onDone) {
    const req = http.request({ host: o.host, port: o.port, path, method: 'GET', agent });
    req.on('socket', (s) => {
      if (!s.__counted) {
        s.__counted = true;
        opened++;
        if (running) openedDuringRun++;
      }
    });
    req.on('response', (res) => {
      res.resume();
      res.on('end', () => onDone(res.statusCode, null));
      res.on('error', (e) => onDone(-1, e));
    });
    req.on('error', (e) => onDone(-1, e));
    req.end();
  }

  function getJson(path, cb) {
    const chunks = [];
    const req = http.request({ host: o.host, port: o.port, path, method: 'GET', agent }, (res) => {
      res.on('data', (c) => chunks.push(c));
      res.on('end', () => {
        try {
          cb(null, JSON.parse(Buffer.concat(chunks).toString('utf8')));
        } catch (e) {
          cb(e);
        }
      });
    });
    req.on('error', (e) => cb(e));
    req.end();
  }

  function fire(i) {
    sent[i] = performance.now() - t0;
    outstanding++;
    let done = false;
    request(o.path, (code, err) => {
      if (done) return;
      done = true;
      end[i] = performance.now() - t0;
      status[i] = code;
      if (exporter && code >= 200 && code < 300) exporter.observe((end[i] - sent[i]) / 1000);
      if (err) errors[err.code || err.message] = (errors[err.code || err.message] || 0) + 1;
      outstanding--;
      if (nextIdx >= n && outstanding === 0) finish();
    });
  }

  function tick() {
    let now = performance.now() - t0;
    while (nextIdx < n && sched[nextIdx] <= now) {
      fire(nextIdx++);
      now = performance.now() - t0;
    }
    if (nextIdx >= n) {
      if (outstanding === 0) finish();
      else setTimeout(finish, o.drainTimeout * 1000).unref();
      return;
    }
    const wait = sched[nextIdx] - now;
    if (wait > o.spinMs) setTimeout(tick, wait - o.spinMs);
    else setImmediate(tick);
  }

  function finish() {
    if (finished) return;
    finished = true;
    running = false;
    if (!o.serverStats) return report(null);
    getJson('/stats', (err, st) => {
      if (err) process.stderr.write(`loadgen: GET /stats failed: ${err.message}\n`);
      report(err ? null : st);
    });
  }

  function report(serverStats) {
    const lags = [];
    const failed = [];
    for (let i = 0; i < n; i++) {
      if (!Number.isNaN(sent[i])) lags.push(sent[i] - sched[i]);
      if (!(status[i] >= 200 && status[i] < 300)) failed.push(i);
    }
    lags.sort((a, b) => a - b);
    const meanLag = lags.reduce((s, x) => s + x, 0) / Math.max(lags.length, 1);
    const meanGap = n > 1 ? sched[n - 1] / n : 1000 / o.rate;
    const p99Lag = quantile(lags, 0.99);
    const reasons = [];
    if (lags.length < n) reasons.push(`${n - lags.length} requests were never sent`);
    if (p99Lag > o.maxP99LagMs) {
      reasons.push(`p99 schedule lag ${p99Lag.toFixed(3)} ms > ${o.maxP99LagMs} ms`);
    }
    if (meanLag > o.maxMeanLagFrac * meanGap) {
      reasons.push(`mean schedule lag ${meanLag.toFixed(3)} ms > ${(100 * o.maxMeanLagFrac).toFixed(2)} % `
        + `of the mean interarrival time (${meanGap.toFixed(3)} ms)`);
    }
    const ok = reasons.length === 0;
    const summary = {
      ok,
      path: o.path,
      rate: o.rate,
      phases: o.phases,
      seed: o.seed,
      scheduled: n,
      completed: n - failed.length,
      failed: failed.length,
      errors,
      schedule_span_ms: n ? sched[n - 1] : 0,
      mean_interarrival_ms: meanGap,
      lag_mean_ms: meanLag,
      lag_p50_ms: quantile(lags, 0.5),
      lag_p99_ms: p99Lag,
      lag_max_ms: lags.length ? lags[lags.length - 1] : NaN,
      sockets_opened: opened,
      sockets_opened_during_run: openedDuringRun,
      wall_ms: performance.now() - t0,
      server: serverStats,
      reasons,
    };
    if (o.out) {
      const rows = ['i,sched_ms,sent_ms,end_ms,status'];
      for (let i = 0; i < n; i++) {
        rows.push(`${i},${sched[i].toFixed(4)},${sent[i].toFixed(4)},${end[i].toFixed(4)},${status[i]}`);
      }
      fs.writeFileSync(ok ? o.out : `${o.out}.rejected`, rows.join('\n') + '\n');
    }
    process.stdout.write(JSON.stringify(summary) + '\n');
    agent.destroy();
    let code = 0;
    if (!ok) {
      process.stderr.write(`loadgen: REFUSING TO REPORT: could not keep the schedule: ${reasons.join('; ')}\n`);
      code = EXIT_SCHEDULE;
    } else if (failed.length > 0) {
      process.stderr.write(`loadgen: ${failed.length} of ${n} requests failed: ${JSON.stringify(errors)}\n`);
      code = EXIT_FAILED;
    }
    process.exitCode = code;
    if (exporter) setTimeout(() => process.exit(code), o.linger * 1000);
    else setImmediate(() => process.exit(code));
  }

  // Warm the connection pool, zero the server's counters (so its CPU and
  // request counts cover this schedule only, not the pool's warm-up), then
  // start the schedule.
  let warm = Math.max(0, Math.floor(o.warmSockets));
  const start = () => {
    if (!o.serverStats) return begin();
    getJson('/reset', (err) => {
      if (err) {
        process.stderr.write(`loadgen: GET /reset failed: ${err.message}\n`);
        process.exit(EXIT_FAILED);
      }
      begin();
    });
  };
  const begin = () => {
    running = true;
    t0 = performance.now() + 2; // a small head start so the first send is not late
    setImmediate(tick);
  };
  if (warm === 0) start();
  else {
    let left = warm;
    for (let j = 0; j < warm; j++) {
      request('/noop', (code, err) => {
        if (err || code !== 200) {
          process.stderr.write(`loadgen: warm-up request failed: ${err ? err.message : code}\n`);
          process.exit(EXIT_FAILED);
        }
        if (--left === 0) start();
      });
    }
  }
}

main();
