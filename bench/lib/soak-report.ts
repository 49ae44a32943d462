// The soak's arithmetic and output, apart from the run itself so it can be tested: results folded into one row per
// minute, the RSS-growth verdict, and the CSV and SVG the run writes.

/** How one request ended. `expected` are the refusals a policy must give (401 without credentials, 429 over a limit). */
export type Outcome = 'ok' | 'expected' | 'reconnect_window' | 'unexpected';

export interface Sample {
  /** ms since the run started */
  at: number;
  outcome: Outcome;
  latencyMs: number;
  /** status, or the network error's code, for the error table */
  detail: string;
}

export interface MinuteRow {
  minute: number;
  requests: number;
  ok: number;
  expected: number;
  reconnectWindow: number;
  unexpected: number;
  p50Ms: number;
  p99Ms: number;
  /** process name → resident set in MiB at the minute's end */
  rssMiB: Record<string, number>;
}

export function percentile(sorted: readonly number[], p: number): number {
  if (sorted.length === 0) return 0;
  const i = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1));
  return sorted[i];
}

/** One row per whole minute of samples; `rss` gives each minute's readings. */
export function foldMinutes(samples: readonly Sample[], rss: ReadonlyArray<Record<string, number>>): MinuteRow[] {
  const rows: MinuteRow[] = [];
  const byMinute = new Map<number, Sample[]>();
  for (const s of samples) {
    const m = Math.floor(s.at / 60_000);
    const list = byMinute.get(m) ?? [];
    list.push(s);
    byMinute.set(m, list);
  }
  for (let minute = 0; minute < rss.length; minute++) {
    const list = byMinute.get(minute) ?? [];
    const latencies = list.map((s) => s.latencyMs).sort((a, b) => a - b);
    const count = (o: Outcome) => list.filter((s) => s.outcome === o).length;
    rows.push({
      minute: minute + 1,
      requests: list.length,
      ok: count('ok'),
      expected: count('expected'),
      reconnectWindow: count('reconnect_window'),
      unexpected: count('unexpected'),
      p50Ms: round(percentile(latencies, 50)),
      p99Ms: round(percentile(latencies, 99)),
      rssMiB: rss[minute],
    });
  }
  return rows;
}

function round(n: number): number {
  return Math.round(n * 100) / 100;
}

/**
 * RSS growth over the second half of the run, per process: the last minute against the first minute of that half.
 * The first half is warm-up (caches filling, JIT, pools); a leak shows as growth that goes on after it.
 */
export function rssGrowth(rows: readonly MinuteRow[]): Record<string, number> {
  if (rows.length < 2) return {};
  const first = rows[Math.floor(rows.length / 2)];
  const last = rows[rows.length - 1];
  const out: Record<string, number> = {};
  for (const name of Object.keys(last.rssMiB)) {
    const a = first.rssMiB[name];
    const b = last.rssMiB[name];
    if (a > 0 && b > 0) out[name] = round(((b - a) / a) * 100);
  }
  return out;
}

export function toCsv(rows: readonly MinuteRow[]): string {
  const names = rows.length > 0 ? Object.keys(rows[0].rssMiB) : [];
  const header = ['minute', 'requests', 'ok', 'expected', 'reconnect_window', 'unexpected', 'p50_ms', 'p99_ms', ...names.map((n) => `rss_${n}_mib`)];
  const lines = rows.map((r) => [r.minute, r.requests, r.ok, r.expected, r.reconnectWindow, r.unexpected, r.p50Ms, r.p99Ms, ...names.map((n) => r.rssMiB[n] ?? '')].join(','));
  return [header.join(','), ...lines].join('\n') + '\n';
}

const COLOURS = ['#1f77b4', '#d62728', '#2ca02c', '#9467bd', '#ff7f0e', '#8c564b', '#e377c2', '#17becf'];

