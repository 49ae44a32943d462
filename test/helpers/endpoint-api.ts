// Shared setup of tests that configure endpoints through the control API of a test node: a user's new endpoint, a call
// whose status is asserted, and waiting until the node's own edge has applied what was written (or reading it there).
import assert from 'node:assert/strict';
import type { EndpointConfig } from '../../src/shared/snapshot.ts';
import { waitForVersion } from './feed.ts';
import { startTestNode, type ApiResponse, type TestNode } from './node.ts';

export type User = Awaited<ReturnType<TestNode['createUser']>>;

/** A test node started with `env` and a business user on it: business has every entitlement and room for many endpoints. */
export async function nodeWithOwner(env?: Record<string, string>): Promise<{ t: TestNode; owner: User }> {
  const t = await startTestNode(env);
  return { t, owner: await t.createUser('business') };
}

/** The rows of a query on the node's store; the node is looked up per call, as a describe's before hook starts it. */
export function storeRows(node: () => TestNode): <R = any>(text: string, params?: unknown[]) => Promise<R[]> {
  return async <R = any>(text: string, params: unknown[] = []) => (await node().node.db!.query<R>(text, params)).rows;
}

/** The store's feed version: what a refused write must leave where it was, and a change must move. */
export async function feedVersion(t: TestNode): Promise<number> {
  return (await t.node.db!.query<{ version: number }>('SELECT version FROM feed_state')).rows[0].version;
}

/** The body of an answer whose status must be `status`; a wrong one fails with the answer's text, after `what` if named. */
export async function expectBody<T = any>(status: number, pending: Promise<ApiResponse<T>>, what?: string): Promise<T> {
  const res = await pending;
  assert.equal(res.status, status, what === undefined ? res.text : `${what}: ${res.text}`);
  return res.body;
}

/** POST /v1/endpoints with an empty body as `user` (201 asserted); the created endpoint as the API answered it. */
export function createEndpoint(t: TestNode, user: User, headers?: Record<string, string>): Promise<{ uuid: string; hostname: string; [field: string]: any }> {
  return expectBody(201, t.api('POST', '/v1/endpoints', { key: user.api_key, body: {}, headers }));
}

/** An organization of `owner`'s with `member` in it holding `permissions` (both 201s asserted): its id, and the headers that act in it. */
export async function orgWithMember(t: TestNode, owner: User, member: User, permissions: string[]): Promise<{ id: number; headers: Record<string, string> }> {
  const org = await expectBody(201, t.api('POST', '/v1/organizations', { key: owner.api_key, body: { name: 'Org' } }));
  await expectBody(201, t.api('POST', `/v1/organizations/${org.id}/members`, { key: owner.api_key, body: { email: member.email, permissions } }));
  return { id: org.id as number, headers: { 'x-account-id': String(org.id) } };
}

/**
 * Resolves once the node's edge has applied every change committed so far: the publisher is kicked rather than left
 * to its poll, so a test reads the edge's view right after a write without a sleep.
 */
export async function edgeCaughtUp(t: TestNode): Promise<void> {
  const publisher = t.node.publisher!;
  await publisher.kick();
  await waitForVersion(t.node.edgeFeed!.subscriber, publisher.publishedVersion);
}

/** The endpoint's config as the node's edge holds it once caught up; asserted present. */
export async function edgeEndpoint(t: TestNode, id: string): Promise<EndpointConfig> {
  await edgeCaughtUp(t);
  const config = t.node.edge!.config.endpoint(id);
  assert.ok(config, `edge has endpoint ${id}`);
  return config;
}
