// The agent's configuration file (`edge agent start --config edge-agent.yml`): several tunnels in one YAML file,
// validated with every mistake located (file:line:col and the field's path), then resolved against the environment and flags.
//
// Precedence of a default (docs/agent-config.md): built-in < the file's top level < environment < flags; a setting
// written in a tunnel's own entry is about that tunnel only and wins over every default.
import { readFile } from 'node:fs/promises';
import { dirname, resolve } from 'node:path';
import { Type, type TSchema } from '@sinclair/typebox';
import { Value, ValueErrorType } from '@sinclair/typebox/value';
import { LineCounter, isMap, isSeq, isScalar, parseDocument, type Document, type Node as YamlNode } from 'yaml';
import { MAX_API_KEY_LENGTH } from '../shared/api-keys.ts';
import { Uuid } from '../shared/schema.ts';
import { AGENT_ID_PATTERN, HOST_HEADER_PATTERN, MAX_AGENT_ID_LENGTH, MAX_DATA_CONNECTIONS, MAX_TAG_LENGTH, MAX_TAGS, TAG_PATTERN } from '../shared/tunnel/protocol.ts';
import { checkHaOptions, DEFAULT_HA_CONNECTIONS, MAX_HA_CONNECTIONS } from './ha.ts';
import { agentSettings, DEFAULT_DATA_SPARES, TRANSPORT_CHOICES, tunnelUrl, type TransportChoice } from './options.ts';
import { parseTarget } from './target.ts';
import { LOG_FORMATS, type LogFormat } from './console.ts';

export const DEFAULT_EDGE_URL = 'http://127.0.0.1:8080';
export const TUNNEL_KINDS = ['http', 'tcp', 'udp', 'deploy'] as const;
const TUNNEL_NAME = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$/;
const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'];
/** `${NAME}` (a variable's value) or `$${…}` (the text `${…}` itself). */
const ENV_REFERENCE = /\$(\$?)\{([^}]*)\}/g;
const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;

const MESSAGES = {
  transport: `must be ${TRANSPORT_CHOICES.slice(0, -1).join(', ')} or ${TRANSPORT_CHOICES.at(-1)}`,
  dataConnections: `must be a whole number from 0 to ${MAX_DATA_CONNECTIONS}`,
  haConnections: `must be a whole number from 1 to ${MAX_HA_CONNECTIONS}`,
  apiKey: `must be an API key of 1 to ${MAX_API_KEY_LENGTH} characters`,
  logFormat: `must be ${LOG_FORMATS.slice(0, -1).join(', ')} or ${LOG_FORMATS.at(-1)}`,
};

// Every leaf says in `errorMessage` what it must be: TypeBox's own messages name types, not settings.
const Transport = Type.Union(TRANSPORT_CHOICES.map((t) => Type.Literal(t)), { errorMessage: MESSAGES.transport });
const EdgeUrl = Type.String({ minLength: 1, maxLength: 2048, errorMessage: "must be an edge's public base URL, e.g. https://edge.example.com" });
const connection = {
  api_key: Type.Optional(Type.String({ minLength: 1, maxLength: MAX_API_KEY_LENGTH, errorMessage: MESSAGES.apiKey })),
  edge: Type.Optional(EdgeUrl),
  edges: Type.Optional(Type.Array(EdgeUrl, { minItems: 1, maxItems: 64, errorMessage: "must be a list of edges' public base URLs (1 to 64)" })),
  ha_connections: Type.Optional(Type.Integer({ minimum: 1, maximum: MAX_HA_CONNECTIONS, errorMessage: MESSAGES.haConnections })),
  transport: Type.Optional(Transport),
};
const DataConnections = Type.Integer({ minimum: 0, maximum: MAX_DATA_CONNECTIONS, errorMessage: MESSAGES.dataConnections });
const identity = {
  agent_id: Type.Optional(
    Type.String({ minLength: 1, maxLength: MAX_AGENT_ID_LENGTH, pattern: AGENT_ID_PATTERN, errorMessage: `must be 1 to ${MAX_AGENT_ID_LENGTH} of A-Z a-z 0-9 _ . : @ -, starting with a letter or digit` }),
  ),
  tags: Type.Optional(
    Type.Array(Type.String({ minLength: 1, maxLength: MAX_TAG_LENGTH, pattern: TAG_PATTERN, errorMessage: `must be 1 to ${MAX_TAG_LENGTH} of A-Z a-z 0-9 _ . -, starting with a letter or digit` }), {
      maxItems: MAX_TAGS,
      errorMessage: `must be a list of at most ${MAX_TAGS} tags`,
    }),
  ),
};
const forwarding = {
  target: Type.Union([Type.String({ minLength: 1 }), Type.Integer()], { errorMessage: 'must be a port, host:port or a URL' }),
  endpoint: Type.Optional(Uuid({ errorMessage: "must be an endpoint's UUID" })),
};
const Seconds = (max: number) => Type.Optional(Type.Integer({ minimum: 1, maximum: max, errorMessage: `must be a whole number of seconds from 1 to ${max}` }));

