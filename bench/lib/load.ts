// Load generator of the proxy benchmark: N raw keep-alive connections, fixed concurrency or a fixed rate, a warm-up,
// then a measured window recorded in a preallocated array; runLoadInChild() runs it in its own pinned process.
//
// Raw sockets, not an HTTP client: the generator shares a core with the upstream, and undici's Pool spent tens of µs
// per request there, so that core filled before a fast proxy's did. Like wrk, it writes one request encoded in advance
// and reads only what it needs to frame and check the answer: the status line, Content-Length and the body's length.
import assert from 'node:assert/strict';
import net from 'node:net';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { TSX, cpuTimeMs, exitWithParent, jsonLine, spawnNode, systemCpuTimeMs } from './procs.ts';

export interface LoadOptions {
  /** Origin to connect to, e.g. http://127.0.0.1:8080. */
  origin: string;
  path: string;
  /** Host header, when it must differ from the origin's (the edge routes by it). */
  host?: string;
  /** More request fields, the same on every request (credentials for an endpoint with visitor auth). */
  headers?: Record<string, string>;
  /** Keep-alive connections (one request at a time on each: no pipelining). */
  connections: number;
  /**
   * Requests in flight at once (closed loop: a new one as soon as one finishes); default and most `connections`,
   * since each connection carries one at a time: only this many connections are opened.
   */
  concurrency?: number;
  /**
   * Open loop instead: start requests on a fixed schedule of this many per second, at most `concurrency` in
   * flight. Latency is measured from each request's actual start, and starts more than 5 ms behind the schedule
   * are counted as `late`: when that count is not ~0, the load was not the one asked for.
   */
  rate?: number;
  /** Unmeasured run-in (JIT, pools, caches) before the window. */
  warmupMs: number;
  /** Length of the measured window; or give `requests`. */
  durationMs?: number;
  /** Measured window ends after this many completed requests (instead of a duration). */
  requests?: number;
  /** Every response must be 200 with exactly this many body bytes; anything else counts as an error. */
  expectBytes?: number;
  /** Processes whose CPU time (/proc) is read at the two edges of the window. */
  cpuPids?: number[];
  /** Capacity of the latency array; later samples in a longer window are counted but not recorded. */
  maxSamples?: number;
}

export interface LoadResult {
  /** Correct responses completed inside the window. */
  requests: number;
  errors: number;
  firstError?: string;
  windowMs: number;
  rps: number;
  p50Ms: number;
  p99Ms: number;
  maxMs: number;
  /** Latencies recorded (equals `requests` unless maxSamples was reached). */
  samples: number;
  /** Fixed-rate runs: requests started more than 5 ms behind schedule. */
  late: number;
  /** CPU ms used by each of `cpuPids` during the window (NaN where unreadable). */
  cpuMs: number[];
  /** CPU ms used by the load generator itself during the window. */
  selfCpuMs: number;
  /** CPU ms the whole machine used in the window (user + system, all CPUs): ours plus anything else running. */
  systemCpuMs: number;
}

const LATE_MS = 5;

/** Nearest-rank percentile of sorted values. */
function percentile(sorted: Float64Array, p: number): number {
  if (sorted.length === 0) return Number.NaN;
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))];
}

function validate(o: LoadOptions): void {
  const positiveInt = (name: string, v: number | undefined, optional: boolean) => {
    if (v === undefined && optional) return;
    if (!Number.isInteger(v) || (v as number) <= 0) throw new RangeError(`load: ${name} must be a positive integer, got ${v}`);
  };
  positiveInt('connections', o.connections, false);
  positiveInt('concurrency', o.concurrency, true);
  positiveInt('durationMs', o.durationMs, true);
  positiveInt('requests', o.requests, true);
  if (!(o.warmupMs >= 0)) throw new RangeError(`load: warmupMs must be >= 0, got ${o.warmupMs}`);
  if ((o.durationMs === undefined) === (o.requests === undefined)) throw new RangeError('load: give exactly one of durationMs and requests');
  if (o.rate !== undefined && !(o.rate > 0)) throw new RangeError(`load: rate must be > 0 requests/s, got ${o.rate}`);
  encodeRequest(o); // throws on an origin or a field it cannot send
}

