// The OpenAPI document as a product: every operation named by the documented operationId rule, servers and licence,
// redocly's recommended rules, and the committed generated types (src/shared/api/openapi.ts) in step with the API.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { openApiDocument } from '../../src/control/openapi.ts';
import { startTestNode, type TestNode } from '../helpers/node.ts';

const run = promisify(execFile);

/** docs/api.md "The OpenAPI document": lowerCamel, a verb from this list, then the resource in words of one capital each. */
const OPERATION_ID =
  /^(list|get|create|update|replace|set|delete|add|remove|revoke|promote|verify|mark|suspend|unsuspend|pause|unpause|bind|unbind|invite|register|replay|test|regenerate|rollback|cancel|report|receive)([A-Z][a-z0-9]+)+$/;

const METHODS = ['get', 'put', 'post', 'delete', 'patch', 'head', 'options', 'trace'];

interface OpenApiDocument {
  info: { license?: { name: string } };
  servers?: { url: string }[];
  paths: Record<string, Record<string, { operationId?: string }>>;
}

function operations(doc: OpenApiDocument): { where: string; operationId?: string }[] {
  return Object.entries(doc.paths).flatMap(([path, item]) =>
    Object.entries(item)
      .filter(([method]) => METHODS.includes(method))
      .map(([method, op]) => ({ where: `${method.toUpperCase()} ${path}`, operationId: op.operationId })),
  );
}

const bin = (name: string) => join(process.cwd(), 'node_modules', '.bin', name);

describe('the OpenAPI document', () => {
  let t: TestNode;
  let served: OpenApiDocument;
  let dir: string;
  let documentFile: string;
  let built: Record<string, unknown>;

  before(async () => {
    t = await startTestNode();
    const res = await t.api<OpenApiDocument>('GET', '/v1/openapi.json', { key: null });
    assert.equal(res.status, 200);
    served = res.body;
    dir = await mkdtemp(join(tmpdir(), 'edge-openapi-'));
    documentFile = join(dir, 'openapi.json');
    // What `npm run lint:api` and `npm run api:types` build: the defaults' document, without listening.
    built = await openApiDocument();
    await writeFile(documentFile, JSON.stringify(built));
  });
  after(async () => {
    await t?.close();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it('gives every operation an operationId that follows the naming rule', () => {
    const ops = operations(served);
    assert.ok(ops.length > 100, `${ops.length} operations`);
    const unnamed = ops.filter((op) => op.operationId === undefined).map((op) => op.where);
    assert.deepEqual(unnamed, [], 'operations without an operationId');
    const offRule = ops.filter((op) => !OPERATION_ID.test(op.operationId!)).map((op) => `${op.where}: ${op.operationId}`);
    assert.deepEqual(offRule, [], 'operationIds off the rule');
  });

  it('names each operation once', () => {
    const seen = new Map<string, string>();
    const twice: string[] = [];
    for (const op of operations(served)) {
      const first = seen.get(op.operationId!);
      if (first) twice.push(`${op.operationId}: ${first} and ${op.where}`);
      else seen.set(op.operationId!, op.where);
    }
    assert.deepEqual(twice, []);
  });

  it('keeps the names clients already use', () => {
    // Renaming one renames a method in every generated client: these are fixed whatever happens to their paths.
    const byId = new Map(operations(served).map((op) => [op.operationId, op.where]));
    assert.equal(byId.get('listEndpoints'), 'GET /v1/endpoints');
    assert.equal(byId.get('createEphemeralEndpoint'), 'POST /v1/endpoints/ephemeral');
    assert.equal(byId.get('reportDeployAgentEvents'), 'POST /v1/applications/{uuid}/agent-events');
    assert.equal(byId.get('registerRbacClient'), 'POST /v1/rbac/registrations');
    assert.equal(byId.get('replayTrafficLog'), 'POST /v1/traffic/logs/{id}/replay');
    assert.equal(byId.get('pauseEndpoint'), 'POST /v1/admin/endpoints/{id}/pause');
    assert.equal(byId.get('unsuspendAccount'), 'POST /v1/admin/accounts/{id}/unsuspend');
  });

  it('names the project licence and, without a public control URL, the server it was fetched from', () => {
    assert.deepEqual(served.info.license, { name: 'UNLICENSED' });
    assert.deepEqual(served.servers?.map((s) => s.url), ['/']);
  });

  it('is the document the lint and type scripts build without listening', () => {
    assert.deepEqual(built, served);
  });

  it('passes redocly lint with the recommended rules (redocly.yaml)', { skip: !existsSync(bin('redocly')) && 'no node_modules/.bin/redocly' }, async () => {
    const env = { ...process.env, REDOCLY_TELEMETRY: 'off', REDOCLY_SUPPRESS_UPDATE_NOTICE: 'true', NO_COLOR: '1' };
    const result = await run(bin('redocly'), ['lint', '--config', 'redocly.yaml', '--format', 'json', documentFile], { env, maxBuffer: 64 << 20 }).catch((err: { stdout: string; code: number }) => err);
    const report = JSON.parse(result.stdout.slice(result.stdout.indexOf('{'))) as { problems: { ruleId: string; severity: string; message: string; location: { pointer: string }[] }[] };
    assert.deepEqual(
      report.problems.map((p) => `${p.severity} ${p.ruleId} ${p.location[0]?.pointer}: ${p.message}`),
      [],
      'redocly problems (errors and warnings)',
    );
  });

  it('matches the committed generated types (run `npm run api:types` after changing the API)', { skip: !existsSync(bin('openapi-typescript')) && 'no node_modules/.bin/openapi-typescript' }, async () => {
    const generated = join(dir, 'openapi.ts');
    await run(bin('openapi-typescript'), [documentFile, '-o', generated], { env: { ...process.env, NO_COLOR: '1' } });
    const committed = await readFile('src/shared/api/openapi.ts', 'utf8');
    assert.ok((await readFile(generated, 'utf8')) === committed, 'src/shared/api/openapi.ts is stale: run `npm run api:types` and commit it');
  });
});

describe('the OpenAPI document behind a public control URL', () => {
  let t: TestNode;
  before(async () => {
    t = await startTestNode({ EDGE_PUBLIC_CONTROL_URL: 'https://control.edge.test/' });
  });
  after(() => t?.close());

  it('names EDGE_PUBLIC_CONTROL_URL as its server, without the trailing slash', async () => {
    const res = await t.api<OpenApiDocument>('GET', '/v1/openapi.json', { key: null });
    assert.deepEqual(res.body.servers?.map((s) => s.url), ['https://control.edge.test']);
  });
});
