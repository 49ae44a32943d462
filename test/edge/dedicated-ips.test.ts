// The edge on dedicated addresses: it listens on its region's dedicated IPs beside its bind host, serves there only
// the endpoints bound to each (421 for the rest), and in TLS refuses a server name the address does not serve.
import http from 'node:http';
import net from 'node:net';
import tls from 'node:tls';
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { startTestNode, type TestNode } from '../helpers/node.ts';
import { createEndpoint, expectBody, type User } from '../helpers/endpoint-api.ts';
import { readUntil } from '../helpers/eventually.ts';

/** Loopback addresses other than the bind host: all of 127/8 is local on Linux, no alias needed. */
const GROUP_IP = '127.0.0.2';
const SINGLE_IP = '127.0.0.3';

function get(address: string, port: number, host: string): Promise<{ status: number; code?: string }> {
  return new Promise((resolve, reject) => {
    const req = http.request({ host: address, port, path: '/', headers: { host, accept: 'application/json' } }, (res) => {
      let text = '';
      res.on('data', (c: Buffer) => (text += c.toString()));
      res.on('end', () => {
        let code: string | undefined;
        try {
          code = (JSON.parse(text) as { code?: string }).code;
        } catch {
          /* not JSON */
        }
        resolve({ status: res.statusCode ?? 0, code });
      });
    });
    req.on('error', reject);
    req.end();
  });
}

/** A TLS handshake (servername null: no SNI) then one request; rejects with the handshake's error. */
function tlsGet(address: string, port: number, servername: string | null, host: string): Promise<{ status: number }> {
  return new Promise((resolve, reject) => {
    const socket = tls.connect({ host: address, port, rejectUnauthorized: false, ...(servername === null ? {} : { servername }) }, () => {
      const req = http.request({ createConnection: () => socket, path: '/', headers: { host } }, (res) => {
        res.resume();
        res.on('end', () => resolve({ status: res.statusCode ?? 0 }));
      });
      req.on('error', reject);
      req.end();
    });
    socket.on('error', reject);
  });
}

function listening(address: string, port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = net.connect({ host: address, port }, () => {
      socket.destroy();
      resolve(true);
    });
    socket.on('error', () => resolve(false));
  });
}

describe('edge on dedicated addresses', () => {
  let t: TestNode;
  let owner: User;
  let httpPort: number;
  let httpsPort: number;
  let grouped: { uuid: string; hostname: string };
  let single: { uuid: string; hostname: string };
  let shared: { uuid: string; hostname: string };
  let groupId: number;
  before(async () => {
    t = await startTestNode({ EDGE_REGION: 'eu' });
    owner = await t.createUser('business');
    httpPort = t.node.edge!.httpPort;
    httpsPort = t.node.edge!.httpsPort;
    const ip = (address: string) => expectBody(201, t.api('POST', '/v1/admin/dedicated-ips', { body: { address, region: 'eu', account_id: owner.account_id } }));
    const g = await ip(GROUP_IP);
    const s = await ip(SINGLE_IP);
    groupId = (await expectBody(201, t.api('POST', '/v1/admin/dedicated-ip-groups', { body: { account_id: owner.account_id, name: 'g', status: 'active', addresses: [g.address] } }))).id;
    [grouped, single, shared] = await Promise.all([createEndpoint(t, owner), createEndpoint(t, owner), createEndpoint(t, owner)]);
    await expectBody(200, t.api('POST', `/v1/endpoints/${grouped.uuid}/dedicated-ip-group`, { key: owner.api_key, body: { group_id: groupId } }));
    await expectBody(200, t.api('POST', `/v1/endpoints/${single.uuid}/dedicated-ip`, { key: owner.api_key, body: { dedicated_ip_id: s.id } }));
    await readUntil(async () => (await listening(GROUP_IP, httpPort)) && (await listening(SINGLE_IP, httpsPort)), Boolean);
    // Every endpoint has reached the edge: none is 404 on the shared address.
    await readUntil(async () => (await get('127.0.0.1', httpPort, shared.hostname)).status !== 404, Boolean);
  });
  after(() => t.close());

  it('serves a dedicated address only for the endpoints bound to it, and answers 421 for the others', async () => {
    // No agent is connected: an endpoint that may be served there gets 502 no_agent, past the address check.
    assert.deepEqual(await get(GROUP_IP, httpPort, grouped.hostname), { status: 502, code: 'no_agent' });
    assert.deepEqual(await get(GROUP_IP, httpPort, shared.hostname), { status: 421, code: 'misdirected_request' });
    assert.deepEqual(await get(GROUP_IP, httpPort, single.hostname), { status: 421, code: 'misdirected_request' });
    assert.deepEqual(await get(SINGLE_IP, httpPort, single.hostname), { status: 502, code: 'no_agent' });
    assert.deepEqual(await get(SINGLE_IP, httpPort, grouped.hostname), { status: 421, code: 'misdirected_request' });
    assert.equal((await get(GROUP_IP, httpPort, 'unknown.example')).status, 404);
  });

  it('reports the dedicated addresses it listens on in its heartbeat (GET /v1/edges)', async () => {
    await readUntil(async () => {
      const edges = (await t.api('GET', '/v1/edges')).body.items as Array<{ dedicated_addresses: string[] }>;
      return edges.some((e) => e.dedicated_addresses.includes(GROUP_IP) && e.dedicated_addresses.includes(SINGLE_IP));
    }, Boolean);
  });

  it('keeps serving every endpoint on the shared address', async () => {
    for (const ep of [grouped, single, shared]) assert.equal((await get('127.0.0.1', httpPort, ep.hostname)).code, 'no_agent', ep.hostname);
  });

  it('in TLS, refuses a server name the address does not serve, and takes a client that names none', async () => {
    await assert.rejects(tlsGet(GROUP_IP, httpsPort, shared.hostname, shared.hostname), /unrecognized.name/i);
    assert.equal((await tlsGet(GROUP_IP, httpsPort, grouped.hostname, grouped.hostname)).status, 502);
    assert.equal((await tlsGet(SINGLE_IP, httpsPort, null, single.hostname)).status, 502);
    assert.equal((await tlsGet(SINGLE_IP, httpsPort, null, shared.hostname)).status, 421);
    assert.equal((await tlsGet('127.0.0.1', httpsPort, shared.hostname, shared.hostname)).status, 502);
  });

  it('follows the feed: a retired group stops being listened on, a detached address serves nobody', async () => {
    await expectBody(204, t.api('DELETE', `/v1/endpoints/${single.uuid}/dedicated-ip`, { key: owner.api_key }));
    await readUntil(async () => !(await listening(SINGLE_IP, httpPort)), Boolean);
    await expectBody(204, t.api('DELETE', `/v1/endpoints/${grouped.uuid}/dedicated-ip-group`, { key: owner.api_key }));
    // The group still holds the address: it stays dedicated, and now serves no endpoint.
    await readUntil(async () => (await get(GROUP_IP, httpPort, grouped.hostname)).status === 421, Boolean);
    await expectBody(200, t.api('DELETE', `/v1/admin/dedicated-ip-groups/${groupId}`));
    await readUntil(async () => !(await listening(GROUP_IP, httpPort)), Boolean);
  });
});