/** The request every connection sends, whole: request line, Host, the extra fields, the blank line. */
function encodeRequest(o: LoadOptions): Buffer {
  const url = new URL(o.origin);
  if (url.protocol !== 'http:') throw new RangeError(`load: origin must be http://host:port, got ${o.origin}`);
  if (!o.path.startsWith('/') || /[\s\x00-\x1f\x7f]/.test(o.path)) throw new RangeError(`load: path must be an origin-form target, got ${JSON.stringify(o.path)}`);
  const fields: Array<[string, string]> = [];
  let host = o.host ?? url.host;
  for (const [name, value] of Object.entries(o.headers ?? {})) {
    if (name.toLowerCase() === 'host') {
      host = o.host ?? value; // as before: the `host` option wins over a Host in `headers`
      continue;
    }
    fields.push([name, value]);
  }
  fields.unshift(['Host', host]);
  let text = `GET ${o.path} HTTP/1.1\r\n`;
  for (const [name, value] of fields) {
    // RFC 9110 §5.1 token and §5.5 field value: a CR or LF would split the request into something else.
    if (!/^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/.test(name) || /[\r\n\x00]/.test(value)) throw new RangeError(`load: cannot send header field ${JSON.stringify(name)}`);
    text += `${name}: ${value}\r\n`;
  }
  return Buffer.from(`${text}\r\n`, 'latin1');
}

const HEAD_END = Buffer.from('\r\n\r\n');
/** A response head longer than this is refused, as Node's own parser does. */
const MAX_HEAD_BYTES = 16 * 1024;
// The fields that frame a response or end its connection, found in one scan of the head.
const FIELDS = /\r\n(connection|content-length|transfer-encoding)[ \t]*:[ \t]*([^\r]*)/gi;
const CLOSE_TOKEN = /(?:^|,)[ \t]*close[ \t]*(?:,|$)/i;
const KEEP_ALIVE_TOKEN = /(?:^|,)[ \t]*keep-alive[ \t]*(?:,|$)/i;

/** Called for each complete response: its status, the body bytes that came, and whether the server closes after it. */
export type OnResponse = (status: number, bodyBytes: number, close: boolean) => void;

/**
 * HTTP/1.1 response framing for the load generator, fed a connection's reads: a response split over many reads and
 * several responses in one read both come out whole, in order. Only Content-Length framing (and bodiless 204/304) is
 * understood; chunked or close-delimited bodies, and 1xx answers, are errors, since it could not tell where they end.
 */
export class ResponseParser {
  /** Part of a head that has not reached its blank line yet. */
  private pending: Buffer | undefined;
  /** Body bytes still to come; -1 while reading a head. */
  private remaining = -1;
  private status = 0;
  private bodyBytes = 0;
  private close = false;

  /** True while a response has started (head bytes or body pending) and not ended. */
  get midResponse(): boolean {
    return this.pending !== undefined || this.remaining >= 0;
  }