/** Each kind's fields; a tunnel is checked against its kind's schema, so a mistake is named against that kind. */
const TUNNEL_SCHEMAS: Record<TunnelKind, TSchema> = {
  http: Type.Object(
    {
      protocol: Type.Literal('http'),
      ...forwarding,
      host_header: Type.Optional(Type.String({ minLength: 1, maxLength: 255, pattern: HOST_HEADER_PATTERN, errorMessage: 'must be visible ASCII without spaces' })),
      data_connections: Type.Optional(DataConnections),
      ...identity,
      ...connection,
    },
    { additionalProperties: false },
  ),
  tcp: Type.Object({ protocol: Type.Literal('tcp'), ...forwarding, ...identity, ...connection }, { additionalProperties: false }),
  udp: Type.Object({ protocol: Type.Literal('udp'), ...forwarding, ...identity, ...connection }, { additionalProperties: false }),
  deploy: Type.Object(
    {
      protocol: Type.Literal('deploy'),
      application: Uuid({ errorMessage: "must be the application's UUID" }),
      dir: Type.String({ minLength: 1, errorMessage: 'must be the directory releases live in' }),
      build_timeout: Seconds(86_400),
      health_timeout: Seconds(3_600),
      keep_releases: Type.Optional(Type.Integer({ minimum: 1, maximum: 50, errorMessage: 'must be a whole number from 1 to 50' })),
      ...identity,
      ...connection,
    },
    { additionalProperties: false },
  ),
};

/** Fields another kind has, named as not applying rather than as unknown. */
const ONLY_FOR: Record<string, TunnelKind[]> = {
  target: ['http', 'tcp', 'udp'],
  endpoint: ['http', 'tcp', 'udp'],
  host_header: ['http'],
  data_connections: ['http'],
  application: ['deploy'],
  dir: ['deploy'],
  build_timeout: ['deploy'],
  health_timeout: ['deploy'],
  keep_releases: ['deploy'],
};

const FileSchema = Type.Object(
  {
    ...connection,
    data_connections: Type.Optional(DataConnections),
    log: Type.Optional(
      Type.Object(
        {
          format: Type.Optional(Type.Union(LOG_FORMATS.map((f) => Type.Literal(f)), { errorMessage: MESSAGES.logFormat })),
          level: Type.Optional(Type.Union(LOG_LEVELS.map((l) => Type.Literal(l)), { errorMessage: `must be one of ${LOG_LEVELS.join(', ')}` })),
        },
        { additionalProperties: false },
      ),
    ),
    // Each tunnel is checked against its own kind's schema (TUNNEL_SCHEMAS).
    tunnels: Type.Record(Type.String(), Type.Unknown(), { errorMessage: 'must map tunnel names to tunnels' }),
  },
  { additionalProperties: false },
);

export type TunnelKind = (typeof TUNNEL_KINDS)[number];

/** Where a tunnel connects: one edge, or several with a tunnel to each of `haConnections` of them. */
export type Connection = { edge: string } | { edges: string[]; haConnections?: number };

interface TunnelCommon {
  name: string;
  apiKey: string;
  transport: TransportChoice;
  agentId?: string;
  tags: string[];
}

/** A tunnel as it runs: every default resolved. Two equal specs (JSON) run the same tunnel. */
export type TunnelSpec =
  | (TunnelCommon & {
      kind: 'http' | 'tcp' | 'udp';
      target: string | number;
      endpoint?: string;
      hostHeader?: string;
      dataConnections: number;
      connection: Connection;
    })
  | (TunnelCommon & {
      kind: 'deploy';
      application: string;
      /** Absolute; a relative `dir` is taken from the configuration file's directory. */
      dir: string;
      buildTimeoutMs?: number;
      healthTimeoutMs?: number;
      keepReleases?: number;
      edge: string;
    });

