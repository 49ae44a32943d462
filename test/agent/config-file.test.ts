// The agent file (src/agent/config-file.ts) as `edge agent start` and `edge agent config check` read it: what a valid
// file resolves to, every kind of mistake located at file:line:col with its field path, and the precedence of defaults.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describeTunnel, loadAgentFile, parseAgentFile, type AgentFlags, type TunnelSpec } from '../../src/agent/config-file.ts';

const APP = '0b7e3f62-1c2d-4e5f-8a9b-0c1d2e3f4a5b';
const ENDPOINT = '5f0c8e1a-2b3c-4d5e-9f60-718293a4b5c6';

/** The file's mistakes, asserted to be some. */
function mistakes(text: string, env: NodeJS.ProcessEnv = { KEY: 'edge_key' }, flags: AgentFlags = {}): string[] {
  const result = parseAgentFile('edge-agent.yml', text, env, flags);
  assert.equal(result.ok, false, 'the file has mistakes');
  return result.ok ? [] : result.errors;
}

/** The file's tunnels by name, asserted valid. */
function tunnels(text: string, env: NodeJS.ProcessEnv = { KEY: 'edge_key' }, flags: AgentFlags = {}): Record<string, TunnelSpec> {
  const result = parseAgentFile('/etc/edge/edge-agent.yml', text, env, flags);
  assert.ok(result.ok, result.ok ? '' : result.errors.join('\n'));
  return Object.fromEntries(result.file.tunnels.map((t) => [t.name, t]));
}

const FULL = `# every kind of tunnel
api_key: \${KEY}
edge: https://edge.example.test
transport: raw
data_connections: 4
log:
  format: json
  level: info
tunnels:
  web:
    protocol: http
    target: 3000
    endpoint: ${ENDPOINT}
    host_header: app.local
    tags: [eu, blue]
    agent_id: laptop-web
  db:
    protocol: tcp
    target: 127.0.0.1:5432
    transport: ws
    edges: [https://a.edge.test, https://b.edge.test]
    ha_connections: 2
  dns:
    protocol: udp
    target: udp://127.0.0.1:53
  site:
    protocol: deploy
    application: ${APP}
    dir: releases/site
    build_timeout: 300
    health_timeout: 30
    keep_releases: 5
`;

describe('agent file: a valid file', () => {
  it('resolves every kind of tunnel with its own settings and the file defaults, in the file order', () => {
    const result = parseAgentFile('/etc/edge/edge-agent.yml', FULL, { KEY: 'edge_key' });
    assert.ok(result.ok);
    assert.deepEqual(result.file.log, { format: 'json', level: 'info' });
    assert.deepEqual(
      result.file.tunnels.map((t) => t.name),
      ['web', 'db', 'dns', 'site'],
    );
    const { web, db, dns, site } = tunnels(FULL);
    assert.deepEqual(web, {
      name: 'web',
      apiKey: 'edge_key',
      transport: 'raw',
      agentId: 'laptop-web',
      tags: ['eu', 'blue'],
      kind: 'http',
      target: 3000,
      endpoint: ENDPOINT,
      hostHeader: 'app.local',
      dataConnections: 4,
      connection: { edge: 'https://edge.example.test' },
    });
    assert.equal(db.kind, 'tcp');
    assert.ok(db.kind === 'tcp' && dns.kind === 'udp');
    assert.deepEqual(db.connection, { edges: ['https://a.edge.test', 'https://b.edge.test'], haConnections: 2 });
    assert.equal(db.transport, 'ws');
    assert.equal(dns.target, 'udp://127.0.0.1:53');
    assert.deepEqual(dns.connection, { edge: 'https://edge.example.test' });
    // A relative dir is taken from the file's directory, not from wherever the agent was started.
    assert.deepEqual(site, {
      name: 'site',
      apiKey: 'edge_key',
      transport: 'raw',
      agentId: undefined,
      tags: [],
      kind: 'deploy',
      application: APP,
      dir: '/etc/edge/releases/site',
      buildTimeoutMs: 300_000,
      healthTimeoutMs: 30_000,
      keepReleases: 5,
      edge: 'https://edge.example.test',
    });
  });

  it('reads JSON, which is YAML too', () => {
    const { web } = tunnels(JSON.stringify({ api_key: 'k', tunnels: { web: { protocol: 'http', target: 'https://localhost:8443' } } }));
    assert.equal(web.apiKey, 'k');
    assert.ok(web.kind === 'http');
    assert.equal(web.target, 'https://localhost:8443');
    assert.deepEqual(web.connection, { edge: 'http://127.0.0.1:8080' });
    assert.equal(web.dataConnections, 8);
    assert.equal(web.transport, 'auto');
  });

  it('replaces ${NAME} in any string with the variable, and $${ stays a literal ${', () => {
    const { web } = tunnels('api_key: key-${KEY}\ntunnels:\n  web: { protocol: http, target: "${PORT}", host_header: "a$${b}" }\n', { KEY: 'x', PORT: '4000' });
    assert.equal(web.apiKey, 'key-x');
    assert.ok(web.kind === 'http');
    assert.equal(web.target, '4000');
    assert.equal(web.hostHeader, 'a${b}');
  });

  it('says in one line per tunnel what it will do, never its API key', () => {
    const lines = Object.values(tunnels(FULL)).map(describeTunnel);
    assert.deepEqual(lines, [
      `web: http 3000 -> endpoint ${ENDPOINT}, edge https://edge.example.test, raw transport, 4 data connections, host header app.local, agent id laptop-web, tags eu,blue`,
      'db: tcp 127.0.0.1:5432 -> an ephemeral endpoint, edges https://a.edge.test,https://b.edge.test (2 tunnels), ws transport',
      'dns: udp udp://127.0.0.1:53 -> an ephemeral endpoint, edge https://edge.example.test, raw transport',
      `site: deploy application ${APP} in /etc/edge/releases/site, edge https://edge.example.test, raw transport`,
    ]);
    for (const line of lines) assert.doesNotMatch(line, /edge_key/);
  });
});

