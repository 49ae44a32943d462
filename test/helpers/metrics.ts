// Reading Prometheus text exposition in tests: one sample by metric name and exact label set, so an assertion
// names the series it means and fails on a series that is missing rather than matching a neighbour's line.

function parseLabels(text: string): Record<string, string> {
  const labels: Record<string, string> = {};
  for (const m of text.matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g)) labels[m[1]] = m[2].replace(/\\(.)/g, (_, c) => (c === 'n' ? '\n' : c));
  return labels;
}

/** Every sample of `name` as its labels and value. */
export function samples(text: string, name: string): Array<{ labels: Record<string, string>; value: number }> {
  const out: Array<{ labels: Record<string, string>; value: number }> = [];
  for (const line of text.split('\n')) {
    if (line.startsWith('#')) continue;
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$/.exec(line);
    if (!m || m[1] !== name) continue;
    out.push({ labels: parseLabels(m[2] ?? ''), value: Number(m[3]) });
  }
  return out;
}

/** The value of the sample of `name` whose labels are exactly `labels`; undefined when there is none. */
export function sample(text: string, name: string, labels: Record<string, string> = {}): number | undefined {
  const want = Object.entries(labels).sort();
  const hit = samples(text, name).find((s) => {
    const got = Object.entries(s.labels).sort();
    return got.length === want.length && got.every(([k, v], i) => k === want[i][0] && v === want[i][1]);
  });
  return hit?.value;
}
