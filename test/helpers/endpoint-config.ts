// One endpoint's config as a snapshot carries it, with every field at its plain default, for tests and benches that
// hand an endpoint to the edge without the control API; no test-runner imports, so bench/ may import it too.
import type { EndpointConfig } from '../../src/shared/snapshot.ts';

/**
 * An active endpoint forwarding to agents, with visitor auth, mTLS, capture, HTTPS enforcement and routing rules off;
 * `over` names what a caller needs (its uuid and hostname, most often).
 */
export function endpointConfig(over: Partial<EndpointConfig> = {}): EndpointConfig {
  return {
    id: 1,
    uuid: '0b7d4c8e-2a61-4f3b-9f0e-6d1c2b3a4e5f',
    user_id: 1,
    account_id: 1,
    hostname: 'app.edge.test',
    status: 'active',
    ephemeral: false,
    dedicated_tcp_port: null,
    dedicated_udp_port: null,
    certificate_id: null,
    mtls_mode: 'disabled',
    mtls_ca_pem: null,
    capture_enabled: false,
    capture_level: null,
    enforce_https: false,
    paused: false,
    origin_url: null,
    routing_rules: [],
    ...over,
  };
}