  /** Feeds one read. Returns an error message when the bytes cannot be framed: the connection is then unusable. */
  push(chunk: Buffer, onResponse: OnResponse): string | undefined {
    let buf = chunk;
    let off = 0;
    while (off < buf.length) {
      if (this.remaining > 0) {
        const take = Math.min(this.remaining, buf.length - off);
        this.remaining -= take;
        this.bodyBytes += take;
        off += take;
        if (this.remaining === 0) this.finish(onResponse);
        continue;
      }
      let start = off;
      let from = off;
      if (this.pending) {
        // The blank line may straddle the seam: resume the search 3 bytes before it.
        from = Math.max(0, this.pending.length - 3);
        buf = Buffer.concat([this.pending, buf.subarray(off)]);
        start = 0;
        this.pending = undefined;
      }
      const end = buf.indexOf(HEAD_END, from);
      if (end < 0) {
        if (buf.length - start > MAX_HEAD_BYTES) return `response head over ${MAX_HEAD_BYTES} bytes`;
        this.pending = Buffer.from(buf.subarray(start)); // a copy: not the whole read kept for a few bytes
        return undefined;
      }
      const error = this.head(buf.toString('latin1', start, end));
      if (error !== undefined) return error;
      off = end + 4;
      if (this.remaining === 0) this.finish(onResponse);
    }
    return undefined;
  }

  /** Reads a status line and the framing fields; sets what the body needs. */
  private head(head: string): string | undefined {
    // status-line = HTTP-version SP status-code SP [ reason-phrase ] (RFC 9112 §4)
    const code = head.charCodeAt(9) - 48;
    const status = code * 100 + (head.charCodeAt(10) - 48) * 10 + (head.charCodeAt(11) - 48);
    if (!/^HTTP\/1\.[01] [1-5]\d\d(?: |\r|$)/.test(head.slice(0, 13))) return `not an HTTP/1.x status line: ${JSON.stringify(head.slice(0, 40))}`;
    if (code === 1) return `informational ${status} answer (the generator sends no Expect and asks for no upgrade)`;
    let length = -1;
    let close = head.charCodeAt(7) === 48; // HTTP/1.0: closes unless it says keep-alive
    FIELDS.lastIndex = 12;
    for (let m = FIELDS.exec(head); m !== null; m = FIELDS.exec(head)) {
      const name = m[1].toLowerCase();
      const value = m[2].trimEnd();
      if (name === 'transfer-encoding') return `cannot frame Transfer-Encoding: ${value} (Content-Length only)`;
      if (name === 'connection') close = CLOSE_TOKEN.test(value) || (close && !KEEP_ALIVE_TOKEN.test(value));
      else {
        // RFC 9112 §6.3: a bad or conflicting Content-Length is unrecoverable framing.
        const n = /^\d{1,15}$/.test(value) ? Number(value) : -1;
        if (n < 0 || (length >= 0 && n !== length)) return `bad Content-Length: ${value}`;
        length = n;
      }
    }
    // 204 and 304 have no body whatever they say (RFC 9112 §6.3); everything else here needs a length.
    if (status === 204 || status === 304) length = 0;
    else if (length < 0) return `status ${status} without Content-Length (a body until close cannot be framed on keep-alive)`;
    this.status = status;
    this.close = close;
    this.bodyBytes = 0;
    this.remaining = length;
    return undefined;
  }

  private finish(onResponse: OnResponse): void {
    this.remaining = -1;
    onResponse(this.status, this.bodyBytes, this.close);
  }
}