/** The defaults the command line gives (`edge agent start` flags), as typed. */
export interface AgentFlags {
  edge?: string;
  edges?: string;
  haConnections?: string;
  apiKey?: string;
  transport?: string;
  dataConnections?: string;
}

export interface AgentFile {
  path: string;
  log: { format: LogFormat; level?: string };
  /** In the file's order. */
  tunnels: TunnelSpec[];
}

export type LoadResult = { ok: true; file: AgentFile } | { ok: false; errors: string[] };

type Path = Array<string | number>;

/** Collects located mistakes: `file:line:col path: message`, once per path, nothing under a path already wrong. */
class Problems {
  /** File mistakes by offset (listed in the file's order), then those of the environment and flags. */
  private readonly located: Array<{ offset: number; text: string }> = [];
  private readonly outside: string[] = [];
  private readonly wrong: string[] = [];

  constructor(
    private readonly file: string,
    private readonly doc: Document | null,
    private readonly counter: LineCounter,
  ) {}

  get lines(): string[] {
    return [...this.located.sort((a, b) => a.offset - b.offset).map((p) => p.text), ...this.outside];
  }

  get count(): number {
    return this.located.length + this.outside.length;
  }

  /** A mistake at `offset` in the file, with no field path (the YAML itself is wrong there). */
  addAt(offset: number, message: string): void {
    const { line, col } = this.counter.linePos(offset);
    this.located.push({ offset, text: `${this.file}:${line}:${col} ${message}` });
  }

  /** A mistake at `path`: at its key when `at` is 'key' (an unknown or misplaced field), else at its value. */
  add(path: Path, message: string, at: 'key' | 'value' = 'value', marks = true): void {
    const dotted = path.join('.');
    if (this.wrong.some((w) => dotted === w || dotted.startsWith(`${w}.`) || w === '')) return;
    // A missing field is said at its parent, which may have other mistakes of its own.
    if (marks) this.wrong.push(dotted);
    this.addAt(this.doc ? locate(this.doc, path, at) : 0, `${dotted || '(file)'}: ${message}`);
  }

  /** A mistake the environment or a flag made: named by it, as the file has no place for it. */
  addOutside(source: string, message: string): void {
    this.outside.push(`${source}: ${message}`);
  }
}

/** The offset of the node at `path` (or its key), else of the nearest ancestor the document has. */
function locate(doc: Document, path: Path, at: 'key' | 'value'): number {
  let node: unknown = doc.contents;
  let offset = (doc.contents as YamlNode | null)?.range?.[0] ?? 0;
  for (let i = 0; i < path.length; i++) {
    const segment = path[i];
    const last = i === path.length - 1;
    if (isMap(node)) {
      const pair = node.items.find((p) => isScalar(p.key) && String(p.key.value) === String(segment));
      if (!pair) return offset;
      const key = pair.key as YamlNode;
      if (last && at === 'key') return key.range?.[0] ?? offset;
      node = pair.value;
      offset = (pair.value as YamlNode | null)?.range?.[0] ?? key.range?.[0] ?? offset;
    } else if (isSeq(node) && typeof segment === 'number') {
      node = node.items[segment];
      offset = (node as YamlNode | undefined)?.range?.[0] ?? offset;
    } else {
      return offset;
    }
  }
  return offset;
}

/** Replaces `${NAME}` in every string with the variable's value; an unset (or empty) one is a mistake there. */
function substitute(value: unknown, path: Path, env: NodeJS.ProcessEnv, problems: Problems): unknown {
  if (typeof value === 'string') {
    return value.replace(ENV_REFERENCE, (whole, escaped: string, name: string) => {
      if (escaped) return whole.slice(1);
      if (!ENV_NAME.test(name)) {
        problems.add(path, `"\${${name}}" is not a variable reference (a name of A-Z a-z 0-9 _; write $\${ for a literal \${)`);
        return whole;
      }
      const got = env[name];
      if (got === undefined || got === '') {
        problems.add(path, `the environment variable ${name} is not set (or is empty)`);
        return whole;
      }
      return got;
    });
  }
  if (Array.isArray(value)) return value.map((v, i) => substitute(v, [...path, i], env, problems));
  if (value !== null && typeof value === 'object') {
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, substitute(v, [...path, k], env, problems)]));
  }
  return value;
}

