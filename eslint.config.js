// Lint rules for src, test and bench (`npm run lint`, in .ci/run after the type-check): the recommended sets of
// ESLint and typescript-eslint, plus the two type-aware promise rules, for the bugs the type-checker lets through.
import js from '@eslint/js';
import tseslint from 'typescript-eslint';

export default tseslint.config(
  { ignores: ['node_modules/**'] },
  // The web console's browser modules (src/console): plain ES modules in the browser, no type-checker over them.
  {
    files: ['src/console/**/*.js'],
    extends: [js.configs.recommended],
    languageOptions: {
      sourceType: 'module',
      globals: Object.fromEntries(
        ['window', 'document', 'location', 'history', 'sessionStorage', 'fetch', 'URL', 'URLSearchParams', 'Event', 'CustomEvent', 'setTimeout', 'clearTimeout', 'setInterval', 'clearInterval', 'navigator', 'console', 'performance', 'TextDecoder', 'TextEncoder', 'atob', 'btoa', 'requestAnimationFrame', 'ResizeObserver', 'uPlot'].map((name) => [name, 'readonly']),
      ),
    },
  },
  { files: ['**/*.ts'], extends: [js.configs.recommended, ...tseslint.configs.recommended] },
  {
    files: ['**/*.ts'],
    // Type information costs about three times the untyped run (a whole program, ~30 s of one core over the
    // repository), paid for the promise rules below: a forgotten await or an async listener whose rejection nobody
    // catches is the bug class tsc cannot see in this asynchronous code base.
    languageOptions: { parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname } },
    rules: {
      '@typescript-eslint/no-floating-promises': [
        'error',
        {
          // node:test's it/describe return promises the runner itself awaits.
          allowForKnownSafeCalls: [
            {
              from: 'package',
              package: 'node:test',
              name: ['it', 'test', 'describe', 'suite', 'before', 'after', 'beforeEach', 'afterEach'],
            },
          ],
        },
      ],
      // Fastify's reply is a thenable returned from error handlers and hooks given as object properties: not a bug.
      '@typescript-eslint/no-misused-promises': ['error', { checksVoidReturn: { properties: false } }],
      // A leading underscore marks a value kept on purpose (a destructured field left out, a required parameter).
      '@typescript-eslint/no-unused-vars': [
        'error',
        { argsIgnorePattern: '^_', varsIgnorePattern: '^_', caughtErrorsIgnorePattern: '^_', ignoreRestSiblings: true },
      ],
      // Validators of names, headers and records match control characters on purpose.
      'no-control-regex': 'off',
      // `{}` is lru-cache's own constraint for keys and values ("not null or undefined"), mirrored by its wrappers.
      '@typescript-eslint/no-empty-object-type': 'off',
    },
  },
  {
    files: ['test/**/*.ts', 'bench/**/*.ts'],
    rules: {
      // Tests read JSON bodies and mock library objects as `any`; typing each would be churn with no bug behind it.
      '@typescript-eslint/no-explicit-any': 'off',
      // Tests hand async handlers to http servers, timers and promise executors on purpose; a rejection there is an
      // unhandled rejection, which node:test already reports as a failure.
      '@typescript-eslint/no-misused-promises': ['error', { checksVoidReturn: false }],
    },
  },
);
