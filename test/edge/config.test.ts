// The edge's config mirror: host lookups follow every change (renames, deletions, names that appear after a
// cached miss), and the saved copy brings a restarted edge back to the version it had applied.
import { after, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { EdgeConfig } from '../../src/edge/config.ts';
import { createLogger } from '../../src/shared/log.ts';
import type { EndpointConfig } from '../../src/shared/snapshot.ts';

const logger = createLogger('silent');

function endpoint(uuid: string, hostname: string, extra: Partial<EndpointConfig> = {}): EndpointConfig {
  return {
    id: 1,
    uuid,
    user_id: 1,
    account_id: 1,
    hostname,
    status: 'active',
    ephemeral: false,
    dedicated_tcp_port: null,
    dedicated_udp_port: null,
    certificate_id: null,
    mtls_mode: 'disabled',
    mtls_ca_pem: null,
    capture_enabled: true,
    capture_level: null,
    enforce_https: false,
    paused: false,
    origin_url: null,
    routing_rules: [],
    ...extra,
  };
}

describe('EdgeConfig', () => {
  const dirs: string[] = [];
  after(async () => {
    for (const d of dirs) await rm(d, { recursive: true, force: true });
  });

  it('finds endpoints by hostname and follows renames and deletions', () => {
    const config = new EdgeConfig({ logger });
    config.mirror.apply({ version: 1, topic: 'endpoint', key: 'u1', data: endpoint('u1', 'a.edge.localhost') });
    assert.equal(config.lookup('a.edge.localhost')?.config.uuid, 'u1');
    config.mirror.apply({ version: 2, topic: 'endpoint', key: 'u1', data: endpoint('u1', 'b.edge.localhost') });
    assert.equal(config.lookup('a.edge.localhost'), null);
    assert.equal(config.lookup('b.edge.localhost')?.config.uuid, 'u1');
    config.mirror.apply({ version: 3, topic: 'endpoint', key: 'u1', data: null });
    assert.equal(config.lookup('b.edge.localhost'), null);
  });

  it('serves a name that appears after a cached miss', () => {
    const config = new EdgeConfig({ logger });
    assert.equal(config.lookup('late.edge.localhost'), null);
    config.mirror.apply({ version: 1, topic: 'endpoint', key: 'u2', data: endpoint('u2', 'late.edge.localhost') });
    assert.equal(config.lookup('late.edge.localhost')?.config.uuid, 'u2');
  });

  it('recompiles on change: a new config version is what the next lookup sees', () => {
    const config = new EdgeConfig({ logger });
    config.mirror.apply({ version: 1, topic: 'endpoint', key: 'u3', data: endpoint('u3', 'c.edge.localhost') });
    assert.equal(config.lookup('c.edge.localhost')?.config.status, 'active');
    config.mirror.apply({ version: 2, topic: 'endpoint', key: 'u3', data: endpoint('u3', 'c.edge.localhost', { status: 'disabled' }) });
    assert.equal(config.lookup('c.edge.localhost')?.config.status, 'disabled');
  });

  it('saves what it applied and restores it at the same version', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'edge-config-'));
    dirs.push(dir);
    const stateFile = join(dir, 'edge-config.json');
    const first = new EdgeConfig({ logger, stateFile });
    await first.mirror.reset({ version: 7, entries: [{ topic: 'endpoint', key: 'u4', version: 7, data: endpoint('u4', 'd.edge.localhost') }] });
    await first.flush();
    const second = new EdgeConfig({ logger, stateFile });
    assert.equal(await second.load(), 7);
    assert.equal(second.lookup('d.edge.localhost')?.config.uuid, 'u4');
  });

  it('starts empty when the saved file is missing or unreadable', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'edge-config-'));
    dirs.push(dir);
    const config = new EdgeConfig({ logger, stateFile: join(dir, 'absent.json') });
    assert.equal(await config.load(), 0);
  });
});
