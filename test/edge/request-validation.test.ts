// Request validation end to end, with raw sockets (a client library would repair or refuse these requests itself):
// the real program, a real agent and a real local service. Bad Host forms are 400 before anything is routed; good
// ones are routed on the validated host and forwarded with it; backslash paths reach the service as they were judged.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import net, { type AddressInfo } from 'node:net';
import { startAgent, type Agent } from '../../src/agent/agent.ts';
import { eventually } from '../helpers/eventually.ts';
import { startTestNode, type TestNode } from '../helpers/node.ts';

interface Seen {
  url: string;
  host: string | undefined;
  rawHeaders: string[];
}

interface RawReply {
  status: number;
  code: string | undefined;
  body: string;
}

/** Sends `head` (request line and field lines) with Connection: close on a fresh socket; reads the whole answer. */
function raw(port: number, head: string): Promise<RawReply> {
  return new Promise((resolve, reject) => {
    const socket = net.connect(port, '127.0.0.1', () => socket.write(`${head}\r\nConnection: close\r\n\r\n`));
    let text = '';
    socket.setEncoding('latin1');
    socket.on('data', (d) => (text += d));
    socket.on('error', reject);
    socket.on('end', () => {
      const [headPart, ...rest] = text.split('\r\n\r\n');
      const status = Number(/^HTTP\/1\.1 (\d{3})/.exec(headPart)?.[1] ?? 0);
      const code = /\r\nx-edge-error: ([^\r]*)/i.exec(headPart)?.[1];
      resolve({ status, code, body: rest.join('\r\n\r\n') });
    });
  });
}

