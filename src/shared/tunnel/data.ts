// Data connections: extra TCP (or TLS) connections an agent opens beside its raw tunnel, on which the edge sends plain
// HTTP/1.1 requests and the agent splices the bytes to its local service without parsing them (docs/tunnels.md).
import { hasUpgradeToken } from './raw.ts';

/** The Upgrade token (RFC 9110 §7.8) that turns a connection to the tunnel path into a data connection. */
export const DATA_UPGRADE_TOKEN = 'edge-tunnel-data/1';

/** Request fields of the data connection upgrade: the session's grant id, and the key that proves the agent holds it. */
export const DATA_ID_HEADER = 'edge-tunnel-data-id';
export const DATA_KEY_HEADER = 'edge-tunnel-data-key';

/** Whether an Upgrade field value names a data connection (tokens compare case-insensitively). */
export function asksForDataConnection(upgrade: string | undefined): boolean {
  return hasUpgradeToken(upgrade, DATA_UPGRADE_TOKEN);
}