/** Adds every schema mistake of `value` at `base`: one per path, with the leaf's own message. */
function schemaProblems(schema: TSchema, value: unknown, base: Path, problems: Problems, secret: (path: Path) => boolean): void {
  for (const error of Value.Errors(schema, value)) {
    const path = [...base, ...error.path.split('/').slice(1).map((s) => (/^\d+$/.test(s) ? Number(s) : s.replace(/~1/g, '/').replace(/~0/g, '~')))];
    if (error.type === ValueErrorType.ObjectAdditionalProperties) {
      problems.add(path, 'unknown field', 'key');
    } else if (error.value === undefined) {
      // TypeBox says a missing field twice: as required (below), and as not of its type.
      if (error.type === ValueErrorType.ObjectRequiredProperty) problems.add(path.slice(0, -1), `${String(path.at(-1))} is required`, 'key', false);
    } else {
      const wanted = (error.schema as { errorMessage?: string }).errorMessage ?? error.message.replace(/^Expected/, 'must be');
      const shown = secret(path) || typeof error.value === 'object' ? '' : `, got ${JSON.stringify(error.value)}`;
      problems.add(path, `${wanted}${shown}`);
    }
  }
}

/** The file's settings, checked (`tunnels` each against its kind), with environment references replaced. */
interface Raw {
  api_key?: string;
  edge?: string;
  edges?: string[];
  ha_connections?: number;
  transport?: TransportChoice;
  data_connections?: number;
  log?: { format?: LogFormat; level?: string };
  tunnels: Record<string, RawTunnel>;
}
type RawTunnel = Record<string, unknown> & Omit<Raw, 'tunnels' | 'log'> & { protocol: TunnelKind };

const isSecret = (path: Path) => path.at(-1) === 'api_key';

/** Parses and checks the file's text; every mistake is located. */
function check(fileName: string, text: string, env: NodeJS.ProcessEnv): { raw: Raw; problems: Problems } {
  const counter = new LineCounter();
  // uniqueKeys: a key given twice is a mistake, not a silent override (the yaml default too, said here on purpose).
  const doc = parseDocument(text, { lineCounter: counter, uniqueKeys: true, prettyErrors: false });
  const problems = new Problems(fileName, doc, counter);
  if (doc.errors.length > 0) {
    for (const err of doc.errors) problems.addAt(err.pos[0], err.code === 'DUPLICATE_KEY' ? 'a key is given twice in one map' : err.message);
    return { raw: { tunnels: {} }, problems };
  }
  const value = substitute(doc.toJS({ maxAliasCount: 100 }), [], env, problems) as Raw;
  if (value === null || typeof value !== 'object' || Array.isArray(value)) {
    problems.add([], 'must be a map of settings with a `tunnels:` map (see docs/agent-config.md)');
    return { raw: { tunnels: {} }, problems };
  }
  schemaProblems(FileSchema, value, [], problems, isSecret);
  checkConnection(value, [], problems);
  const tunnels = value.tunnels !== null && typeof value.tunnels === 'object' && !Array.isArray(value.tunnels) ? value.tunnels : {};
  if (value.tunnels !== undefined && Object.keys(tunnels).length === 0) problems.add(['tunnels'], 'must name at least one tunnel');
  for (const [name, tunnel] of Object.entries(tunnels)) checkTunnel(name, tunnel, problems);
  return { raw: value, problems };
}

function checkTunnel(name: string, tunnel: unknown, problems: Problems): void {
  const path = ['tunnels', name];
  if (!TUNNEL_NAME.test(name)) return problems.add(path, 'a tunnel name is 1 to 64 of A-Z a-z 0-9 _ . -, starting with a letter or digit', 'key');
  if (tunnel === null || typeof tunnel !== 'object' || Array.isArray(tunnel)) return problems.add(path, 'must be a map of the tunnel\'s settings (protocol, target, …)');
  const t = tunnel as Record<string, unknown>;
  if (t.protocol === undefined) return problems.add(path, `protocol is required (${TUNNEL_KINDS.join(', ')})`, 'key');
  if (!TUNNEL_KINDS.includes(t.protocol as TunnelKind)) return problems.add([...path, 'protocol'], `must be ${TUNNEL_KINDS.join(', ')}, got ${JSON.stringify(t.protocol)}`);
  const kind = t.protocol as TunnelKind;
  const rest = { ...t };
  for (const [field, kinds] of Object.entries(ONLY_FOR)) {
    if (field in rest && !kinds.includes(kind)) {
      problems.add([...path, field], `applies to ${kinds.join(', ')} tunnels, not ${kind}`, 'key');
      delete rest[field];
    }
  }
  schemaProblems(TUNNEL_SCHEMAS[kind], rest, path, problems, isSecret);
  checkConnection(t, path, problems);
  if (kind !== 'deploy' && (typeof t.target === 'string' || typeof t.target === 'number')) {
    try {
      parseTarget(kind, t.target);
    } catch (err) {
      problems.add([...path, 'target'], (err as Error).message);
    }
  }
}