describe('request validation', () => {
  let t: TestNode;
  let service: http.Server;
  const seen: Seen[] = [];
  let agent: Agent;
  let host: string;
  let port: number;

  before(async () => {
    t = await startTestNode();
    service = http.createServer((req, res) => {
      seen.push({ url: req.url!, host: req.headers.host, rawHeaders: req.rawHeaders });
      res.end('ok');
    });
    await new Promise<void>((r) => service.listen(0, '127.0.0.1', r));
    const user = await t.createUser('pro');
    const endpoint = (await t.api('POST', '/v1/endpoints', { key: user.api_key, body: {} })).body;
    host = endpoint.hostname;
    port = t.node.edge!.httpPort;
    await eventually(async () => (t.node.edge!.config.endpoint(endpoint.uuid) ? true : undefined));
    agent = await startAgent({
      edgeUrl: `http://127.0.0.1:${port}`,
      apiKey: user.api_key,
      endpoint: endpoint.uuid,
      protocol: 'http',
      target: (service.address() as AddressInfo).port,
    });
  });
  after(async () => {
    await agent.stop();
    service.closeAllConnections();
    await new Promise<void>((r) => service.close(() => r()));
    await t.close();
  });

  /** A request for `target` with the given field lines, expected to reach the service; returns what it saw. */
  async function served(target: string, fields: string[]): Promise<Seen> {
    const before = seen.length;
    const reply = await raw(port, [`GET ${target} HTTP/1.1`, ...fields].join('\r\n'));
    assert.equal(reply.status, 200, `${target} ${fields.join(' | ')}: ${reply.code ?? ''}`);
    assert.equal(seen.length, before + 1);
    return seen.at(-1)!;
  }

  /** A request refused by the edge with `status` and `code`, which the service never saw. */
  async function refused(target: string, fields: string[], status: number, code: string): Promise<void> {
    const before = seen.length;
    const reply = await raw(port, [`GET ${target} HTTP/1.1`, ...fields].join('\r\n'));
    assert.equal(reply.status, status, `${target} ${fields.join(' | ')}`);
    assert.equal(reply.code, code, `${target} ${fields.join(' | ')}`);
    assert.equal(seen.length, before, 'the service saw nothing');
  }

  it('Host with a bad port or userinfo is 400, not routed on the part before the colon', async () => {
    for (const value of [
      `${host}:80@evil.example`,
      `${host}:abc`,
      `${host}:99999`,
      `${host}:80:81`,
      `${host}:0`,
      `${host}: 80`,
      `user@${host}`,
      `user:pass@${host}:80`,
    ]) {
      await refused('/', [`Host: ${value}`], 400, 'malformed_request');
    }
  });

  it('other malformed Host values are 400 too: whitespace, lists, empty labels, non-LDH names, numbers WHATWG reads as IPv4', async () => {
    for (const value of [
      `${host} evil.example`,
      `${host}\tevil.example`,
      `${host}, evil.example`,
      `${host}..`,
      `.${host}`,
      `-${host}`,
      host.replace('.', '_.'),
      host.replace('.', '%2e'),
      '',
      '[::1',
      '[fe80::1%25eth0]',
      '127.1',
      '0x7f.0.0.1',
      `${'a'.repeat(64)}.${host}`,
    ]) {
      await refused('/', [`Host: ${value}`], 400, 'malformed_request');
    }
  });

  it('more than one Host line is 400, even when both name the endpoint (RFC 9112 §3.2)', async () => {
    await refused('/', [`Host: ${host}`, `Host: ${host}`], 400, 'malformed_request');
    await refused('/', [`Host: ${host}`, 'host: evil.example'], 400, 'malformed_request');
    await refused('/', ['Host: evil.example', `HOST: ${host}`], 400, 'malformed_request');
  });

  it('routes good Host forms on the validated host and forwards that Host: a port, an empty port, upper case, a final dot', async () => {
    assert.equal((await served('/', [`Host: ${host}:8080`])).host, `${host}:8080`);
    assert.equal((await served('/', [`Host: ${host}:`])).host, host);
    assert.equal((await served('/', [`Host: ${host.toUpperCase()}.`])).host, host);
    assert.equal((await served('/', [`Host: ${host}.:08080`])).host, `${host}:8080`);
    assert.equal((await served('/', [`Host:   ${host}  `])).host, host);
  });

  it('routes IP literals as names like any other (no endpoint has one): 404, not 400', async () => {
    for (const value of ['[::1]', '[::1]:8080', '[2001:DB8::1]', '127.0.0.1', '127.0.0.1:8080']) {
      await refused('/', [`Host: ${value}`], 404, 'endpoint_not_found');
    }
  });

  it("an absolute-form target's authority wins over Host, and is the Host forwarded (RFC 9112 §3.2.2)", async () => {
    const s = await served(`http://${host.toUpperCase()}:8080/a/../abs?q=1`, ['Host: other.example']);
    assert.equal(s.url, '/abs?q=1');
    assert.equal(s.host, `${host}:8080`);
    const hostLines = s.rawHeaders.filter((_, i) => i % 2 === 0 && s.rawHeaders[i].toLowerCase() === 'host');
    assert.equal(hostLines.length, 1);
    // Routed on the target, not on a Host that names the endpoint.
    await refused('http://nobody.example/x', [`Host: ${host}`], 404, 'endpoint_not_found');
  });

  it('an absolute-form target with userinfo or a bad port, or with an invalid or repeated Host beside it, is 400', async () => {
    await refused(`http://user@${host}/x`, [`Host: ${host}`], 400, 'malformed_request');
    await refused(`http://${host}:99999/x`, [`Host: ${host}`], 400, 'malformed_request');
    await refused(`http://${host}/x`, [`Host: ${host}:80@evil.example`], 400, 'malformed_request');
    await refused(`http://${host}/x`, [`Host: ${host}`, `Host: ${host}`], 400, 'malformed_request');
    await refused(`ftp://${host}/x`, [`Host: ${host}`], 400, 'malformed_request');
  });

  it('backslashes in the path reach the service as the "/" the edge judged, never raw', async () => {
    const cases: Array<[string, string]> = [
      ['/p/..\\admin', '/admin'],
      ['/\\evil.example/x', '/evil.example/x'],
      ['/p/..%5Cadmin', '/admin'],
      ['/p/..%5cadmin?x=\\', '/admin?x=\\'],
      ['/a\\b\\', '/a/b/'],
      ['/%5C%5Cevil.example', '/evil.example'],
      // An encoded slash stays encoded: one segment, not a separator.
      ['/p/..%2Fadmin', '/p/..%2Fadmin'],
    ];
    for (const [target, expected] of cases) assert.equal((await served(target, [`Host: ${host}`])).url, expected, target);
  });

  it('`;` path parameters: a dot segment with parameters is 400 (Tomcat and Spring would serve /public/..;/admin as /admin), other parameters reach the service as written', async () => {
    for (const target of ['/public/..;/admin', '/public/%2e%2e;/admin', '/public/..%3B/admin', '/public/.;/admin', '/public\\..;\\admin']) {
      await refused(target, [`Host: ${host}`], 400, 'malformed_request');
    }
    const reply = await raw(port, `GET /public/..;/admin HTTP/1.1\r\nHost: ${host}\r\nAccept: application/json`);
    assert.match(JSON.parse(reply.body).detail, /segment with ";" parameters/);
    assert.equal((await served('/cars;color=red/x', [`Host: ${host}`])).url, '/cars;color=red/x');
  });

  it('a fragment in the request target is 400: the service would cut the path where the edge did not', async () => {
    await refused('/admin#/../public', [`Host: ${host}`], 400, 'malformed_request');
    await refused('/public?x#y', [`Host: ${host}`], 400, 'malformed_request');
  });
});
