// Plane boundaries and import cycles, judged by dependency-cruiser with the rules in .dependency-cruiser.cjs, so
// `npm test` fails on a crossing just as `npm run lint` does (edge, control, worker and agent meet only through shared code).
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { cruise, type ICruiseResult } from 'dependency-cruiser';
import extractDepcruiseOptions from 'dependency-cruiser/config-utl/extract-depcruise-options';
import extractTSConfig from 'dependency-cruiser/config-utl/extract-ts-config';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');

/** Cruises `roots` of the tree at `baseDir` with the repository's rules. */
async function cruiseTree(baseDir: string, roots: string[]): Promise<ICruiseResult> {
  const options = await extractDepcruiseOptions(join(ROOT, '.dependency-cruiser.cjs'));
  const tsConfig = extractTSConfig(join(baseDir, 'tsconfig.json'));
  const { output } = await cruise(roots, { ...options, baseDir }, undefined, { tsConfig });
  assert.ok(typeof output !== 'string', 'dependency-cruiser answered a report instead of a result');
  return output;
}

describe('module boundaries', () => {
  it('has no dependency-cruiser violation (boundaries, runtime cycles, orphans, unresolvable imports)', async () => {
    const result = await cruiseTree(ROOT, ['src', 'test', 'bench']);
    const found = result.summary.violations.map((v) =>
      `${v.rule.name}: ${v.from} → ${v.to}${v.cycle ? ` (cycle ${v.cycle.map((c) => c.name).join(' → ')})` : ''}`,
    );
    assert.deepEqual(found, []);
    // A rule that judged nothing would pass vacuously: the cruise must have seen the whole tree.
    assert.ok(result.summary.totalCruised > 300, `only ${result.summary.totalCruised} modules cruised`);
  });

  it('judges a crossing, a runtime cycle and an orphan in a small tree, and lets a type-only cycle pass', async () => {
    // The rules are data: a typo in a path pattern would make them pass vacuously on the real tree, so they are run
    // against a tree that breaks each of them once.
    const tree = mkdtempSync(join(tmpdir(), 'depcruise-'));
    try {
      const files: Record<string, string> = {
        'src/main.ts': "import './edge/index.ts';\nimport './store/feed.ts';\nimport './shared/types.ts';\n",
        'src/edge/index.ts': "import { routes } from '../control/routes.ts';\nexport const edge = routes;\n",
        'src/control/routes.ts': 'export const routes = 1;\n',
        'src/store/feed.ts': "import { endpoints } from './endpoints.ts';\nexport const feed = () => endpoints;\n",
        'src/store/endpoints.ts': "import { feed } from './feed.ts';\nexport const endpoints = () => feed;\n",
        'src/shared/types.ts': "import type { Other } from './other.ts';\nexport type Types = { other?: Other };\n",
        'src/shared/other.ts': "import type { Types } from './types.ts';\nexport type Other = { types?: Types };\n",
        'src/shared/unused.ts': 'export const unused = 1;\n',
        'tsconfig.json': readFileSync(join(ROOT, 'tsconfig.json'), 'utf8'),
      };
      for (const [path, text] of Object.entries(files)) {
        mkdirSync(dirname(join(tree, path)), { recursive: true });
        writeFileSync(join(tree, path), text);
      }
      const result = await cruiseTree(tree, ['src']);
      // A cycle is reported once, from whichever member the cruise met first: name it by its members.
      const found = result.summary.violations
        .map((v) => (v.cycle ? `${v.rule.name}: ${[v.from, v.to].sort().join(' ↔ ')}` : `${v.rule.name}: ${v.from} → ${v.to}`))
        .sort();
      assert.deepEqual(found, [
        'boundary-edge: src/edge/index.ts → src/control/routes.ts',
        'no-orphans: src/shared/unused.ts → src/shared/unused.ts',
        'no-runtime-cycle: src/store/endpoints.ts ↔ src/store/feed.ts',
      ]);
    } finally {
      rmSync(tree, { recursive: true, force: true });
    }
  });
});
