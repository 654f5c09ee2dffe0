#!/usr/bin/env node
// A small Koa server with configurable handlers, for validating capacity's
// queueing models against a real event loop.  Single process, loopback only.
//
//   node server.js [--port N] [--max-seconds S] [--watch-stdin] [--trace FILE] [--metrics]
//
// Port: --port, else $PORT, else 0 (the OS picks one).  The first line on
// stdout is always JSON: {"port": N, "pid": P, "node": "v20..."}.
//
// Handlers (all GET; times in milliseconds):
//   /cpu?ms=11                 block the event loop for ms of wall-clock time
//                              (busy loop on performance.now(); not a calibrated
//                              iteration count, so CPU ~= wall unless the
//                              process is preempted)
//   /sliced?k=5&ms=2&yield=timeout|immediate|promise
//                              k slices of ms each; after every slice but the
//                              last, await a zero-delay timer (setTimeout 0,
//                              which Node coerces to 1 ms), setImmediate, or a
//                              resolved promise (a microtask: does NOT let other
//                              requests in, a blocking control)
//   /io?ms=20                  await a timer of ms (no CPU beyond HTTP handling)
//   /mix?cpu=5&io=20&k=2&yield=timeout
//                              cpu ms of CPU in k equal slices; between
//                              consecutive slices an IO wait (timer) of
//                              io/(k-1) ms; with k=1 the IO wait follows the
//                              single slice.  With io=0 the slices are
//                              separated by `yield` as in /sliced.
//   /noop                      empty response (warm-up, ping); counted apart
//   /stats                     JSON: process CPU time (process.cpuUsage()),
//                              wall time, event-loop utilisation, request
//                              counts, and the busy loops' wall and CPU time
//                              since the last /reset
//   /reset                     zero the counters (CPU and wall baselines too)
//                              and the trace
//   /trace                     with --trace FILE: write the trace recorded
//                              since the last /reset to FILE (CSV, one row per
//                              slice: req, slice, start_ms, end_ms, entry_ms;
//                              performance.now() of this process) and answer
//                              {"rows": N}.  Tracing costs ~1 us per slice.
//   /metrics                   with --metrics: Prometheus text format from
//                              prom-client, as a team instruments a service:
//                              http_request_duration_seconds (prom-client's
//                              default buckets, 5 ms to 10 s) and
//                              http_request_duration_fine_seconds (0.25 ms to
//                              4 s, four per doubling), both labelled by route and
//                              timed in this middleware around the handler
//                              (so they do not see the wait in the socket
//                              before the event loop reads the request), and
//                              prom-client's default process metrics
//                              (process_cpu_seconds_total, event-loop lag...).
//                              Off by default: the default metrics sample the
//                              event loop, which the model checks must not see.
//
// Work routes (/cpu, /sliced, /io, /mix) count as requests; /noop, /stats and
// /reset do not, so CPU per request = cpu_ms / completed is the handler's CPU
// plus Node's and Koa's per-request HTTP overhead (a few hundred microseconds
// at most, ~4 % of an 11 ms handler) plus the tiny cost of /stats itself.
'use strict';

const Koa = require('koa');
const { performance } = require('node:perf_hooks');

function parseArgs(argv) {
  const out = {
    port: process.env.PORT !== undefined ? Number(process.env.PORT) : 0,
    maxSeconds: 3600,
    watchStdin: false,
    trace: null,
    metrics: false,
  };
  for (let i = 2; i < argv.length; i++) {
    const a = argv[i];
    if (a === '--port') out.port = Number(argv[++i]);
    else if (a === '--max-seconds') out.maxSeconds = Number(argv[++i]);
    else if (a === '--watch-stdin') out.watchStdin = true;
    else if (a === '--trace') out.trace = argv[++i];
    else if (a === '--metrics') out.metrics = true;
    else if (a === '--help' || a === '-h') {
      process.stdout.write('usage: node server.js [--port N] [--max-seconds S] [--watch-stdin] [--trace FILE] [--metrics]\n');
      process.exit(0);
    } else {
      process.stderr.write(`unknown argument: ${a}\n`);
      process.exit(2);
    }
  }
  if (!Number.isInteger(out.port) || out.port < 0 || out.port > 65535) {
    process.stderr.write(`bad port: ${out.port}\n`);
    process.exit(2);
  }
  return out;
}

// ---- the work -------------------------------------------------------------