export async function runLoad(options: LoadOptions): Promise<LoadResult> {
  validate(options);
  const slots = Math.min(options.concurrency ?? options.connections, options.connections);
  const pids = options.cpuPids ?? [];
  const latencies = new Float64Array(options.maxSamples ?? 1 << 21);
  const request = encodeRequest(options);
  const readBuffer = Buffer.allocUnsafe(64 * 1024);
  const url = new URL(options.origin);
  const port = Number(url.port || 80);
  const hostname = url.hostname.replace(/^\[|\]$/g, '');

  // Window state. A request counts where it completes: steady state makes that unbiased, and the CPU readings
  // bracket exactly the same interval.
  let measuring = false;
  let stopping = false;
  let count = 0;
  let errors = 0;
  let late = 0;
  let firstError: string | undefined;
  let windowStart = 0;
  let windowEnd = 0;
  let cpuStart: number[] = [];
  let cpuEnd: number[] = [];
  let systemStart = 0;
  let systemEnd = 0;
  let selfStart: NodeJS.CpuUsage | undefined;
  let selfEnd: NodeJS.CpuUsage | undefined;
  let endWindow: () => void = () => {};
  const windowOver = new Promise<void>((resolve) => {
    endWindow = () => {
      if (!measuring) return;
      windowEnd = performance.now();
      cpuEnd = pids.map(cpuTimeMs);
      systemEnd = systemCpuTimeMs();
      selfEnd = process.cpuUsage(selfStart);
      measuring = false;
      stopping = true;
      resolve();
    };
  });
  const startWindow = () => {
    selfStart = process.cpuUsage();
    cpuStart = pids.map(cpuTimeMs);
    systemStart = systemCpuTimeMs();
    windowStart = performance.now();
    measuring = true;
  };

  const fail = (message: string) => {
    if (!measuring) return;
    errors++;
    firstError ??= message;
  };

  const t0 = performance.now();
  const interval = options.rate ? 1000 / options.rate : 0;
  let slot = 0;
  let open = 0;
  const stops: Array<() => void> = [];
  let allClosed: () => void = () => {};
  const closed = new Promise<void>((resolve) => (allClosed = resolve));

  /**
   * One connection and its loop: send, read the answer, check it, send the next (closed loop) or wait for the next
   * slot of the schedule (fixed rate). A lost connection is an error for the request on it, then a new one.
   */
  function connection(): void {
    let socket: net.Socket;
    let inFlight = false;
    let started = 0;
    let timer: NodeJS.Timeout | undefined;
    let done = false;

    const stop = () => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      socket.destroy();
      if (--open === 0) allClosed();
    };
    const send = () => {
      inFlight = true;
      started = performance.now();
      socket.write(request);
    };
    const fire = () => {
      timer = undefined;
      if (stopping) stop();
      else send();
    };
    const next = () => {
      if (stopping) return stop();
      if (interval > 0) {
        // Claim the next slot of the schedule and wait for its time; a connection that comes back late starts at once.
        const due = t0 + slot++ * interval;
        const wait = due - performance.now();
        if (wait > 0) {
          timer = setTimeout(fire, wait);
          return;
        }
        if (measuring && -wait > LATE_MS) late++;
      }
      send();
    };
    const connect = () => {
      const parser = new ResponseParser();
      const onRead = (n: number, buffer: Uint8Array): boolean => {
        if (!current()) return true;
        const error = parser.push((buffer as Buffer).subarray(0, n), onResponse);
        if (error !== undefined && current()) {
          inFlight = false;
          fail(error);
          drop();
        }
        return true;
      };
      // Reads land in one buffer that every connection shares (the parser copies the little it keeps), handed over
      // without the Readable stream's per-read buffer and events.
      const s = net.connect({ host: hostname, port, noDelay: true, onread: { buffer: readBuffer, callback: onRead } });
      socket = s;
      let connected = false;
      let lastError: Error | undefined;
      // A new socket replaces this one on a loss; events of the old one are ignored from then on.
      const current = () => socket === s && !done;
      const drop = () => {
        s.destroy();
        if (stopping) return stop();
        if (connected) connect();
        // Refused or unreachable: try again soon rather than spin on a dead port.
        else timer = setTimeout(() => (timer = undefined, stopping ? stop() : connect()), 100);
      };
      const onResponse: OnResponse = (status, bodyBytes, close) => {
        if (!current()) return;
        if (!inFlight) {
          fail(`a response (status ${status}) with no request in flight`);
          return drop();
        }
        inFlight = false;
        if (status !== 200) fail(`status ${status}`);
        else if (options.expectBytes !== undefined && bodyBytes !== options.expectBytes) fail(`${bodyBytes} body bytes, expected ${options.expectBytes}`);
        else if (measuring) {
          if (count < latencies.length) latencies[count] = performance.now() - started;
          count++;
          if (options.requests !== undefined && count >= options.requests) endWindow();
        }
        if (close) drop();
        else next();
      };
      s.once('connect', () => {
        connected = true;
        if (current()) next();
      });
      s.on('error', (err) => (lastError = err));
      s.on('close', () => {
        if (!current()) return;
        if (inFlight || parser.midResponse) {
          inFlight = false;
          fail(`connection closed with a request in flight${lastError ? `: ${lastError.message}` : ''}`);
        } else if (!connected) {
          fail(`cannot connect: ${lastError?.message ?? 'closed'}`);
        }
        drop();
      });
    };
    open++;
    stops.push(stop);
    connect();
  }

  const warmup = setTimeout(() => {
    startWindow();
    if (options.durationMs !== undefined) setTimeout(endWindow, options.durationMs);
  }, options.warmupMs);
  for (let i = 0; i < slots; i++) connection();
  try {
    await windowOver;
    // Requests in flight finish (uncounted) before their connections close, as the old pool's workers did; bounded.
    let bound: NodeJS.Timeout | undefined;
    await Promise.race([closed, new Promise<void>((r) => (bound = setTimeout(r, 10_000)))]);
    clearTimeout(bound);
  } finally {
    clearTimeout(warmup);
    stopping = true;
    for (const stop of stops) stop();
  }

  const windowMs = windowEnd - windowStart;
  const samples = Math.min(count, latencies.length);
  const sorted = latencies.subarray(0, samples).sort();
  return {
    requests: count,
    errors,
    firstError,
    windowMs,
    rps: (count * 1000) / windowMs,
    p50Ms: percentile(sorted, 50),
    p99Ms: percentile(sorted, 99),
    maxMs: samples > 0 ? sorted[samples - 1] : Number.NaN,
    samples,
    late,
    cpuMs: pids.map((_, i) => cpuEnd[i] - cpuStart[i]),
    selfCpuMs: selfEnd ? (selfEnd.user + selfEnd.system) / 1000 : Number.NaN,
    systemCpuMs: systemEnd - systemStart,
  };
}

