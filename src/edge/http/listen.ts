// Binding a listener and learning its port: every edge listener (public, ops, relay) binds the same way, and a
// bind error (EADDRINUSE, EACCES) rejects instead of being thrown from an 'error' event no one listens to.
import type { AddressInfo, Server } from 'node:net';

/** Binds `port` (0 picks a free one) on `host` and resolves with the bound port. */
export function listen(server: Server, port: number, host: string): Promise<number> {
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      server.off('error', reject);
      resolve((server.address() as AddressInfo).port);
    });
  });
}