/** `edge` or `edges` (with `ha_connections`), in one place: the URLs must be edge URLs. */
function checkConnection(o: { edge?: unknown; edges?: unknown; ha_connections?: unknown }, path: Path, problems: Problems): void {
  if (o.edge !== undefined && o.edges !== undefined) problems.add([...path, 'edges'], 'give edge (one edge) or edges (several), not both', 'key');
  if (o.ha_connections !== undefined && o.edges === undefined) problems.add([...path, 'ha_connections'], 'goes with edges, in the same place', 'key');
  if (typeof o.edge === 'string') {
    try {
      tunnelUrl(o.edge);
    } catch (err) {
      problems.add([...path, 'edge'], (err as Error).message);
    }
  }
  if (Array.isArray(o.edges) && o.edges.every((e) => typeof e === 'string')) {
    try {
      // A count out of range is the schema's to say; the list is checked alone then.
      const n = o.ha_connections;
      checkHaOptions(o.edges as string[], Number.isInteger(n) && (n as number) >= 1 && (n as number) <= MAX_HA_CONNECTIONS ? (n as number) : undefined);
    } catch (err) {
      problems.add([...path, 'edges'], (err as Error).message);
    }
  }
}

/** A default with where it came from, for messages and `config check`. */
interface Layered<T> {
  value: T;
  from: string;
}

/** The defaults every tunnel starts from: the file's top level, then the environment, then the flags. */
function defaults(raw: Raw, env: NodeJS.ProcessEnv, flags: AgentFlags, problems: Problems) {
  const set = (v: string | undefined) => (v === undefined || v === '' ? undefined : v);
  let apiKey: Layered<string> | undefined = raw.api_key !== undefined ? { value: raw.api_key, from: 'the file' } : undefined;
  for (const [v, from] of [
    [set(env.EDGE_API_KEY), 'EDGE_API_KEY'],
    [set(flags.apiKey), '--api-key'],
  ] as const) {
    if (v === undefined) continue;
    if (v.length > MAX_API_KEY_LENGTH) problems.addOutside(from, MESSAGES.apiKey);
    else apiKey = { value: v, from };
  }

  let transport: TransportChoice = raw.transport ?? 'auto';
  for (const [v, from] of [
    [set(env.EDGE_TRANSPORT), 'EDGE_TRANSPORT'],
    [set(flags.transport), '--transport'],
  ] as const) {
    if (v === undefined) continue;
    if (TRANSPORT_CHOICES.includes(v as TransportChoice)) transport = v as TransportChoice;
    else problems.addOutside(from, `${MESSAGES.transport}, got ${JSON.stringify(v)}`);
  }

  let dataConnections = raw.data_connections ?? DEFAULT_DATA_SPARES;
  for (const [v, from] of [
    [set(env.EDGE_DATA_CONNECTIONS), 'EDGE_DATA_CONNECTIONS'],
    [set(flags.dataConnections), '--data-connections'],
  ] as const) {
    if (v === undefined) continue;
    if (/^[0-9]{1,4}$/.test(v) && Number(v) <= MAX_DATA_CONNECTIONS) dataConnections = Number(v);
    else problems.addOutside(from, `${MESSAGES.dataConnections}, got ${JSON.stringify(v)}`);
  }

  // Where to connect is one setting: the latest place that names edge or edges decides it whole.
  let connection: Layered<Connection> = { value: { edge: DEFAULT_EDGE_URL }, from: 'the default' };
  if (raw.edges !== undefined) connection = { value: { edges: raw.edges, haConnections: raw.ha_connections }, from: 'the file' };
  else if (raw.edge !== undefined) connection = { value: { edge: raw.edge }, from: 'the file' };
  const envEdges = set(env.EDGE_EDGES);
  const envEdge = set(env.EDGE_URL);
  if (envEdges !== undefined) connection = layeredEdges(envEdges, undefined, 'EDGE_EDGES', problems) ?? connection;
  else if (envEdge !== undefined) connection = layeredEdge(envEdge, 'EDGE_URL', problems) ?? connection;
  if (flags.edge !== undefined && flags.edges !== undefined) problems.addOutside('--edges', 'give --edge (one edge) or --edges (several), not both');
  if (flags.haConnections !== undefined && flags.edges === undefined) problems.addOutside('--ha-connections', 'goes with --edges');
  let ha: number | undefined;
  if (flags.haConnections !== undefined) {
    if (/^[0-9]{1,2}$/.test(flags.haConnections) && Number(flags.haConnections) >= 1 && Number(flags.haConnections) <= MAX_HA_CONNECTIONS) ha = Number(flags.haConnections);
    else problems.addOutside('--ha-connections', `${MESSAGES.haConnections}, got ${JSON.stringify(flags.haConnections)}`);
  }
  if (flags.edges !== undefined) connection = layeredEdges(flags.edges, ha, '--edges', problems) ?? connection;
  else if (flags.edge !== undefined) connection = layeredEdge(flags.edge, '--edge', problems) ?? connection;

  const format = set(env.EDGE_LOG_FORMAT) ?? raw.log?.format ?? 'auto';
  if (!LOG_FORMATS.includes(format as LogFormat)) problems.addOutside('EDGE_LOG_FORMAT', `${MESSAGES.logFormat}, got ${JSON.stringify(format)}`);
  const level = set(env.EDGE_LOG_LEVEL) ?? raw.log?.level;
  if (level !== undefined && !LOG_LEVELS.includes(level)) problems.addOutside('EDGE_LOG_LEVEL', `must be one of ${LOG_LEVELS.join(', ')}, got ${JSON.stringify(level)}`);
  return { apiKey, transport, dataConnections, connection, log: { format: format as LogFormat, level } };
}