function spin(ms) {
  // Busy loop for ms of wall-clock time, measured with performance.now().  The process's CPU
  // time over the loop is counted too (/stats: spin_cpu_ms against spin_wall_ms): on a host
  // that preempts this process the loop's CPU falls short of its wall time, and that share is
  // what the CPU per request then holds (two getrusage calls, about 1 us).
  const cpu0 = process.cpuUsage();
  const start = performance.now();
  const end = start + ms;
  let x = 0;
  while (performance.now() < end) x++;
  const cpu = process.cpuUsage(cpu0);
  counters.spinWallMs += performance.now() - start;
  counters.spinCpuMs += (cpu.user + cpu.system) / 1000;
  return x;
}

// Optional trace of when each slice ran (see /trace): the schedule the event
// loop actually produced, to compare with the models' scheduling rules.
let trace = null; // array of [req, slice, start, end, entry] when tracing
let traceSeq = 0;
function traced(ctx, slice, ms) {
  const start = performance.now();
  const x = spin(ms);
  if (trace !== null) trace.push([ctx.state.traceId, slice, start, performance.now(), ctx.state.entry]);
  return x;
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
const YIELDS = {
  timeout: () => new Promise((resolve) => setTimeout(resolve, 0)),
  immediate: () => new Promise((resolve) => setImmediate(resolve)),
  promise: () => Promise.resolve(),
};

function num(q, name, dflt, { min = 0, max = 60000 } = {}) {
  const raw = q[name];
  if (raw === undefined || raw === '') return dflt;
  const v = Number(raw);
  if (!Number.isFinite(v) || v < min || v > max) {
    const err = new Error(`bad ${name}=${raw}: want a number in [${min}, ${max}]`);
    err.status = 400;
    throw err;
  }
  return v;
}

function yieldKind(q) {
  const kind = q.yield === undefined ? 'timeout' : String(q.yield);
  if (!(kind in YIELDS)) {
    const err = new Error(`bad yield=${kind}: want timeout, immediate or promise`);
    err.status = 400;
    throw err;
  }
  return YIELDS[kind];
}

const handlers = {
  async '/cpu'(ctx) {
    const ms = num(ctx.query, 'ms', 11);
    traced(ctx, 0, ms);
    ctx.body = 'ok';
  },
  async '/sliced'(ctx) {
    const k = num(ctx.query, 'k', 5, { min: 1, max: 1000 });
    const ms = num(ctx.query, 'ms', 2);
    const yld = yieldKind(ctx.query);
    if (!Number.isInteger(k)) ctx.throw(400, 'k must be an integer');
    for (let i = 0; i < k; i++) {
      traced(ctx, i, ms);
      if (i < k - 1) await yld();
    }
    ctx.body = 'ok';
  },
  async '/io'(ctx) {
    const ms = num(ctx.query, 'ms', 20);
    await sleep(ms);
    ctx.body = 'ok';
  },
  async '/mix'(ctx) {
    const cpu = num(ctx.query, 'cpu', 5);
    const io = num(ctx.query, 'io', 20);
    const k = num(ctx.query, 'k', 2, { min: 1, max: 1000 });
    const yld = yieldKind(ctx.query);
    if (!Number.isInteger(k)) ctx.throw(400, 'k must be an integer');
    const slice = cpu / k;
    if (k === 1) {
      traced(ctx, 0, slice);
      if (io > 0) await sleep(io);
    } else {
      const wait = io / (k - 1);
      for (let i = 0; i < k; i++) {
        traced(ctx, i, slice);
        if (i < k - 1) await (wait > 0 ? sleep(wait) : yld());
      }
    }
    ctx.body = 'ok';
  },
};

// ---- counters ---------------------------------------------------------------

function freshCounters() {
  return {
    cpu0: process.cpuUsage(),
    wall0: process.hrtime.bigint(),
    elu0: performance.eventLoopUtilization(),
    started: 0,
    completed: 0,
    errors: 0,
    noop: 0,
    spinWallMs: 0,
    spinCpuMs: 0,
    byRoute: {},
  };
}
let counters = freshCounters();

function stats() {
  const cpu = process.cpuUsage(counters.cpu0);
  const wallMs = Number(process.hrtime.bigint() - counters.wall0) / 1e6;
  const elu = performance.eventLoopUtilization(counters.elu0);
  return {
    pid: process.pid,
    wall_ms: wallMs,
    cpu_user_ms: cpu.user / 1000,
    cpu_system_ms: cpu.system / 1000,
    cpu_ms: (cpu.user + cpu.system) / 1000,
    event_loop_utilization: elu.utilization,
    spin_wall_ms: counters.spinWallMs,
    spin_cpu_ms: counters.spinCpuMs,
    requests_started: counters.started,
    requests_completed: counters.completed,
    in_flight: counters.started - counters.completed,
    errors: counters.errors,
    noop: counters.noop,
    by_route: counters.byRoute,
  };
}

// ---- the app ----------------------------------------------------------------

function metricsOf(args) {
  if (!args.metrics) return null;
  const client = require('prom-client');
  const register = new client.Registry();
  client.collectDefaultMetrics({ register });
  const fine = [];
  // 2^(k/4) from 0.25 ms to 4 s: four buckets per doubling, so a few-ms handler's spread
  // (and its scv) shows in several buckets, not in one power of two.
  for (let k = 0; k <= 56; k++) fine.push(Number((0.00025 * 2 ** (k / 4)).toPrecision(6)));
  return {
    register,
    coarse: new client.Histogram({ name: 'http_request_duration_seconds', help: 'request duration (middleware)',
      labelNames: ['route'], registers: [register] }),
    fine: new client.Histogram({ name: 'http_request_duration_fine_seconds',
      help: 'request duration (middleware), fine buckets', labelNames: ['route'], buckets: fine,
      registers: [register] }),
  };
}

function main() {
  const args = parseArgs(process.argv);
  const app = new Koa();
  const metrics = metricsOf(args);

  app.use(async (ctx) => {
    const path = ctx.path;
    if (path === '/stats') {
      ctx.body = stats();
      return;
    }
    if (path === '/reset') {
      counters = freshCounters();
      if (args.trace !== null) trace = [];
      ctx.body = { reset: true };
      return;
    }
    if (path === '/trace') {
      if (args.trace === null) ctx.throw(404, 'start the server with --trace FILE');
      const rows = trace || [];
      const lines = ['req,slice,start_ms,end_ms,entry_ms'];
      for (const r of rows) lines.push(`${r[0]},${r[1]},${r[2].toFixed(4)},${r[3].toFixed(4)},${r[4].toFixed(4)}`);
      require('node:fs').writeFileSync(args.trace, lines.join('\n') + '\n');
      ctx.body = { rows: rows.length };
      return;
    }
    if (path === '/metrics') {
      if (metrics === null) ctx.throw(404, 'start the server with --metrics');
      ctx.type = metrics.register.contentType;
      ctx.body = await metrics.register.metrics();
      return;
    }
    if (path === '/noop') {
      counters.noop++;
      ctx.body = 'ok';
      return;
    }
    const handler = handlers[path];
    if (handler === undefined) {
      ctx.status = 404;
      ctx.body = `no route ${path}\n`;
      return;
    }
    counters.started++;
    ctx.state.traceId = traceSeq++;
    ctx.state.entry = performance.now();
    counters.byRoute[path] = (counters.byRoute[path] || 0) + 1;
    const t0 = metrics === null ? 0 : performance.now();
    try {
      await handler(ctx);
    } catch (err) {
      counters.errors++;
      throw err;
    } finally {
      counters.completed++;
      if (metrics !== null) {
        const seconds = (performance.now() - t0) / 1000;
        metrics.coarse.observe({ route: path }, seconds);
        metrics.fine.observe({ route: path }, seconds);
      }
    }
  });
  app.on('error', () => {}); // 4xx from bad query strings: the client sees them

  const server = app.listen(args.port, '127.0.0.1', () => {
    const { port } = server.address();
    process.stdout.write(JSON.stringify({ port, pid: process.pid, node: process.version }) + '\n');
  });
  // The load generator keeps a pool of keep-alive sockets that may sit idle
  // between runs: do not close them after Node's default 5 s.
  server.keepAliveTimeout = 600 * 1000;
  server.headersTimeout = 601 * 1000;
  server.maxRequestsPerSocket = 0;

  const stop = (code) => {
    server.close();
    server.closeAllConnections();
    process.exit(code);
  };
  process.on('SIGTERM', () => stop(0));
  process.on('SIGINT', () => stop(0));
  // Stop by itself: after a maximum lifetime, and (with --watch-stdin) when
  // the parent that started it goes away and the stdin pipe closes.
  setTimeout(() => {
    process.stderr.write(`server: max lifetime ${args.maxSeconds} s reached, exiting\n`);
    stop(0);
  }, args.maxSeconds * 1000).unref();
  if (args.watchStdin) {
    process.stdin.on('end', () => stop(0));
    process.stdin.on('error', () => stop(0));
    process.stdin.resume();
  }
}

main();
