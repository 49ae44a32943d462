// The fields one edge adds to a stream it relays to another: which endpoint, and which of its agents may serve it
// (the routing rule's choice). Every field under this prefix is removed before anything reaches an agent.
import type { IncomingHttpHeaders, OutgoingHttpHeaders } from 'node:http2';
import { AGENT_ID_PATTERN, MAX_AGENT_ID_LENGTH, MAX_TAG_LENGTH, MAX_TAGS, TAG_PATTERN, TUNNEL_PROTOCOLS, type TunnelProtocol } from '../../shared/tunnel/protocol.ts';
import type { PickOptions } from '../tunnels/registry.ts';

export const RELAY_PREFIX = 'x-edge-relay-';
export const RELAY_ENDPOINT = 'x-edge-relay-endpoint';
const RELAY_AGENT = 'x-edge-relay-agent';
const RELAY_TAGS = 'x-edge-relay-tags';
const RELAY_PROTOCOL = 'x-edge-relay-protocol';

/** What the relay listener needs to pick a local agent, read back from a relayed stream's fields. */
export interface RelayedTarget {
  endpoint: string;
  pick: PickOptions;
}

const ENDPOINT_ID = /^[A-Za-z0-9-]{1,64}$/;
// The same rules as an agent's hello: a relayed stream can name only what an agent could have said of itself.
const AGENT_ID = new RegExp(AGENT_ID_PATTERN);
const TAG = new RegExp(TAG_PATTERN);

/** Adds the relay fields to `headers` (after removing any a visitor sent under the same prefix). */
export function addRelayFields(headers: OutgoingHttpHeaders, endpoint: string, pick: PickOptions | undefined): OutgoingHttpHeaders {
  for (const name of Object.keys(headers)) if (name.startsWith(RELAY_PREFIX)) delete headers[name];
  headers[RELAY_ENDPOINT] = endpoint;
  if (pick?.agentId !== undefined) headers[RELAY_AGENT] = pick.agentId;
  if (pick?.tags && pick.tags.length > 0) headers[RELAY_TAGS] = pick.tags.join(',');
  if (pick?.protocol !== undefined) headers[RELAY_PROTOCOL] = pick.protocol;
  return headers;
}

/** Reads the relay fields; null when they are missing or malformed (the stream is then refused). */
export function readRelayFields(headers: IncomingHttpHeaders): RelayedTarget | null {
  const endpoint = headers[RELAY_ENDPOINT];
  if (typeof endpoint !== 'string' || !ENDPOINT_ID.test(endpoint)) return null;
  const pick: PickOptions = {};
  const agent = headers[RELAY_AGENT];
  if (agent !== undefined) {
    if (typeof agent !== 'string' || agent.length > MAX_AGENT_ID_LENGTH || !AGENT_ID.test(agent)) return null;
    pick.agentId = agent;
  }
  const tags = headers[RELAY_TAGS];
  if (tags !== undefined) {
    if (typeof tags !== 'string') return null;
    const list = tags.split(',');
    if (list.length > MAX_TAGS || !list.every((t) => t.length <= MAX_TAG_LENGTH && TAG.test(t))) return null;
    pick.tags = list;
  }
  const protocol = headers[RELAY_PROTOCOL];
  if (protocol !== undefined) {
    if (!(TUNNEL_PROTOCOLS as readonly string[]).includes(protocol as string)) return null;
    pick.protocol = protocol as TunnelProtocol;
  }
  return { endpoint, pick };
}

/** The fields an agent receives: the relayed stream's, without the relay's own. */
export function withoutRelayFields(headers: IncomingHttpHeaders): OutgoingHttpHeaders {
  const out: OutgoingHttpHeaders = {};
  for (const name in headers) if (!name.startsWith(RELAY_PREFIX)) out[name] = headers[name];
  return out;
}