describe('agent file: every mistake located', () => {
  it('names the line, column and field path of a wrong value, an unknown field and a misplaced one, all at once', () => {
    const errors = mistakes(`api_key: \${KEY}
transport: quic
colour: blue
tunnels:
  web:
    protocol: http
    target: 3000
    transport: rawx
    data_connections: "8"
    tags: [ok, "not ok"]
    dir: /srv
  db:
    protocol: tcp
    target: 5432
    data_connections: 2
    endpoint: not-a-uuid
`);
    assert.deepEqual(errors, [
      'edge-agent.yml:2:12 transport: must be auto, raw or ws, got "quic"',
      'edge-agent.yml:3:1 colour: unknown field',
      'edge-agent.yml:8:16 tunnels.web.transport: must be auto, raw or ws, got "rawx"',
      'edge-agent.yml:9:23 tunnels.web.data_connections: must be a whole number from 0 to 1024, got "8"',
      'edge-agent.yml:10:16 tunnels.web.tags.1: must be 1 to 64 of A-Z a-z 0-9 _ . -, starting with a letter or digit, got "not ok"',
      'edge-agent.yml:11:5 tunnels.web.dir: applies to deploy tunnels, not http',
      'edge-agent.yml:15:5 tunnels.db.data_connections: applies to http tunnels, not tcp',
      `edge-agent.yml:16:15 tunnels.db.endpoint: must be an endpoint's UUID, got "not-a-uuid"`,
    ]);
  });

  it('refuses a key given twice in one map, and says where the second one is', () => {
    assert.deepEqual(mistakes('tunnels:\n  web:\n    protocol: http\n    target: 1\n    target: 2\n'), ['edge-agent.yml:5:5 a key is given twice in one map']);
    assert.deepEqual(mistakes('tunnels:\n  web: { protocol: http, target: 1 }\n  web: { protocol: tcp, target: 2 }\n'), ['edge-agent.yml:3:3 a key is given twice in one map']);
  });

  it('locates a YAML syntax error', () => {
    const errors = mistakes('api_key: k\ntunnels:\n  web: { protocol: http, target: [1\n');
    assert.ok(errors.length > 0);
    for (const error of errors) assert.match(error, /^edge-agent\.yml:[34]:\d+ /);
  });

  it('names a missing ${VARIABLE} and where it is used, and a malformed reference', () => {
    assert.deepEqual(mistakes('api_key: ${EDGE_SECRET_KEY}\ntunnels:\n  web:\n    protocol: http\n    target: ${WEB_PORT}\n    host_header: "${not valid}"\n', {}), [
      'edge-agent.yml:1:10 api_key: the environment variable EDGE_SECRET_KEY is not set (or is empty)',
      'edge-agent.yml:5:13 tunnels.web.target: the environment variable WEB_PORT is not set (or is empty)',
      'edge-agent.yml:6:18 tunnels.web.host_header: "${not valid}" is not a variable reference (a name of A-Z a-z 0-9 _; write $${ for a literal ${)',
    ]);
    // Set but empty is as good as unset: an empty key would only be refused later, less clearly.
    assert.deepEqual(mistakes('api_key: ${K}\ntunnels:\n  web: { protocol: http, target: 1 }\n', { K: '' }), [
      'edge-agent.yml:1:10 api_key: the environment variable K is not set (or is empty)',
    ]);
  });

  it('says what a tunnel lacks or has wrong: protocol, kind, target, name, shape', () => {
    assert.deepEqual(
      mistakes(`api_key: k
tunnels:
  noproto:
    target: 1
  badproto:
    protocol: quic
  notarget:
    protocol: tcp
  porty:
    protocol: tcp
    target: localhost
  schemey:
    protocol: udp
    target: tcp://127.0.0.1:53
  "bad name":
    protocol: http
    target: 1
  list: [1, 2]
  nodir:
    protocol: deploy
    application: not-a-uuid
`),
      [
        'edge-agent.yml:3:3 tunnels.noproto: protocol is required (http, tcp, udp, deploy)',
        'edge-agent.yml:6:15 tunnels.badproto.protocol: must be http, tcp, udp, deploy, got "quic"',
        'edge-agent.yml:7:3 tunnels.notarget: target is required',
        'edge-agent.yml:11:13 tunnels.porty.target: target "localhost" needs a port',
        'edge-agent.yml:14:13 tunnels.schemey.target: target "tcp://127.0.0.1:53" has scheme tcp: but a udp agent accepts udp:',
        'edge-agent.yml:15:3 tunnels.bad name: a tunnel name is 1 to 64 of A-Z a-z 0-9 _ . -, starting with a letter or digit',
        "edge-agent.yml:18:9 tunnels.list: must be a map of the tunnel's settings (protocol, target, …)",
        'edge-agent.yml:19:3 tunnels.nodir: dir is required',
        `edge-agent.yml:21:18 tunnels.nodir.application: must be the application's UUID, got "not-a-uuid"`,
      ],
    );
  });

  it('refuses a file that is not a map, has no tunnels, or an empty tunnels map', () => {
    assert.deepEqual(mistakes(''), ['edge-agent.yml:1:1 (file): must be a map of settings with a `tunnels:` map (see docs/agent-config.md)']);
    assert.deepEqual(mistakes('- web\n'), ['edge-agent.yml:1:1 (file): must be a map of settings with a `tunnels:` map (see docs/agent-config.md)']);
    assert.deepEqual(mistakes('api_key: k\n'), ['edge-agent.yml:1:1 (file): tunnels is required']);
    assert.deepEqual(mistakes('api_key: k\ntunnels: {}\n'), ['edge-agent.yml:2:10 tunnels: must name at least one tunnel']);
    assert.deepEqual(mistakes('tunnels: [web]\n'), ['edge-agent.yml:1:10 tunnels: must map tunnel names to tunnels']);
  });

  it('checks where to connect: edge or edges, ha_connections with edges, URLs that are edge URLs', () => {
    assert.deepEqual(
      mistakes(`api_key: k
edge: ftp://edge.test
tunnels:
  a: { protocol: http, target: 1, edge: "http://x:1", edges: ["http://y:1"] }
  b: { protocol: http, target: 1, ha_connections: 2 }
  c: { protocol: http, target: 1, edges: ["http://y:1", "http://y:1"] }
  d: { protocol: http, target: 1, edges: ["http://y:1"], ha_connections: 9 }
`),
      [
        'edge-agent.yml:2:7 edge: edge URL "ftp://edge.test" must be http(s):// or ws(s)://',
        'edge-agent.yml:4:55 tunnels.a.edges: give edge (one edge) or edges (several), not both',
        'edge-agent.yml:5:35 tunnels.b.ha_connections: goes with edges, in the same place',
        'edge-agent.yml:6:42 tunnels.c.edges: edges names http://y:1 twice',
        'edge-agent.yml:7:74 tunnels.d.ha_connections: must be a whole number from 1 to 8, got 9',
      ],
    );
  });

  it('refuses two tunnels with one agent id, two deploy tunnels in one directory, and a deploy tunnel on several edges', () => {
    assert.deepEqual(
      mistakes(`api_key: k
edges: ["http://a:1", "http://b:1"]
tunnels:
  one: { protocol: http, target: 1, agent_id: laptop }
  two: { protocol: tcp, target: 2, agent_id: laptop }
  site: { protocol: deploy, application: ${APP}, dir: ./r, edge: "http://a:1" }
  blog: { protocol: deploy, application: ${APP}, dir: r, edge: "http://a:1" }
  shop: { protocol: deploy, application: ${APP}, dir: s }
`),
      [
        'edge-agent.yml:5:46 tunnels.two.agent_id: tunnel one has the same agent id',
        'edge-agent.yml:7:85 tunnels.blog.dir: tunnel site deploys into the same directory',
        'edge-agent.yml:8:3 tunnels.shop: a deploy tunnel connects to one edge, and the default is several (edges from the file); give the tunnel its own edge',
      ],
    );
  });

  it('says when a tunnel has no API key from anywhere, and never repeats a key it refuses', () => {
    assert.deepEqual(mistakes('tunnels:\n  web: { protocol: http, target: 1 }\n', {}), [
      'edge-agent.yml:2:3 tunnels.web: no API key: set api_key (at the top level or in the tunnel), EDGE_API_KEY or --api-key',
    ]);
    const long = 'secret'.repeat(50);
    const errors = mistakes(`api_key: ${long}\ntunnels:\n  web: { protocol: http, target: 1, api_key: 7 }\n`);
    assert.deepEqual(errors, ['edge-agent.yml:1:10 api_key: must be an API key of 1 to 256 characters', 'edge-agent.yml:3:46 tunnels.web.api_key: must be an API key of 1 to 256 characters']);
  });

  it('names a file that cannot be read', async () => {
    const result = await loadAgentFile('/nonexistent/edge-agent.yml', {});
    assert.deepEqual(result, { ok: false, errors: ['/nonexistent/edge-agent.yml: cannot read the file (no such file)'] });
  });
});

