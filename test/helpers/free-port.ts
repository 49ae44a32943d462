// A TCP port on loopback that nothing listens on: bound to learn a free one, then closed again. For a dependency
// that is down (a Redis URL to nowhere) or a listener a test binds itself.
import net, { type AddressInfo } from 'node:net';

export async function freeTcpPort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address() as AddressInfo;
  await new Promise<void>((r) => server.close(() => r()));
  return port;
}