function layeredEdge(value: string, from: string, problems: Problems): Layered<Connection> | undefined {
  try {
    tunnelUrl(value);
    return { value: { edge: value }, from };
  } catch (err) {
    problems.addOutside(from, (err as Error).message);
    return undefined;
  }
}

function layeredEdges(list: string, ha: number | undefined, from: string, problems: Problems): Layered<Connection> | undefined {
  const edges = list.split(',').map((e) => e.trim());
  try {
    if (edges.some((e) => e === '')) throw new TypeError(`must list edge URLs separated by commas, got ${JSON.stringify(list)}`);
    checkHaOptions(edges, ha);
    return { value: ha === undefined ? { edges } : { edges, haConnections: ha }, from };
  } catch (err) {
    problems.addOutside(from, (err as Error).message);
    return undefined;
  }
}

/** Every tunnel with its defaults resolved; mistakes only the resolution finds are located at the tunnel. */
function resolveTunnels(raw: Raw, base: string, d: ReturnType<typeof defaults>, problems: Problems): TunnelSpec[] {
  const specs: TunnelSpec[] = [];
  const agentIds = new Map<string, string>();
  const dirs = new Map<string, string>();
  for (const [name, t] of Object.entries(raw.tunnels)) {
    const path = ['tunnels', name];
    const apiKey = t.api_key ?? d.apiKey?.value;
    if (apiKey === undefined) {
      problems.add(path, 'no API key: set api_key (at the top level or in the tunnel), EDGE_API_KEY or --api-key', 'key');
      continue;
    }
    const connection: Connection = t.edges !== undefined ? { edges: t.edges, haConnections: t.ha_connections } : t.edge !== undefined ? { edge: t.edge } : d.connection.value;
    const common: TunnelCommon = { name, apiKey, transport: t.transport ?? d.transport, agentId: t.agent_id as string | undefined, tags: (t.tags as string[] | undefined) ?? [] };
    let spec: TunnelSpec;
    if (t.protocol === 'deploy') {
      if (!('edge' in connection)) {
        problems.add(path, `a deploy tunnel connects to one edge, and the default is several (edges from ${d.connection.from}); give the tunnel its own edge`, 'key');
        continue;
      }
      const dir = resolve(base, t.dir as string);
      if (dirs.has(dir)) problems.add([...path, 'dir'], `tunnel ${dirs.get(dir)} deploys into the same directory`);
      dirs.set(dir, name);
      spec = {
        ...common,
        kind: 'deploy',
        application: t.application as string,
        dir,
        buildTimeoutMs: t.build_timeout === undefined ? undefined : (t.build_timeout as number) * 1000,
        healthTimeoutMs: t.health_timeout === undefined ? undefined : (t.health_timeout as number) * 1000,
        keepReleases: t.keep_releases as number | undefined,
        edge: connection.edge,
      };
    } else {
      spec = {
        ...common,
        kind: t.protocol,
        target: t.target as string | number,
        endpoint: t.endpoint as string | undefined,
        hostHeader: t.host_header as string | undefined,
        dataConnections: (t.data_connections as number | undefined) ?? d.dataConnections,
        connection,
      };
    }
    // Two tunnels with one agent id would take each other's place at the edge (`replaced`).
    if (spec.agentId !== undefined) {
      if (agentIds.has(spec.agentId)) problems.add([...path, 'agent_id'], `tunnel ${agentIds.get(spec.agentId)} has the same agent id`);
      agentIds.set(spec.agentId, name);
    }
    // What the agent itself would refuse, said now and located, rather than when the tunnel starts.
    try {
      agentSettings({
        edgeUrl: 'edge' in connection ? connection.edge : connection.edges[0],
        apiKey,
        protocol: spec.kind === 'deploy' ? 'http' : spec.kind,
        target: spec.kind === 'deploy' ? 80 : spec.target,
        endpoint: spec.kind === 'deploy' ? undefined : spec.endpoint,
        application: spec.kind === 'deploy' ? spec.application : undefined,
        agentId: spec.agentId,
        tags: spec.tags,
        transport: spec.transport,
      });
    } catch (err) {
      problems.add(path, (err as Error).message, 'key');
      continue;
    }
    specs.push(spec);
  }
  return specs;
}