/** Two panels, latency (p50, p99) and RSS per process, against minutes; plain SVG, no dependency. */
export function toSvg(rows: readonly MinuteRow[], title: string): string {
  const width = 760;
  const panel = 240;
  const left = 60;
  const right = 170;
  const plotW = width - left - right;
  const series = (values: number[], top: number, max: number, colour: string, label: string, index: number) => {
    const x = (i: number) => left + (rows.length <= 1 ? plotW / 2 : (i / (rows.length - 1)) * plotW);
    const y = (v: number) => top + panel - 30 - (max === 0 ? 0 : (v / max) * (panel - 50));
    const points = values.map((v, i) => `${x(i).toFixed(1)},${y(v).toFixed(1)}`).join(' ');
    return `<polyline fill="none" stroke="${colour}" stroke-width="2" points="${points}"/><text x="${left + plotW + 10}" y="${top + 30 + index * 16}" fill="${colour}" font-size="12">${escape(label)}</text>`;
  };
  const axes = (top: number, max: number, unit: string) =>
    `<line x1="${left}" y1="${top + panel - 30}" x2="${left + plotW}" y2="${top + panel - 30}" stroke="#888"/><line x1="${left}" y1="${top + 20}" x2="${left}" y2="${top + panel - 30}" stroke="#888"/>` +
    `<text x="${left - 6}" y="${top + 24}" font-size="11" text-anchor="end">${round(max)}</text><text x="${left - 6}" y="${top + panel - 30}" font-size="11" text-anchor="end">0</text>` +
    `<text x="${left}" y="${top + 14}" font-size="12">${escape(unit)}</text><text x="${left + plotW}" y="${top + panel - 12}" font-size="11" text-anchor="end">minute ${rows.length}</text>`;
  const latencyMax = Math.max(1, ...rows.map((r) => r.p99Ms));
  const names = rows.length > 0 ? Object.keys(rows[0].rssMiB) : [];
  const rssMax = Math.max(1, ...rows.flatMap((r) => Object.values(r.rssMiB)));
  const parts = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${2 * panel + 30}" font-family="sans-serif">`,
    `<rect width="100%" height="100%" fill="white"/><text x="${left}" y="18" font-size="14">${escape(title)}</text>`,
    `<g transform="translate(0,20)">`,
    axes(0, latencyMax, 'latency per minute (ms)'),
    series(rows.map((r) => r.p50Ms), 0, latencyMax, COLOURS[0], 'p50', 0),
    series(rows.map((r) => r.p99Ms), 0, latencyMax, COLOURS[1], 'p99', 1),
    axes(panel, rssMax, 'resident memory (MiB)'),
    ...names.map((n, i) => series(rows.map((r) => r.rssMiB[n] ?? 0), panel, rssMax, COLOURS[i % COLOURS.length], n, i)),
    '</g></svg>',
  ];
  return parts.join('\n') + '\n';
}

function escape(s: string): string {
  return s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');
}

/** `--minutes N [--out DIR] [--rate R]`; throws with a message naming the bad argument. */
export function parseSoakArgs(args: readonly string[]): { minutes: number; out?: string; rate?: number } {
  const out: { minutes: number; out?: string; rate?: number } = { minutes: 10 };
  for (let i = 0; i < args.length; i++) {
    const [name, value] = [args[i], args[i + 1]];
    if (value === undefined) throw new Error(`${name} needs a value`);
    i++;
    if (name === '--minutes') {
      if (!/^\d+(\.\d+)?$/.test(value) || Number(value) <= 0 || Number(value) > 24 * 60) throw new Error(`--minutes must be a positive number of minutes (at most a day), got "${value}"`);
      out.minutes = Number(value);
    } else if (name === '--out') out.out = value;
    else if (name === '--rate') {
      if (!/^\d+$/.test(value) || Number(value) < 1) throw new Error(`--rate must be a whole number of requests per second, got "${value}"`);
      out.rate = Number(value);
    } else throw new Error(`unknown argument ${name} (use --minutes N, --out DIR, --rate R)`);
  }
  return out;
}
