// Reads an edge configuration file (YAML or JSON) into a checked document: every mistake is located by file, line,
// column and field before anything is sent (schema, duplicate keys, bad conditions, mode rules, `${ENV}` references).
import { readFile } from 'node:fs/promises';
import type { TSchema } from '@sinclair/typebox';
import { Value } from '@sinclair/typebox/value';
import { isMap, isScalar, isSeq, LineCounter, parseDocument, type Document as YamlDocument, type Node } from 'yaml';
import { canonicalCondition } from '../shared/match/condition.ts';
import { canonicalRateLimitCondition } from '../shared/rate-limit/conditions.ts';
import { parseCaBundle } from '../shared/x509.ts';
import { DocumentSchema, ENV_REFERENCE, type Document } from './document.ts';

export interface Problem {
  file: string;
  line: number;
  column: number;
  /** Dotted path of the field, e.g. endpoints.app.edge.localhost.rate_limits.api.action */
  field: string;
  message: string;
}

export class DocumentError extends Error {
  constructor(readonly problems: Problem[]) {
    super(problems.map(formatProblem).join('\n'));
  }
}

export const formatProblem = (p: Problem) => `${p.file}:${p.line}:${p.column}: ${p.field ? `${p.field}: ` : ''}${p.message}`;

export interface LoadOptions {
  env?: NodeJS.ProcessEnv;
  /** With --select-tag: every taggable resource of the file must carry it. */
  selectTag?: string;
}

/** Fields whose values are secrets: the only ones where `${NAME}` is read as an environment reference. */
const SECRET_FIELDS = new Set(['password', 'secret', 'client_secret']);

export async function loadDocumentFile(file: string, options: LoadOptions = {}): Promise<Document> {
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (err) {
    throw new DocumentError([{ file, line: 0, column: 0, field: '', message: `cannot read: ${(err as Error).message}` }]);
  }
  return parseDocumentText(text, file, options);
}

type Path = (string | number)[];

export function parseDocumentText(text: string, file: string, options: LoadOptions = {}): Document {
  const lineCounter = new LineCounter();
  // YAML 1.2 reads JSON too, so one parser locates mistakes in both.
  const doc = parseDocument(text, { lineCounter, uniqueKeys: true, prettyErrors: false, strict: true });
  const problems: Problem[] = [];
  // After a syntax error the parser reports every token that follows: the first one is the mistake.
  const syntax = doc.errors.find((e) => e.code !== 'DUPLICATE_KEY');
  for (const e of syntax ? [syntax] : doc.errors) {
    const pos = lineCounter.linePos(e.pos[0]);
    const message = e.code === 'DUPLICATE_KEY' ? `duplicate key ${duplicateKeyAt(doc, text, e.pos[0])}` : e.message.split('\n')[0];
    problems.push({ file, line: pos.line, column: pos.col, field: '', message });
  }
  if (problems.length > 0) throw new DocumentError(problems);

  const data: unknown = doc.toJS({ maxAliasCount: 100 }) ?? {};
  const at = (path: Path, message: string, keyOnly = false) => problems.push({ file, ...locate(doc, lineCounter, path, keyOnly), field: path.join('.'), message });

  const seen = new Set<string>();
  for (const e of Value.Errors(DocumentSchema, data)) {
    const path = pointer(e.path);
    const field = path.join('.');
    // A union reports each branch; the first word about a field is enough.
    if (seen.has(field)) continue;
    seen.add(field);
    const unexpected = e.message === 'Unexpected property';
    at(path, unexpected ? 'unknown field' : describeError(e.schema, e.message), unexpected);
  }
  if (problems.length > 0) throw new DocumentError(problems);

  const document = data as Document;
  checkMeaning(document, at, options);
  if (problems.length > 0) throw new DocumentError(problems);
  resolveReferences(document, [], options.env ?? process.env, at);
  if (problems.length > 0) throw new DocumentError(problems);
  return document;
}

/** TypeBox's message, or for a choice of literals the choices ("Expected union value" says too little). */
function describeError(schema: TSchema, message: string): string {
  const options = (schema.anyOf as TSchema[] | undefined) ?? [];
  const literals = options.filter((o) => 'const' in o).map((o) => JSON.stringify(o.const));
  if (literals.length > 0) return `expected ${literals.join(', ')}${literals.length < options.length ? ' or null' : ''}`;
  return message;
}

/** A JSON pointer (TypeBox's error path) as segments, unescaped. */
function pointer(path: string): Path {
  return path
    .split('/')
    .slice(1)
    .map((s) => s.replace(/~1/g, '/').replace(/~0/g, '~'))
    .map((s) => (/^\d+$/.test(s) ? Number(s) : s));
}

/** The line and column of the node at `path`, or of its nearest existing parent. keyOnly: the key's position. */
function locate(doc: YamlDocument, lines: LineCounter, path: Path, keyOnly: boolean): { line: number; column: number } {
  let node: unknown = doc.contents;
  let found: Node | null = (doc.contents as Node) ?? null;
  for (const segment of path) {
    if (isMap(node)) {
      const pair = node.items.find((p) => (isScalar(p.key) ? p.key.value : p.key) == segment);
      if (!pair) break;
      const isLast = segment === path[path.length - 1];
      found = (keyOnly && isLast ? pair.key : (pair.value ?? pair.key)) as Node;
      node = pair.value;
    } else if (isSeq(node) && typeof segment === 'number') {
      const item = node.items[segment];
      if (!item) break;
      found = item as Node;
      node = item;
    } else break;
  }
  const offset = found?.range?.[0] ?? 0;
  const pos = lines.linePos(offset);
  return { line: pos.line, column: pos.col };
}

