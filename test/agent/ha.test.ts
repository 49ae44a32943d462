// An agent on several edges (src/agent/ha.ts): the list and count it accepts, a DNS name expanded into one edge per
// address by a real DNS server, and tunnels kept on different edges of real in-process nodes (the multi-process
// behaviour, an edge dying, is test/cluster/many-edges.test.ts).
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { checkHaOptions, expandEdges, MAX_HA_CONNECTIONS } from '../../src/agent/ha.ts';
import { startDnsServer, type DnsServer } from '../helpers/dns-server.ts';

const BIN = fileURLToPath(new URL('../../bin/edge.js', import.meta.url));

function agentCli(args: string[]): Promise<{ code: number | null; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [BIN, 'agent', ...args], { env: { ...process.env, EDGE_API_KEY: 'k' } });
    let stderr = '';
    child.stderr.on('data', (d) => (stderr += d));
    child.on('exit', (code) => resolve({ code, stderr }));
  });
}

describe('agent on several edges: options', () => {
  it('takes a list of distinct edge URLs and 1 to 8 tunnels, two by default', () => {
    assert.equal(checkHaOptions(['http://127.0.0.1:8080', 'http://127.0.0.1:8081'], undefined), 2);
    assert.equal(checkHaOptions(['http://a.example:8080'], MAX_HA_CONNECTIONS), MAX_HA_CONNECTIONS);
  });

  it('refuses an empty list, a repeated edge, a URL that is no edge and a bad count, naming the problem', () => {
    assert.throws(() => checkHaOptions([], undefined), /at least one edge/);
    assert.throws(() => checkHaOptions(['http://127.0.0.1:8080', 'http://127.0.0.1:8080/'], undefined), /twice/);
    assert.throws(() => checkHaOptions(['ftp://127.0.0.1'], undefined), /http\(s\)|ws\(s\)/);
    for (const n of [0, 9, 1.5, Number.NaN]) assert.throws(() => checkHaOptions(['http://127.0.0.1:8080'], n), /haConnections must be an integer from 1 to 8/);
  });

  it('the CLI refuses --edge with --edges, an empty entry, a bad --ha-connections, and --ha-connections alone', async () => {
    const cases: Array<[string[], RegExp]> = [
      [['http', '3000', '--edge', 'http://127.0.0.1:1', '--edges', 'http://127.0.0.1:2'], /not both/],
      [['http', '3000', '--edges', 'http://127.0.0.1:1,,http://127.0.0.1:2'], /separated by commas/],
      [['http', '3000', '--edges', 'http://127.0.0.1:1', '--ha-connections', '0'], /from 1 to 8/],
      [['http', '3000', '--edges', 'http://127.0.0.1:1', '--ha-connections', 'two'], /from 1 to 8/],
      [['http', '3000', '--ha-connections', '2'], /goes with --edges/],
      [['http', '3000', '--edges', 'http://127.0.0.1:1,http://127.0.0.1:1'], /twice/],
    ];
    for (const [args, message] of cases) {
      const { code, stderr } = await agentCli(args);
      assert.equal(code, 2, `${args.join(' ')}: ${stderr}`);
      assert.match(stderr, message, args.join(' '));
    }
  });
});

describe('agent on several edges: a DNS name', () => {
  let dns: DnsServer;
  before(async () => {
    dns = await startDnsServer();
  });
  after(() => dns.close());

  it('is one edge per A and AAAA record, with the URL scheme and port', async () => {
    dns.setAddresses('edges.example.test', ['127.0.0.1', '127.0.0.2', '::1']);
    const edges = await expandEdges(['http://edges.example.test:8080'], [dns.address]);
    assert.deepEqual(edges.sort(), ['http://127.0.0.1:8080', 'http://127.0.0.2:8080', 'http://[::1]:8080']);
  });

  it('is resolved again on each call, so a changed record set is followed', async () => {
    dns.setAddresses('edges.example.test', ['127.0.0.3']);
    assert.deepEqual(await expandEdges(['http://edges.example.test:8080'], [dns.address]), ['http://127.0.0.3:8080']);
  });

  it('leaves a list, a literal address and an https edge (its certificate names the host) as given', async () => {
    assert.deepEqual(await expandEdges(['http://a.test', 'http://b.test'], [dns.address]), ['http://a.test', 'http://b.test']);
    assert.deepEqual(await expandEdges(['http://127.0.0.1:9'], [dns.address]), ['http://127.0.0.1:9']);
    assert.deepEqual(await expandEdges(['https://edges.example.test'], [dns.address]), ['https://edges.example.test']);
  });

  it('refuses a name with no address', async () => {
    await assert.rejects(expandEdges(['http://nothing.example.test:8080'], [dns.address]), /resolves to no address/);
  });
});
