// Every markdown file the code and the docs name must be in the repository: a reader who follows a citation has to
// land somewhere. Also holds citations of the API contract and the architecture page to headings those pages have.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');
/** This file: its examples of broken citations are made up on purpose, so it is not scanned. */
const SELF = relative(ROOT, fileURLToPath(import.meta.url));
const CODE_DIRS = ['src', 'test', 'bench'];
const CODE_EXTENSIONS = /\.(?:ts|mts|js|mjs|sql)$/;

/** Files under `dir` (relative to the root) whose names pass `keep`. */
function files(dir: string, keep: (name: string) => boolean): string[] {
  const out: string[] = [];
  for (const name of readdirSync(join(ROOT, dir))) {
    if (name === 'node_modules') continue;
    const path = join(dir, name);
    if (statSync(join(ROOT, path)).isDirectory()) out.push(...files(path, keep));
    else if (keep(name)) out.push(path);
  }
  return out;
}

/** A markdown link's target: `[text](target.md)` or `[text](target.md#anchor)`; web addresses are not ours to check. */
const LINK = /\]\(\s*([^)\s#]+\.md)(?:#[^)\s]*)?\s*\)/g;
/** A path naming a markdown file in prose or a comment: `docs/traffic.md`, `../../docs/errors.md`, `rbac.md`. */
const MD_PATH = /(?<![\w./-])((?:\.{1,2}\/)*(?:[\w-]+\/)*[\w.-]*\w\.md)\b/g;
/** A citation of a section: `docs/api.md "Heading"`, `[api.md](api.md) "Heading"` (a comma between is allowed). */
const SECTION = /(?<![\w./-])((?:docs\/)?(?:api|architecture)\.md)(?:\]\([^)]*\))?,?\s+"([^"]+)"/g;

export interface Finding {
  file: string;
  line: number;
  path: string;
  why: string;
}

function lineOf(text: string, index: number): number {
  let line = 1;
  for (let i = text.indexOf('\n'); i !== -1 && i < index; i = text.indexOf('\n', i + 1)) line++;
  return line;
}

const exists = (path: string) => existsSync(path);

/**
 * The markdown paths `text` (the content of `file`, relative to the root) names that do not exist. A markdown link
 * resolves from the document's folder, as a renderer resolves it. Any other mention resolves from the repository root
 * (`docs/traffic.md` in a comment) or from the file's own folder (`rbac.md` in a doc, `../../docs/errors.md` in a test).
 */
export function missingPaths(file: string, text: string, present: (path: string) => boolean = exists): Finding[] {
  const found: Finding[] = [];
  const folder = dirname(join(ROOT, file));
  let rest = text;
  if (file.endsWith('.md')) {
    for (const m of text.matchAll(LINK)) {
      const target = m[1];
      if (/^[a-z][a-z0-9+.-]*:/i.test(target)) continue;
      if (!present(resolve(folder, target))) found.push({ file, line: lineOf(text, m.index!), path: target, why: "a link that does not resolve from the document's folder" });
    }
    // Link targets were judged by the stricter rule; blank them so prose mentions are judged on their own.
    rest = text.replace(LINK, (whole) => ' '.repeat(whole.length));
  }
  for (const m of rest.matchAll(MD_PATH)) {
    const path = m[1];
    if (!present(resolve(ROOT, path)) && !present(resolve(folder, path))) {
      found.push({ file, line: lineOf(text, m.index!), path, why: 'names a file that is not in the repository' });
    }
  }
  return found;
}

