// Plane boundaries, checked by reading import lines: edge, control and worker meet only through shared code,
// the store (control and worker), the change feed and Redis. Only src/main.ts and src/cli.ts wire roles together.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const SRC = resolve(dirname(fileURLToPath(import.meta.url)), '../src');

/** What each area may import from inside src/. */
const ALLOWED: Record<string, string[]> = {
  shared: ['shared'],
  store: ['store', 'shared'],
  control: ['control', 'store', 'shared'],
  worker: ['worker', 'store', 'shared'],
  edge: ['edge', 'shared'],
  agent: ['agent', 'shared'],
};

function files(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    return statSync(path).isDirectory() ? files(path) : path.endsWith('.ts') ? [path] : [];
  });
}

function imports(file: string): string[] {
  const text = readFileSync(file, 'utf8');
  return [...text.matchAll(/(?:import|export)\s[^'"]*?from\s+['"]([^'"]+)['"]|import\(\s*['"]([^'"]+)['"]\s*\)/g)].map((m) => m[1] ?? m[2]);
}

describe('module boundaries', () => {
  for (const [area, allowed] of Object.entries(ALLOWED)) {
    it(`src/${area} imports only ${allowed.join(', ')}`, () => {
      const dir = join(SRC, area);
      let present: string[];
      try {
        present = files(dir);
      } catch {
        return; // an area with no code yet has nothing to check
      }
      for (const file of present) {
        for (const spec of imports(file).filter((s) => s.startsWith('.'))) {
          const target = relative(SRC, resolve(dirname(file), spec));
          const targetArea = target.split('/')[0];
          assert.ok(!target.startsWith('..'), `${relative(SRC, file)} imports ${spec}, outside src/`);
          assert.ok(allowed.includes(targetArea), `${relative(SRC, file)} imports ${spec} (${targetArea}), which ${area} must not use`);
        }
      }
    });
  }

  it('has no other top-level area besides the composition root', () => {
    const top = readdirSync(SRC).filter((n) => !(n in ALLOWED));
    assert.deepEqual(top.sort(), ['cli.ts', 'main.ts']);
  });
});
