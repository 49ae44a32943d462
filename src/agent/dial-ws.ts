// The WebSocket transport's dial (the fallback for networks that pass only WebSockets): the hello and its answer as
// one text message each, then HTTP/2 in binary messages (docs/tunnels.md "HTTP/2 over the WebSocket").
import { WebSocket } from 'ws';
import { REFUSALS, TUNNEL_SUBPROTOCOL, refusalForCloseCode } from '../shared/tunnel/protocol.ts';
import { openTunnelStream } from '../shared/tunnel/transport.ts';
import { TunnelRefusedError, attempt, type DialContext, type Outcome } from './handshake.ts';

/** The WebSocket transport: one text frame each way, then HTTP/2 in binary messages (openTunnelStream). */
export function dialWebSocket(ctx: DialContext): Promise<Outcome> {
  return attempt<never>((state) => {
    const retry = (reason: string) => state.finish({ reason, healthy: false, connected: false });
    // The subprotocol marks the upgrade as an agent's on any host name (docs/tunnels.md "Where agents connect").
    const ws = new WebSocket(ctx.o.url, [TUNNEL_SUBPROTOCOL], ctx.o.wsOptions);
    ctx.setAbort(() => ws.terminate());
    let replyTimer: NodeJS.Timeout | undefined;

    ws.on('error', (err) => {
      state.lastError = err.message;
    });
    ws.once('unexpected-response', (req, res) => {
      const status = res.statusCode ?? 0;
      res.resume();
      req.destroy();
      // A 4xx to the upgrade means this URL is no tunnel endpoint (a wrong --edge): retrying cannot help.
      if (status >= 400 && status < 500 && status !== 408 && status !== 429) {
        state.finish({ fatal: new TunnelRefusedError('not_a_tunnel_endpoint', `${ctx.o.url.href} answered HTTP ${status} to the tunnel upgrade; check --edge`) });
      } else {
        retry(`the edge answered HTTP ${status} to the tunnel upgrade`);
      }
    });
    ws.once('open', () => {
      ws.send(JSON.stringify(ctx.hello('ws')));
      replyTimer = setTimeout(() => {
        state.lastError = `no answer to the hello within ${ctx.o.handshakeTimeoutMs} ms`;
        ws.terminate();
      }, ctx.o.handshakeTimeoutMs);
    });
    ws.once('message', (data, isBinary) => {
      clearTimeout(replyTimer);
      if (isBinary) {
        state.lastError = 'invalid answer from the edge: binary frame before the welcome';
        return void ws.terminate();
      }
      // Synchronously, inside this handler: the edge's HTTP/2 preface may be in the same read as the welcome.
      ctx.onReply(state, data as Buffer, 'ws', () =>
        openTunnelStream(ws, (problem) => {
          state.lastError = problem;
          ws.terminate();
        }),
      );
    });
    ws.once('close', (code) => {
      clearTimeout(replyTimer);
      if (state.welcomed) return; // the HTTP/2 session's close decides (openTunnelStream guarantees it comes)
      const refusal = refusalForCloseCode(code);
      if (refusal && !REFUSALS[refusal].retry) {
        state.finish({ fatal: new TunnelRefusedError(refusal, `the edge closed the connection with code ${code} (${refusal})`, code) });
      } else {
        retry(state.lastError || `the connection closed before the welcome (code ${code})`);
      }
    });
  });
}