/** Headings of a markdown document, as written after the #s. */
function headings(path: string): string[] {
  return readFileSync(path, 'utf8')
    .split('\n')
    .filter((l) => /^#{1,6} /.test(l))
    .map((l) => l.replace(/^#{1,6} /, '').trim());
}

/**
 * Citations of docs/api.md and docs/architecture.md sections whose heading those pages lack. A heading may carry a
 * tail the citation leaves out ("Data connections" for "Data connections (the fast path for HTTP)").
 */
export function missingSections(file: string, text: string, headingsOf: (page: string) => string[]): Finding[] {
  const found: Finding[] = [];
  for (const m of text.matchAll(SECTION)) {
    const page = `docs/${m[1].replace(/^docs\//, '')}`;
    const cited = m[2].replace(/\s+/g, ' ').trim();
    const ok = headingsOf(page).some((h) => h === cited || h.startsWith(`${cited} (`) || h.startsWith(`${cited}:`));
    if (!ok) found.push({ file, line: lineOf(text, m.index!), path: `${page} "${cited}"`, why: 'cites a heading the page does not have' });
  }
  return found;
}

function report(findings: Finding[]): string {
  return findings.map((f) => `${f.file}:${f.line}: ${f.path}: ${f.why}`).join('\n');
}

const codeFiles = () => CODE_DIRS.flatMap((dir) => files(dir, (name) => CODE_EXTENSIONS.test(name))).filter((file) => file !== SELF);
const docFiles = () => ['README.md', ...files('docs', (name) => name.endsWith('.md'))];

describe('markdown paths named in code and docs', () => {
  it('every .md path a comment in src/, test/ or bench/ names exists', () => {
    const findings = codeFiles().flatMap((file) => missingPaths(file, readFileSync(join(ROOT, file), 'utf8')));
    assert.equal(findings.length, 0, `\n${report(findings)}`);
  });

  it('every .md link and path in README.md and docs/*.md exists', () => {
    const findings = docFiles().flatMap((file) => missingPaths(file, readFileSync(join(ROOT, file), 'utf8')));
    assert.equal(findings.length, 0, `\n${report(findings)}`);
  });

  it('every section cited of docs/api.md or docs/architecture.md is one of its headings', () => {
    const cache = new Map<string, string[]>();
    const headingsOf = (page: string) => {
      let list = cache.get(page);
      if (list === undefined) cache.set(page, (list = headings(join(ROOT, page))));
      return list;
    };
    const findings = [...codeFiles(), ...docFiles()].flatMap((file) => missingSections(file, readFileSync(join(ROOT, file), 'utf8'), headingsOf));
    assert.equal(findings.length, 0, `\n${report(findings)}`);
  });
});

describe('the checks themselves', () => {
  // The two files that live outside the repository, named without writing their names here (this file is scanned too).
  const outside = ['SPEC', 'ARCHITECTURE'].map((name) => `${name}.md`);
  const onlyRealFiles = (path: string) => existsSync(path);

  it('counts a bare name of a file outside the repository as missing, in code and in docs', () => {
    for (const name of outside) {
      assert.deepEqual(missingPaths('src/control/http.ts', `// 400 on purpose (${name} "Errors")`, onlyRealFiles).map((f) => f.path), [name]);
      assert.deepEqual(missingPaths('docs/rbac.md', `As ${name} says.`, onlyRealFiles).map((f) => f.path), [name]);
      assert.deepEqual(missingPaths('README.md', `[the plan](${name})`, onlyRealFiles).map((f) => f.path), [name]);
    }
  });

  it('resolves a markdown link from the document’s folder only, and a prose path from the root or the folder', () => {
    assert.deepEqual(missingPaths('docs/rbac.md', 'See [api.md](api.md#errors) and docs/api.md and rbac.md.', onlyRealFiles), []);
    assert.deepEqual(missingPaths('README.md', 'See [docs/api.md](docs/api.md).', onlyRealFiles), []);
    // From docs/, a link to docs/api.md points at docs/docs/api.md: broken in any renderer.
    assert.deepEqual(missingPaths('docs/rbac.md', 'See [the API](docs/api.md).', onlyRealFiles).map((f) => f.path), ['docs/api.md']);
    assert.deepEqual(missingPaths('test/shared/errors.test.ts', "const doc = '../../docs/errors.md';", onlyRealFiles), []);
    assert.deepEqual(missingPaths('src/edge/x.ts', '// docs/no-such-page.md "Intro"', onlyRealFiles).map((f) => f.line), [1]);
  });

  it('skips web addresses and globs, and reports the line of a miss', () => {
    const text = 'one\n[x](https://example.com/README.md)\nhttps://github.com/o/r/blob/main/CHANGES.md\ndocs/*.md\n// gone.md';
    assert.deepEqual(missingPaths('src/a.ts', text, onlyRealFiles), [{ file: 'src/a.ts', line: 5, path: 'gone.md', why: 'names a file that is not in the repository' }]);
  });

  it('holds section citations to the pages’ headings, allowing a tail after the cited words', () => {
    const heads = (page: string) => (page === 'docs/api.md' ? ['Errors', 'Versioning and deprecations'] : ['Data connections (the fast path for HTTP)']);
    const ok = '// docs/api.md "Errors"; [api.md](api.md) "Versioning and deprecations" 2; docs/architecture.md, "Data connections"';
    assert.deepEqual(missingSections('src/a.ts', ok, heads), []);
    const bad = missingSections('docs/x.md', 'See [api.md](api.md) "Versioning".', heads);
    assert.deepEqual(bad.map((f) => f.path), ['docs/api.md "Versioning"']);
    // A quotation after a possessive or a colon is not a section citation.
    assert.deepEqual(missingSections('src/a.ts', `// docs/api.md's "about 5 minutes"; docs/api.md: "no caching"`, heads), []);
  });
});