function duplicateKeyAt(doc: YamlDocument, text: string, offset: number): string {
  const key = /^[^:\n]*/.exec(text.slice(offset))?.[0].trim() ?? '';
  return key ? `"${key.replace(/^["']|["']$/g, '')}"` : '';
}

type At = (path: Path, message: string) => void;

/** What the schema cannot say: conditions the edge could not compile, mode rules, tags required by --select-tag. */
function checkMeaning(doc: Document, at: At, options: LoadOptions): void {
  const needTag = (path: Path, tags: string[] | undefined) => {
    if (options.selectTag !== undefined && !(tags ?? []).includes(options.selectTag)) at([...path, 'tags'], `must carry the tag "${options.selectTag}" (--select-tag)`);
  };
  for (const [host, e] of Object.entries(doc.endpoints ?? {})) {
    const base: Path = ['endpoints', host];
    if (!/^(@|[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)(\.[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)*$/.test(host)) at(base, 'not a lower-case hostname or DNS label');
    needTag(base, e.tags);
    if (e.mtls?.ca_bundle_pem !== undefined) {
      // The API's own bundle check (CA certificates, unexpired): a bundle it would refuse is a mistake of the file.
      try {
        parseCaBundle(e.mtls.ca_bundle_pem, { field: 'ca_bundle_pem' });
      } catch (err) {
        at([...base, 'mtls', 'ca_bundle_pem'], (err as Error).message);
      }
    }
    if (e.mtls && e.mtls.mode !== 'disabled' && e.mtls.ca_bundle_pem === undefined && e.mtls.ca_sha256 === undefined) {
      at([...base, 'mtls'], `mode ${e.mtls.mode} needs ca_bundle_pem (or ca_sha256 for a bundle already stored)`);
    }
    const auth = e.auth;
    if (auth) {
      const a = [...base, 'auth'];
      const users = auth.basic_users ?? [];
      if (auth.mode === 'basic' && users.length === 0) at([...a, 'basic_users'], 'mode basic needs at least one user');
      if (auth.mode !== 'basic' && auth.basic_users !== undefined) at([...a, 'basic_users'], 'only with mode basic');
      if (auth.mode !== 'basic' && auth.realm !== undefined) at([...a, 'realm'], 'only with mode basic');
      const sso = auth.mode === 'oauth' || auth.mode === 'oidc';
      for (const f of ['allowed_redirects', 'scopes', 'enabled_providers'] as const) if (!sso && auth[f] !== undefined) at([...a, f], 'only with mode oauth or oidc');
      const names = new Set<string>();
      users.forEach((u, i) => {
        if ((u.password === undefined) === (u.password_hash === undefined)) at([...a, 'basic_users', i], 'exactly one of password and password_hash');
        if (names.has(u.username)) at([...a, 'basic_users', i, 'username'], `duplicate user "${u.username}"`);
        names.add(u.username);
      });
      for (const [i, name] of (auth.enabled_providers ?? []).entries()) {
        if (!e.oauth_providers?.[name]) at([...a, 'enabled_providers', i], `no provider "${name}" in oauth_providers`);
      }
      if (auth.jwt?.claim_headers) {
        // The API takes them as one JSON string; its length limit applies to that text.
        if (JSON.stringify(auth.jwt.claim_headers).length > 8192) at([...a, 'jwt', 'claim_headers'], 'too long (8192 characters as JSON)');
      }
    }
    for (const [name, r] of Object.entries(e.rate_limits ?? {})) {
      const p = [...base, 'rate_limits', name];
      needTag(p, r.tags);
      (r.conditions ?? []).forEach((c, i) => {
        try {
          canonicalRateLimitCondition(String(c.type ?? ''), String(c.operator ?? ''), c.value === undefined ? undefined : String(c.value));
        } catch (err) {
          at([...p, 'conditions', i], `bad condition: ${(err as Error).message}`);
        }
        if (c.logical_operator !== undefined && !['AND', 'OR'].includes(String(c.logical_operator).toUpperCase())) at([...p, 'conditions', i, 'logical_operator'], 'AND or OR');
      });
    }
    for (const [name, r] of Object.entries(e.routing_rules ?? {})) {
      const p = [...base, 'routing_rules', name];
      needTag(p, r.tags);
      r.conditions.forEach((c, i) => {
        try {
          canonicalCondition(c.condition_type, c.condition_key ?? '', c.pattern);
        } catch (err) {
          at([...p, 'conditions', i], `bad condition: ${(err as Error).message}`);
        }
      });
    }
    for (const [name, r] of Object.entries(e.alerts ?? {})) needTag([...base, 'alerts', name], r.tags);
  }
  for (const [name, r] of Object.entries(doc.alerts ?? {})) needTag(['alerts', name], r.tags);
}

/** Replaces `${NAME}` in secret fields with the variable's value; a missing or empty one is a located mistake. */
function resolveReferences(node: unknown, path: Path, env: NodeJS.ProcessEnv, at: At): void {
  if (Array.isArray(node)) return node.forEach((v, i) => resolveReferences(v, [...path, i], env, at));
  if (node === null || typeof node !== 'object') return;
  const obj = node as Record<string, unknown>;
  for (const [k, v] of Object.entries(obj)) {
    if (typeof v === 'string' && SECRET_FIELDS.has(k)) {
      const ref = ENV_REFERENCE.exec(v);
      if (!ref) continue;
      const value = env[ref[1]];
      if (value === undefined || value === '') at([...path, k], `environment variable ${ref[1]} is not set`);
      else obj[k] = value;
    } else resolveReferences(v, [...path, k], env, at);
  }
}
