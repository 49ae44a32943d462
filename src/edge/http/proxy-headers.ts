// The forwarding headers the edge vouches for: visitor-sent copies are removed first, then the edge sets its own
// from the connection (ARCHITECTURE.md: the client address comes from the socket unless a trusted proxy says so).
import type { IncomingHttpHeaders } from 'node:http';

/** Request fields only the edge may set; a visitor's copies would let them forge identity or origin. */
const EDGE_OWNED = ['x-forwarded-for', 'x-forwarded-proto', 'x-forwarded-host', 'x-forwarded-port', 'forwarded', 'x-real-ip'];

export interface ForwardFacts {
  clientIp: string;
  secure: boolean;
  host: string;
  /** Headers stages decided to add (claims, identity); their names are lower-case. */
  extra: Record<string, string>;
}

export function forwardedHeaders(headers: IncomingHttpHeaders, facts: ForwardFacts): IncomingHttpHeaders {
  const out: IncomingHttpHeaders = { ...headers };
  for (const name of EDGE_OWNED) delete out[name];
  for (const name of Object.keys(facts.extra)) delete out[name];
  out['x-forwarded-for'] = facts.clientIp;
  out['x-forwarded-proto'] = facts.secure ? 'https' : 'http';
  if (facts.host) out['x-forwarded-host'] = facts.host;
  for (const [name, value] of Object.entries(facts.extra)) out[name] = value;
  return out;
}