/**
 * Runs the load in a child process of its own (pinned to `cpu` when given), so that the generator's CPU use is
 * placed where the benchmark decides and never shares an event loop with the code that orchestrates the run.
 */
export async function runLoadInChild(options: LoadOptions, cpu: number | null): Promise<LoadResult> {
  validate(options);
  // V8's incremental marking, driven by the external memory of socket reads (64 MB/s at 1,000 large responses/s),
  // ran steps of up to 18 ms in the generator and put them into the p99 of every path; marking in one go makes
  // those pauses 3-6 ms and rarer. It tunes the instrument only: the processes under test keep V8's defaults.
  const nodeArgs = ['--no-incremental-marking', ...TSX];
  const child = spawnNode('load generator', fileURLToPath(import.meta.url), [JSON.stringify(options)], { cpu, nodeArgs });
  try {
    const bound = options.durationMs ?? 600_000;
    const line = await child.waitForLine((l) => jsonLine(l)?.result as LoadResult | undefined, options.warmupMs + bound + 30_000);
    // JSON has no NaN: a missing value comes back as null.
    const num = (v: number | null) => (v === null ? Number.NaN : v);
    return { ...line, cpuMs: line.cpuMs.map(num), selfCpuMs: num(line.selfCpuMs), systemCpuMs: num(line.systemCpuMs) };
  } finally {
    await child.stop();
  }
}

/**
 * `tsx bench/lib/load.ts --self-test`: the raw HTTP/1.1 framing of this generator and of bench/upstream.ts, checked
 * on plain bytes (every split of a stream, several messages in one read) and against real servers on port 0.
 */
