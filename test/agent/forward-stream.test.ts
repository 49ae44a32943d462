// The agent's CONNECT stream forwarding (TCP tunnels and WebSocket upgrades), driven by a stand-in for the edge's
// stream so that frames can be ordered exactly: what the local socket does when the edge ends and then resets.
import { describe, it } from 'node:test';
import { once } from 'node:events';
import { constants as h2, type IncomingHttpHeaders, type ServerHttp2Stream } from 'node:http2';
import net from 'node:net';
import { PassThrough } from 'node:stream';
import { pino } from 'pino';
import { createStreamForwarder } from '../../src/agent/forward-stream.ts';
import { eventually } from '../helpers/eventually.ts';

/** What of a ServerHttp2Stream the forwarder uses: a duplex that is answered, closed and reset. */
class FakeStream extends PassThrough {
  rstCode: number = h2.NGHTTP2_NO_ERROR;
  headersSent = false;
  respond(): void {
    this.headersSent = true;
    this.emit('responded');
  }
  close(): void {
    this.destroy();
  }
}

const openSockets = () => process.getActiveResourcesInfo().filter((r) => r === 'TCPSocketWrap').length;

describe('agent CONNECT streams', () => {
  it('END_STREAM followed at once by a reset closes the local socket (a reset refused during a pending FIN leaked it)', async () => {
    const accepted: net.Socket[] = [];
    const local = net.createServer((s) => accepted.push(s.on('error', () => {})));
    local.listen(0, '127.0.0.1');
    await once(local, 'listening');
    const port = (local.address() as net.AddressInfo).port;
    const baseline = openSockets();

    const forward = createStreamForwarder({ target: { protocol: 'tcp', host: '127.0.0.1', port, tls: false, display: `tcp://127.0.0.1:${port}` }, logger: pino({ level: 'silent' }) });
    const stream = new FakeStream();
    forward(stream as unknown as ServerHttp2Stream, {} as IncomingHttpHeaders);
    await once(stream, 'responded');
    // The edge ended its side (END_STREAM: the agent half-closes the local socket, a FIN queued in libuv) and reset
    // the stream in the same read: the agent sees 'end', then 'close' with a reset code, before the FIN goes out.
    stream.once('end', () => {
      stream.rstCode = h2.NGHTTP2_CANCEL;
      stream.destroy();
    });
    stream.end();

    // Both ends of the local connection close: the service's, and the agent's own (with the leak, the agent's
    // socket stayed open for good and the process spun at exit waiting for it).
    await eventually(async () => (accepted.length === 1 && accepted[0].destroyed && openSockets() <= baseline ? true : undefined), 5_000);
    local.close();
  });
});
