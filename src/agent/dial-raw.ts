// The raw transport's dial: `GET /_edge/tunnel` with `Upgrade: edge-tunnel/2`, the hello and its answer as
// length-prefixed frames on the socket, then HTTP/2 on the socket itself (docs/tunnels.md "Transports").
import http from 'node:http';
import https from 'node:https';
import type { Socket } from 'node:net';
import { RAW_UPGRADE_TOKEN, asksForRawTunnel, encodeHandshakeFrame, openRawLink, readHandshakeFrame } from '../shared/tunnel/raw.ts';
import { MAX_REPLY_BYTES } from '../shared/tunnel/protocol.ts';
import { attempt, type DialContext, type Outcome, type Unsupported } from './handshake.ts';

/**
 * The raw transport: `GET /_edge/tunnel` with `Upgrade: edge-tunnel/2`, then one length-prefixed JSON frame each
 * way on the socket, then HTTP/2 on the socket itself. Resolves Unsupported when the upgrade gets any answer but
 * 101 `edge-tunnel/2`, or none once connected (a proxy that drops what it does not know), so auto falls back.
 */
export function dialRaw(ctx: DialContext): Promise<Outcome | Unsupported> {
  return attempt<Unsupported>((state, resolve) => {
    const url = ctx.o.url;
    const secure = url.protocol === 'wss:';
    const host = url.hostname.replace(/^\[(.*)\]$/, '$1');
    const retry = (reason: string) => state.finish({ reason, healthy: false, connected: false });
    let reached = false; // TCP (and TLS) up and the request sent: a silence now says something about the path
    let upgraded = false;
    const options: https.RequestOptions = {
      host,
      port: url.port || (secure ? 443 : 80),
      path: url.pathname,
      method: 'GET',
      agent: false,
      headers: { connection: 'Upgrade', upgrade: RAW_UPGRADE_TOKEN, 'user-agent': ctx.o.client },
      ...(secure ? (ctx.o.edgeTls ?? {}) : {}),
    };
    const req = (secure ? https : http).request(options);
    ctx.setAbort(() => req.destroy());
    const dialTimer = setTimeout(() => {
      if (reached) resolve({ unsupported: `no answer to the ${RAW_UPGRADE_TOKEN} upgrade within ${ctx.o.handshakeTimeoutMs} ms` });
      else retry(`could not connect within ${ctx.o.handshakeTimeoutMs} ms`);
      req.destroy();
    }, ctx.o.handshakeTimeoutMs);
    req.once('socket', (socket: Socket) => {
      socket.once(secure ? 'secureConnect' : 'connect', () => (reached = true));
    });
    req.on('error', (err) => {
      if (upgraded) return;
      clearTimeout(dialTimer);
      if (reached) resolve({ unsupported: `the connection closed without an answer to the ${RAW_UPGRADE_TOKEN} upgrade (${err.message})` });
      else retry(err.message);
    });
    req.once('response', (res) => {
      clearTimeout(dialTimer);
      res.resume();
      req.destroy();
      resolve({ unsupported: `answered HTTP ${res.statusCode} to the ${RAW_UPGRADE_TOKEN} upgrade`, status: res.statusCode });
    });
    req.once('upgrade', (res, socket: Socket, head: Buffer) => {
      clearTimeout(dialTimer);
      upgraded = true;
      if (!asksForRawTunnel(res.headers.upgrade)) {
        socket.destroy();
        return resolve({ unsupported: `answered 101 to ${JSON.stringify(res.headers.upgrade ?? '')} instead of ${RAW_UPGRADE_TOKEN}` });
      }
      ctx.setAbort(() => socket.destroy());
      socket.on('error', (err) => (state.lastError = err.message));
      socket.once('close', () => {
        clearTimeout(replyTimer);
        // After the welcome the HTTP/2 session's close decides; before it, no refusal frame came.
        if (!state.welcomed) retry(state.lastError || 'the connection closed before the welcome');
      });
      // HTTP/2 takes the socket only once this write is done (see the edge's TunnelServer: over TLS, a write
      // still queued completes into Node's HTTP/2 session, which aborts the process on a write it did not issue).
      let helloWritten = false;
      let afterHello: (() => void) | null = null;
      socket.write(encodeHandshakeFrame(JSON.stringify(ctx.hello('raw'))), () => {
        helloWritten = true;
        afterHello?.();
      });
      const replyTimer = setTimeout(() => {
        state.lastError = `no answer to the hello within ${ctx.o.handshakeTimeoutMs} ms`;
        stopReading();
        socket.destroy();
      }, ctx.o.handshakeTimeoutMs);
      const stopReading = readHandshakeFrame(socket, head, MAX_REPLY_BYTES, (result) => {
        clearTimeout(replyTimer);
        if (!result.ok) {
          state.lastError = `invalid answer from the edge: ${result.message}`;
          return void socket.destroy();
        }
        const reply = () => {
          if (socket.destroyed) return;
          ctx.onReply(state, result.frame, 'raw', () => {
            // The edge's HTTP/2 preface may have come in the same read as the welcome: back into the socket's
            // buffer, where Node's session reads it first.
            if (result.rest.length > 0) socket.unshift(result.rest);
            return openRawLink(socket);
          });
        };
        if (helloWritten) reply();
        else afterHello = reply;
      });
    });
    req.end();
  });
}