async function selfTest(): Promise<void> {
  const { createUpstreamServer, parseRequestHead, RequestSplitter, BODY_BYTES } = await import('../upstream.ts');
  const checks: Array<[string, () => unknown]> = [];
  const check = (name: string, fn: () => unknown) => checks.push([name, fn]);

  /** Feeds `chunks` to a fresh parser; the responses it gave, and its error if any. */
  const parse = (chunks: Buffer[]) => {
    const parser = new ResponseParser();
    const got: Array<[number, number, boolean]> = [];
    for (const chunk of chunks) {
      const error = parser.push(chunk, (status, bytes, close) => got.push([status, bytes, close]));
      if (error !== undefined) return { got, error };
    }
    return { got, error: undefined, midResponse: parser.midResponse };
  };
  /** The stream cut every `size` bytes. */
  const cut = (b: Buffer, size: number) => Array.from({ length: Math.ceil(b.length / size) }, (_, i) => b.subarray(i * size, (i + 1) * size));
  const large = 'y'.repeat(70_000);
  const stream = Buffer.from(
    'HTTP/1.1 200 OK\r\nContent-Length: 5\r\nDate: x\r\n\r\nhello' +
      'HTTP/1.1 404 Not Found\r\ncontent-length:0\r\n\r\n' +
      'HTTP/1.1 204 No Content\r\n\r\n' +
      `HTTP/1.1 200 OK\r\nCONTENT-LENGTH: ${large.length}\r\nConnection: keep-alive\r\n\r\n${large}` +
      'HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok',
    'latin1',
  );
  const expected = [
    [200, 5, false],
    [404, 0, false],
    [204, 0, false],
    [200, large.length, false],
    [200, 2, true],
  ];
  check('responses: several in one read, and split at every size down to single bytes', () => {
    for (const size of [stream.length, 1, 2, 3, 7, 64, 1000, 65_536]) assert.deepEqual(parse(cut(stream, size)), { got: expected, error: undefined, midResponse: false }, `cut every ${size}`);
  });
  check('responses: a partial one is still pending', () => {
    assert.equal(parse([stream.subarray(0, 20)]).midResponse, true);
    assert.equal(parse([stream.subarray(0, 50)]).midResponse, true);
  });
  check('responses: what cannot be framed is an error', () => {
    const err = (text: string) => parse(cut(Buffer.from(text, 'latin1'), 3)).error;
    assert.match(err('HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n') ?? '', /Transfer-Encoding/);
    assert.match(err('HTTP/1.1 200 OK\r\nConnection: close\r\n\r\nbody until close') ?? '', /without Content-Length/);
    assert.match(err('HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n') ?? '', /bad Content-Length/);
    assert.match(err('HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n') ?? '', /bad Content-Length/);
    assert.match(err('HTTP/1.1 100 Continue\r\n\r\n') ?? '', /informational/);
    assert.match(err('SSH-2.0-OpenSSH\r\n\r\n') ?? '', /not an HTTP/);
    assert.match(err(`HTTP/1.1 200 OK\r\nX: ${'a'.repeat(MAX_HEAD_BYTES)}`) ?? '', /head over/);
    assert.deepEqual(parse([Buffer.from('HTTP/1.0 200 OK\r\nContent-Length: 0\r\n\r\n')]).got, [[200, 0, true]], 'HTTP/1.0 closes');
  });

  const requests = Buffer.from(
    'GET /small HTTP/1.1\r\nHost: a\r\n\r\n' + 'GET /large HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n' + 'GET /nope HTTP/1.1\r\nHost: a\r\n\r\n',
    'latin1',
  );
  check('requests: heads come out whole from one read and from every split', () => {
    for (const size of [requests.length, 1, 2, 3, 5, 17]) {
      const splitter = new RequestSplitter();
      const heads = cut(requests, size).flatMap((c) => splitter.push(c).heads);
      assert.deepEqual(heads, ['GET /small HTTP/1.1\r\nHost: a', 'GET /large HTTP/1.1\r\nHost: a\r\nConnection: close', 'GET /nope HTTP/1.1\r\nHost: a'], `cut every ${size}`);
    }
    assert.equal(new RequestSplitter().push(Buffer.alloc(20_000, 'a')).tooLong, true);
  });
  check('requests: a bodiless GET is served, anything the server cannot frame is refused', () => {
    assert.deepEqual(parseRequestHead('GET /small HTTP/1.1\r\nHost: a'), { path: '/small', close: false });
    assert.deepEqual(parseRequestHead('GET /small HTTP/1.1\r\nconnection: Close'), { path: '/small', close: true });
    assert.deepEqual(parseRequestHead('GET /small HTTP/1.0'), { path: '/small', close: true });
    assert.deepEqual(parseRequestHead('GET /small HTTP/1.0\r\nConnection: keep-alive'), { path: '/small', close: false });
    assert.deepEqual(parseRequestHead('GET /small HTTP/1.1\r\nContent-Length: 0'), { path: '/small', close: false });
    for (const bad of ['GET /small HTTP/1.1\r\nContent-Length: 3', 'GET /small HTTP/1.1\r\nTransfer-Encoding: chunked', 'POST /small HTTP/1.1', 'GET /small', 'hello', 'GET /small HTTP/2.0']) {
      assert.equal(parseRequestHead(bad).path, undefined, bad);
    }
  });

  check('requests: one encoded in advance, nothing a field could smuggle', () => {
    const base = { connections: 1, warmupMs: 0, requests: 1 };
    assert.equal(encodeRequest({ ...base, origin: 'http://127.0.0.1:8080', path: '/a?b' }).toString('latin1'), 'GET /a?b HTTP/1.1\r\nHost: 127.0.0.1:8080\r\n\r\n');
    assert.throws(() => encodeRequest({ ...base, origin: 'http://a', path: '/', headers: { 'x-a': 'b\r\nx: y' } }), /cannot send header field/);
    assert.throws(() => encodeRequest({ ...base, origin: 'http://a', path: '/a b' }), /origin-form/);
    assert.throws(() => encodeRequest({ ...base, origin: 'https://a', path: '/' }), /origin must be http/);
  });

  /** A server on port 0 whose connections `serve` handles; closes every connection at the end. */
  const withServer = async (server: net.Server, fn: (origin: string) => Promise<void>) => {
    const sockets = new Set<net.Socket>();
    server.on('connection', (s) => (sockets.add(s), s.on('close', () => sockets.delete(s))));
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    try {
      await fn(`http://127.0.0.1:${(server.address() as net.AddressInfo).port}`);
    } finally {
      for (const s of sockets) s.destroy();
      await new Promise((r) => server.close(r));
    }
  };
  /** The heads of every request a raw server received, and a server that answers each with `answer(n)`. */
  const rawServer = (answer: (n: number, socket: net.Socket) => void, heads: string[] = []) => {
    let n = 0;
    return net.createServer((socket) => {
      const splitter = new RequestSplitter();
      socket.on('error', () => {});
      socket.on('data', (chunk) => {
        for (const head of splitter.push(chunk).heads) {
          heads.push(head);
          answer(n++, socket);
        }
      });
    });
  };

  const asyncChecks: Array<[string, () => Promise<void>]> = [
    [
      'upstream: pipelined requests written a byte at a time get their answers in order',
      () =>
        withServer(createUpstreamServer(), async (origin) => {
          const socket = net.connect(Number(new URL(origin).port), '127.0.0.1');
          const parser = new ResponseParser();
          const got: Array<[number, number, boolean]> = [];
          const ended = new Promise<void>((resolve, reject) => {
            socket.on('data', (c: Buffer) => {
              const error = parser.push(c, (status, bytes, close) => got.push([status, bytes, close]));
              if (error) reject(new Error(error));
            });
            socket.on('close', () => resolve());
          });
          socket.setNoDelay(true);
          const pipelined = Buffer.concat([Buffer.from('GET /nope HTTP/1.1\r\nHost: a\r\n\r\n'), requests]);
          for (const byte of cut(pipelined, 1)) socket.write(byte);
          await ended; // the second request asked for Connection: close
          assert.deepEqual(got, [
            [404, 0, false],
            [200, BODY_BYTES['/small'], false],
            [200, BODY_BYTES['/large'], true],
          ]);
        }),
    ],
    [
      'load + upstream: a closed-loop window and a fixed-rate window without errors, Host and fields sent',
      () =>
        withServer(createUpstreamServer(), async (origin) => {
          const closed = await runLoad({ origin, path: '/large', connections: 4, warmupMs: 0, requests: 500, expectBytes: BODY_BYTES['/large'] });
          assert.equal(closed.errors, 0, closed.firstError);
          assert.equal(closed.requests, 500);
          const fixed = await runLoad({ origin, path: '/small', connections: 4, rate: 400, warmupMs: 0, durationMs: 250, expectBytes: 100 });
          assert.equal(fixed.errors, 0, fixed.firstError);
          assert.ok(fixed.requests > 0);
          const wrong = await runLoad({ origin, path: '/small', connections: 2, warmupMs: 0, durationMs: 100, expectBytes: 99 });
          assert.ok(wrong.errors > 0 && wrong.requests === 0);
          assert.equal(wrong.firstError, '100 body bytes, expected 99');
        }),
    ],
    [
      'load: the request carries Host and the extra fields; a lost connection is an error, then a new one',
      async () => {
        const heads: string[] = [];
        const ok = Buffer.from('HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nabc');
        // Every third request's connection is cut before its answer; the rest are answered in pieces.
        const server = rawServer((n, socket) => {
          if (n % 3 === 2) return void socket.destroy();
          for (const piece of cut(ok, 4)) socket.write(piece);
        }, heads);
        await withServer(server, async (origin) => {
          const r = await runLoad({ origin, path: '/x', host: 'h.example', headers: { 'x-extra': 'v', host: 'ignored' }, connections: 2, warmupMs: 0, requests: 40, expectBytes: 3 });
          assert.equal(r.requests, 40);
          assert.ok(r.errors > 0);
          assert.match(r.firstError ?? '', /connection closed with a request in flight/);
          assert.equal(heads[0], 'GET /x HTTP/1.1\r\nHost: h.example\r\nx-extra: v');
        });
      },
    ],
    [
      'load: a chunked answer is an error, not a count',
      () =>
        withServer(
          rawServer((_n, socket) => socket.write('HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n')),
          async (origin) => {
            const r = await runLoad({ origin, path: '/', connections: 1, warmupMs: 0, durationMs: 100, expectBytes: 3 });
            assert.equal(r.requests, 0);
            assert.ok(r.errors > 0);
            assert.match(r.firstError ?? '', /Transfer-Encoding: chunked/);
          },
        ),
    ],
  ];

  let failed = 0;
  const report = (name: string, err?: unknown) => {
    if (err) failed++;
    process.stdout.write(`${err ? 'not ok' : 'ok'} - ${name}${err ? `\n  ${String((err as Error).stack ?? err).replace(/\n/g, '\n  ')}` : ''}\n`);
  };
  for (const [name, fn] of checks) {
    try {
      fn();
      report(name);
    } catch (err) {
      report(name, err);
    }
  }
  for (const [name, fn] of asyncChecks) {
    try {
      await fn();
      report(name);
    } catch (err) {
      report(name, err);
    }
  }
  process.stdout.write(`${failed === 0 ? 'all' : `${failed} of`} ${checks.length + asyncChecks.length} checks ${failed === 0 ? 'passed' : 'failed'}\n`);
  process.exitCode = failed === 0 ? 0 : 1;
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  if (process.argv[2] === '--self-test') {
    await selfTest();
  } else {
    exitWithParent();
    const result = await runLoad(JSON.parse(process.argv[2] ?? '{}') as LoadOptions);
    process.stdout.write(`${JSON.stringify({ result })}\n`);
    process.exit(0);
  }
}
