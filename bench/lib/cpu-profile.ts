// Reads a V8 .cpuprofile (node --cpu-prof) and prints its top frames by self time, and the share of garbage collection
// and idle time: what docs/performance.md quotes. `npx tsx bench/lib/cpu-profile.ts <file.cpuprofile> [top]`.
import { readFileSync } from 'node:fs';
import { pathToFileURL } from 'node:url';

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  children?: number[];
}

interface CpuProfile {
  nodes: ProfileNode[];
  samples: number[];
  timeDeltas: number[];
  startTime: number;
  endTime: number;
}

export interface FrameShare {
  frame: string;
  /** Share of the busy (non-idle) samples, percent. */
  selfPct: number;
}

export interface ProfileSummary {
  /** Wall time the profile covers, ms. */
  spanMs: number;
  /** Share of all samples the process was idle (waiting in the event loop), percent. */
  idlePct: number;
  /** Share of the busy samples spent in V8's garbage collector, percent. */
  gcPct: number;
  top: FrameShare[];
}

/** Short name of a frame: function and file (last two path parts) with line, or V8's own names in parentheses. */
function frameName(n: ProfileNode): string {
  const { functionName, url, lineNumber } = n.callFrame;
  if (!url) return functionName || '(anonymous)';
  const file = url.replace(/^file:\/\//, '').split('/').slice(-2).join('/');
  return `${functionName || '(anonymous)'} ${file}:${lineNumber + 1}`;
}

/**
 * Self time per frame name (several nodes of one function are summed), weighted by each sample's time delta.
 * `from`/`to` (ms since the profile's start) keep only a window of it, e.g. the measured one of a load run.
 */
export function summarize(profile: CpuProfile, top = 15, from = 0, to = Infinity): ProfileSummary {
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const self = new Map<string, number>();
  let t = 0;
  let total = 0;
  let idle = 0;
  let gc = 0;
  for (let i = 0; i < profile.samples.length; i++) {
    const dt = profile.timeDeltas[i] ?? 0;
    t += dt / 1000;
    if (t < from || t > to) continue;
    const node = byId.get(profile.samples[i]);
    if (!node) continue;
    total += dt;
    const name = frameName(node);
    if (name === '(idle)') {
      idle += dt;
      continue;
    }
    if (name === '(garbage collector)') gc += dt;
    self.set(name, (self.get(name) ?? 0) + dt);
  }
  const busy = total - idle;
  const pct = (v: number, of: number) => (of > 0 ? (v / of) * 100 : 0);
  return {
    spanMs: total / 1000,
    idlePct: pct(idle, total),
    gcPct: pct(gc, busy),
    top: [...self.entries()]
      .sort((a, b) => b[1] - a[1])
      .slice(0, top)
      .map(([frame, us]) => ({ frame, selfPct: pct(us, busy) })),
  };
}

/**
 * The `seconds`-long stretch of the profile with the least idle time (ms since the profile's start): under a load
 * run, the measured window, without the quiet before and after it; `skipMs` leaves the start-up (module loading) out.
 */
export function busiestWindow(profile: CpuProfile, seconds: number, skipMs = 0): { from: number; to: number } {
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const busyPerMs: number[] = [];
  let t = 0;
  for (let i = 0; i < profile.samples.length; i++) {
    const dt = profile.timeDeltas[i] ?? 0;
    t += dt / 1000;
    const node = byId.get(profile.samples[i]);
    if (!node || node.callFrame.functionName === '(idle)') continue;
    const ms = Math.floor(t);
    busyPerMs[ms] = (busyPerMs[ms] ?? 0) + dt;
  }
  const width = seconds * 1000;
  let best = { from: 0, to: width, busy: -1 };
  let sum = 0;
  for (let ms = 0; ms < busyPerMs.length; ms++) {
    sum += busyPerMs[ms] ?? 0;
    if (ms >= width) sum -= busyPerMs[ms - width] ?? 0;
    if (ms - width + 1 >= skipMs && sum > best.busy) best = { from: Math.max(0, ms - width + 1), to: ms + 1, busy: sum };
  }
  return { from: best.from, to: best.to };
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  const file = process.argv[2];
  if (!file) {
    process.stderr.write('usage: cpu-profile.ts <file.cpuprofile> [top] [busiestSeconds] [skipSeconds]\n');
    process.exit(2);
  }
  const top = Number(process.argv[3] ?? 15);
  const seconds = process.argv[4] === undefined ? 0 : Number(process.argv[4]);
  const profile = JSON.parse(readFileSync(file, 'utf8')) as CpuProfile;
  const skip = Number(process.argv[5] ?? 0) * 1000;
  const w = seconds > 0 ? busiestWindow(profile, seconds, skip) : { from: 0, to: Infinity };
  const s = summarize(profile, top, w.from, w.to);
  const where = seconds > 0 ? ` (busiest ${seconds} s: ${(w.from / 1000).toFixed(1)}-${(w.to / 1000).toFixed(1)} s)` : '';
  console.log(`span ${s.spanMs.toFixed(0)} ms${where}, idle ${s.idlePct.toFixed(1)} %, GC ${s.gcPct.toFixed(1)} % of busy`);
  for (const f of s.top) console.log(`${f.selfPct.toFixed(1).padStart(5)} %  ${f.frame}`);
}