describe('agent file: precedence of defaults (file < environment < flags; a tunnel’s own setting wins)', () => {
  const FILE = `api_key: file-key
edge: http://file.edge:1
transport: ws
data_connections: 3
tunnels:
  plain: { protocol: http, target: 1 }
  own: { protocol: http, target: 1, api_key: own-key, edge: "http://own.edge:1", transport: raw, data_connections: 0 }
`;

  it('takes the file top level when nothing else is given', () => {
    const { plain } = tunnels(FILE, {});
    assert.ok(plain.kind === 'http');
    assert.deepEqual([plain.apiKey, plain.connection, plain.transport, plain.dataConnections], ['file-key', { edge: 'http://file.edge:1' }, 'ws', 3]);
  });

  it('the environment overrides the file, empty variables count as unset', () => {
    const env = { EDGE_API_KEY: 'env-key', EDGE_URL: 'http://env.edge:1', EDGE_TRANSPORT: 'auto', EDGE_DATA_CONNECTIONS: '5' };
    const { plain } = tunnels(FILE, env);
    assert.ok(plain.kind === 'http');
    assert.deepEqual([plain.apiKey, plain.connection, plain.transport, plain.dataConnections], ['env-key', { edge: 'http://env.edge:1' }, 'auto', 5]);
    const { plain: unset } = tunnels(FILE, { EDGE_API_KEY: '', EDGE_TRANSPORT: '' });
    assert.deepEqual([unset.apiKey, unset.transport], ['file-key', 'ws']);
    // EDGE_EDGES wins over EDGE_URL, as for `edge agent http`.
    const { plain: several } = tunnels(FILE, { EDGE_URL: 'http://env.edge:1', EDGE_EDGES: 'http://e1:1,http://e2:1' });
    assert.ok(several.kind === 'http');
    assert.deepEqual(several.connection, { edges: ['http://e1:1', 'http://e2:1'] });
  });

  it('flags override the environment', () => {
    const env = { EDGE_API_KEY: 'env-key', EDGE_EDGES: 'http://e1:1,http://e2:1', EDGE_TRANSPORT: 'auto', EDGE_DATA_CONNECTIONS: '5' };
    const { plain } = tunnels(FILE, env, { apiKey: 'flag-key', edge: 'http://flag.edge:1', transport: 'raw', dataConnections: '7' });
    assert.ok(plain.kind === 'http');
    assert.deepEqual([plain.apiKey, plain.connection, plain.transport, plain.dataConnections], ['flag-key', { edge: 'http://flag.edge:1' }, 'raw', 7]);
    const { plain: several } = tunnels(FILE, env, { edges: 'http://f1:1, http://f2:1', haConnections: '1' });
    assert.ok(several.kind === 'http');
    assert.deepEqual(several.connection, { edges: ['http://f1:1', 'http://f2:1'], haConnections: 1 });
  });

  it("a tunnel's own settings win over file, environment and flags", () => {
    const { own } = tunnels(FILE, { EDGE_API_KEY: 'env-key', EDGE_TRANSPORT: 'auto' }, { apiKey: 'flag-key', edges: 'http://f1:1', transport: 'ws', dataConnections: '7' });
    assert.ok(own.kind === 'http');
    assert.deepEqual([own.apiKey, own.connection, own.transport, own.dataConnections], ['own-key', { edge: 'http://own.edge:1' }, 'raw', 0]);
  });

  it('names the variable or flag that holds a bad value', () => {
    const errors = mistakes(FILE, { EDGE_TRANSPORT: 'quic', EDGE_DATA_CONNECTIONS: 'many', EDGE_URL: 'edge.test', EDGE_LOG_FORMAT: 'yaml', EDGE_LOG_LEVEL: 'loud' }, {
      transport: 'carrier-pigeon',
      dataConnections: '2000',
      haConnections: '3',
    });
    assert.deepEqual(errors, [
      'EDGE_TRANSPORT: must be auto, raw or ws, got "quic"',
      '--transport: must be auto, raw or ws, got "carrier-pigeon"',
      'EDGE_DATA_CONNECTIONS: must be a whole number from 0 to 1024, got "many"',
      '--data-connections: must be a whole number from 0 to 1024, got "2000"',
      'EDGE_URL: edge URL "edge.test" is not a URL; use e.g. http://127.0.0.1:8080',
      '--ha-connections: goes with --edges',
      'EDGE_LOG_FORMAT: must be auto, text or json, got "yaml"',
      'EDGE_LOG_LEVEL: must be one of fatal, error, warn, info, debug, trace, silent, got "loud"',
    ]);
    assert.deepEqual(mistakes(FILE, {}, { edge: 'http://a:1', edges: 'http://b:1' }), ['--edges: give --edge (one edge) or --edges (several), not both']);
    assert.deepEqual(mistakes(FILE, { EDGE_EDGES: 'http://a:1,,http://b:1' }), ['EDGE_EDGES: must list edge URLs separated by commas, got "http://a:1,,http://b:1"']);
  });

  it('log settings: the environment overrides the file', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'agent-file-'));
    try {
      const path = join(dir, 'edge-agent.yml');
      await writeFile(path, 'api_key: k\nlog: { format: text, level: debug }\ntunnels:\n  web: { protocol: http, target: 1 }\n');
      const fromFile = await loadAgentFile(path, {});
      assert.ok(fromFile.ok);
      assert.deepEqual(fromFile.file.log, { format: 'text', level: 'debug' });
      const fromEnv = await loadAgentFile(path, { EDGE_LOG_FORMAT: 'json', EDGE_LOG_LEVEL: 'warn' });
      assert.ok(fromEnv.ok);
      assert.deepEqual(fromEnv.file.log, { format: 'json', level: 'warn' });
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
