// Module boundaries of src/, checked by dependency-cruiser (`npm run lint`, and test/architecture.test.ts in `npm test`).
// Edge, control, worker and agent meet only through shared code, the store, the change feed and Redis (docs/architecture.md).

/** What each area of src/ may import from inside src/ besides itself; type-only imports count too. */
const ALLOWED = {
  shared: [],
  store: ['shared'],
  control: ['store', 'shared'],
  worker: ['store', 'shared'],
  edge: ['shared'],
  agent: ['shared'],
  // The authoritative DNS server answers from the change feed and presence, as edges do (docs/dedicated-ips.md).
  dns: ['shared'],
  // The local-cluster launcher starts processes of bin/edge.js; it imports no role.
  cluster: [],
  // The web console's browser modules, served as they are by src/control/console.ts: a client of the /v1 API only.
  console: [],
  // edge diff / apply / export: a client of the /v1 API like any other. It reads control's TypeBox body schemas
  // (and nothing else of control: no routes, services or store) so the file format is built from what the API validates.
  'config-as-code': ['shared', 'control/schemas'],
};

const AREAS = Object.keys(ALLOWED);
/** A module of src/ in none of the areas and not the composition root. */
const OUTSIDE_AREAS = `^src/(?!(${AREAS.join('|')})/|(main|cli)\\.ts$)`;

/** One rule per area: anything in src/ outside the area and its allowed neighbours is forbidden. */
const boundaries = Object.entries(ALLOWED).map(([area, allowed]) => ({
  name: `boundary-${area}`,
  severity: 'error',
  comment: `src/${area} may import only ${[area, ...allowed].map((a) => `src/${a}`).join(', ')} and libraries`,
  from: { path: `^src/${area}/` },
  to: { path: '^src/', pathNot: [area, ...allowed].map((a) => `^src/${a}/`) },
}));

module.exports = {
  forbidden: [
    ...boundaries,
    {
      name: 'no-composition-root-imports',
      severity: 'error',
      comment: 'only src/main.ts and src/cli.ts wire roles together; nothing in an area imports them',
      from: { path: `^src/(${AREAS.join('|')})/` },
      to: { path: '^src/(main|cli)\\.ts$' },
    },
    {
      name: 'no-other-top-level-area',
      severity: 'error',
      comment: `src/ holds the areas ${AREAS.join(', ')} and the composition root (main.ts, cli.ts), nothing else`,
      from: { path: OUTSIDE_AREAS },
      to: {},
    },
    {
      name: 'no-import-of-other-top-level-area',
      severity: 'error',
      comment: `src/ holds the areas ${AREAS.join(', ')} and the composition root (main.ts, cli.ts), nothing else`,
      from: {},
      to: { path: OUTSIDE_AREAS },
    },
    {
      name: 'src-stays-in-src',
      severity: 'error',
      comment: 'production code never imports tests, benchmarks or scripts',
      from: { path: '^src/' },
      to: { path: '^(test|bench|bin|config)/' },
    },
    {
      // A runtime cycle decides module evaluation order: a binding read during import is undefined on one path.
      // Type-only imports vanish at compile time, so they cannot form one.
      name: 'no-runtime-cycle',
      severity: 'error',
      comment: 'a runtime import cycle makes module evaluation order matter; break it (type-only imports are fine)',
      from: { path: '^(src|test|bench)/' },
      to: {
        circular: true,
        viaOnly: { dependencyTypesNot: ['type-only'] },
      },
    },
    {
      name: 'no-orphans',
      severity: 'error',
      comment: 'a module nothing imports is dead code (entry points and tests excepted)',
      from: {
        orphan: true,
        pathNot: ['^src/(main|cli)\\.ts$', '\\.d\\.ts$', '^test/.*\\.test\\.ts$', '^bench/', '^src/store/migrations/'],
      },
      to: {},
    },
    {
      name: 'not-to-unresolvable',
      severity: 'error',
      comment: 'an import that does not resolve fails at run time',
      from: {},
      // The console's vendor/ modules are served from node_modules under that path (src/control/console.ts VENDOR).
      to: { couldNotResolve: true, pathNot: '^\\.\\.?/vendor/' },
    },
    {
      name: 'no-dev-deps-in-src',
      severity: 'error',
      comment: 'src/ runs in production, where devDependencies are not installed',
      from: { path: '^src/' },
      to: { dependencyTypes: ['npm-dev'], dependencyTypesNot: ['type-only'] },
    },
  ],
  options: {
    doNotFollow: { path: 'node_modules' },
    // Type-only imports are kept so the boundary rules see them; the cycle rule filters them out.
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.json' },
    enhancedResolveOptions: {
      exportsFields: ['exports'],
      conditionNames: ['import', 'require', 'node', 'default', 'types'],
      mainFields: ['module', 'main', 'types', 'typings'],
    },
    skipAnalysisNotInRules: true,
  },
};
