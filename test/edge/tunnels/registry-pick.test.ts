// TunnelRegistry.pick as the one round-robin choice of an endpoint's agent, for HTTP forwarding and for dedicated
// ports alike (these had a second copy of it, pickSession): filters by agent id, tags and protocol.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { EventEmitter } from 'node:events';
import { TunnelRegistry, type AgentSession } from '../../../src/edge/tunnels/registry.ts';

const ENDPOINT = { uuid: '7d1f2c3b-4a5e-4f60-8a7b-9c0d1e2f3a4b', hostname: 'pick.edge.test', public_url: 'pick.edge.test' };

/** A stand-in for a live session: only what the registry reads. */
function session(agentId: string, protocol: 'http' | 'tcp' | 'udp', tags: string[] = []): AgentSession {
  return Object.assign(new EventEmitter(), { agentId, protocol, tags, available: true, endpoint: ENDPOINT, credential: null, remoteAddress: '127.0.0.1' }) as unknown as AgentSession;
}

describe('TunnelRegistry.pick', () => {
  it('dedicated ports picking by protocol: an http agent never gets raw TCP, and tcp agents take turns', () => {
    const registry = new TunnelRegistry();
    const [web, tcp1, tcp2, udp] = [session('web', 'http'), session('t1', 'tcp'), session('t2', 'tcp'), session('u', 'udp')];
    for (const s of [web, tcp1, tcp2, udp]) registry.add(s);
    const tcpPicks = Array.from({ length: 4 }, () => registry.pick(ENDPOINT.uuid, { protocol: 'tcp' })?.agentId);
    assert.deepEqual(tcpPicks.sort(), ['t1', 't1', 't2', 't2']);
    assert.equal(registry.pick(ENDPOINT.uuid, { protocol: 'udp' })?.agentId, 'u');
    assert.equal(registry.pick(ENDPOINT.uuid, { protocol: 'tcp', agentId: 'web' }), null, 'filters combine');
    assert.equal(registry.pick(ENDPOINT.uuid, { protocol: 'http', tags: ['missing'] }), null);
  });

  it('no session of the protocol, or an unknown endpoint: null', () => {
    const registry = new TunnelRegistry();
    registry.add(session('web', 'http'));
    assert.equal(registry.pick(ENDPOINT.uuid, { protocol: 'udp' }), null);
    assert.equal(registry.pick('00000000-0000-4000-8000-000000000000', { protocol: 'tcp' }), null);
    assert.equal(registry.pick(ENDPOINT.uuid)?.agentId, 'web', 'no filter: any protocol, as HTTP forwarding picks');
  });
});