/** Checks `text` as the file `fileName` (its directory anchors relative `dir`s) and resolves it against env and flags. */
export function parseAgentFile(fileName: string, text: string, env: NodeJS.ProcessEnv, flags: AgentFlags = {}): LoadResult {
  const { raw, problems } = check(fileName, text, env);
  if (problems.count > 0) return { ok: false, errors: problems.lines };
  const d = defaults(raw, env, flags, problems);
  const tunnels = resolveTunnels(raw, dirname(resolve(fileName)), d, problems);
  if (problems.count > 0) return { ok: false, errors: problems.lines };
  return { ok: true, file: { path: fileName, log: d.log, tunnels } };
}

/** Reads and parses the file; a file that cannot be read is one error naming it. */
export async function loadAgentFile(fileName: string, env: NodeJS.ProcessEnv, flags: AgentFlags = {}): Promise<LoadResult> {
  let text: string;
  try {
    text = await readFile(fileName, 'utf8');
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    return { ok: false, errors: [`${fileName}: cannot read the file (${code === 'ENOENT' ? 'no such file' : code ?? (err as Error).message})`] };
  }
  return parseAgentFile(fileName, text, env, flags);
}

/** One line saying what a tunnel will do (never its API key). */
export function describeTunnel(spec: TunnelSpec): string {
  const who = [spec.agentId ? `agent id ${spec.agentId}` : '', spec.tags.length ? `tags ${spec.tags.join(',')}` : ''].filter(Boolean);
  if (spec.kind === 'deploy') {
    return [`${spec.name}: deploy application ${spec.application} in ${spec.dir}`, `edge ${spec.edge}`, `${spec.transport} transport`, ...who].join(', ');
  }
  const where = 'edge' in spec.connection ? `edge ${spec.connection.edge}` : `edges ${spec.connection.edges.join(',')} (${spec.connection.haConnections ?? DEFAULT_HA_CONNECTIONS} tunnels)`;
  const parts = [
    `${spec.name}: ${spec.kind} ${spec.target} -> ${spec.endpoint ? `endpoint ${spec.endpoint}` : 'an ephemeral endpoint'}`,
    where,
    `${spec.transport} transport`,
    ...(spec.kind === 'http' ? [`${spec.dataConnections} data connections`] : []),
    ...(spec.hostHeader ? [`host header ${spec.hostHeader}`] : []),
    ...who,
  ];
  return parts.join(', ');
}
