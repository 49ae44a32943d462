// Waiting for a freshly started release to answer its health path with 2xx on 127.0.0.1, polled with a short
// growing delay, given up at a time limit or as soon as the process exits (no point polling a dead service).
import http from 'node:http';
import { setTimeout as sleep } from 'node:timers/promises';
import { Cancelled, DeployError, duration } from './errors.ts';
import { describeExit, type Exit } from './process-group.ts';

export interface HealthOptions {
  port: number;
  path: string;
  timeoutMs: number;
  /** The process's exit, to stop waiting the moment it dies. */
  exited: Promise<Exit>;
  signal: AbortSignal;
}

/** A single answer may take this long before the attempt counts as failed. */
const ATTEMPT_MS = 2_000;
const FIRST_DELAY_MS = 25;
const MAX_DELAY_MS = 500;

export async function waitHealthy(o: HealthOptions): Promise<void> {
  const deadline = Date.now() + o.timeoutMs;
  let exit: Exit | null = null;
  void o.exited.then((e) => (exit = e));
  const stop = new AbortController();
  const onAbort = () => stop.abort();
  o.signal.addEventListener('abort', onAbort, { once: true });
  void o.exited.then(onAbort);
  let last = 'no answer yet';
  let delay = FIRST_DELAY_MS;
  try {
    for (;;) {
      if (o.signal.aborted) throw new Cancelled('cancelled');
      if (exit) throw new DeployError(`the process ${describeExit(exit)} before answering GET ${o.path} with 2xx`);
      const left = deadline - Date.now();
      if (left <= 0) throw new DeployError(`GET ${o.path} did not answer 2xx within ${duration(o.timeoutMs)} (last: ${last})`);
      const status = await probe(o.port, o.path, Math.min(ATTEMPT_MS, left), stop.signal).catch((err: Error) => err);
      if (typeof status === 'number' && status >= 200 && status < 300) return;
      last = typeof status === 'number' ? `status ${status}` : status.message;
      await sleep(Math.min(delay, Math.max(0, deadline - Date.now())), undefined, { signal: stop.signal }).catch(() => {});
      delay = Math.min(MAX_DELAY_MS, delay * 2);
    }
  } finally {
    o.signal.removeEventListener('abort', onAbort);
  }
}

function probe(port: number, path: string, timeoutMs: number, signal: AbortSignal): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = http.get({ host: '127.0.0.1', port, path, agent: false, timeout: timeoutMs, signal }, (res) => {
      res.resume();
      resolve(res.statusCode ?? 0);
    });
    req.on('timeout', () => req.destroy(new Error(`no answer within ${duration(timeoutMs)}`)));
    req.on('error', (err: NodeJS.ErrnoException) => reject(new Error(err.code ?? err.message)));
  });
}
