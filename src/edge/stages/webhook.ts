// Inbound webhook verification (`webhook`), as ngrok's verify-webhook: the HMAC of the raw body under the endpoint's
// shared secret must equal the signature header's value (after its prefix), or the request is refused before anything
// is forwarded. The body is read whole (bounded) to be checked, then forwarded from memory with its length.
import { createHmac, timingSafeEqual } from 'node:crypto';
import type { EndpointConfig, WebhookVerificationConfig } from '../../shared/snapshot.ts';
import { BodyTooLarge, isUpgradeRequest, readRequestBody } from '../http/body.ts';
import { sendEdgeError } from '../http/pages.ts';
import type { AuthOutcome } from '../metrics.ts';
import { DEFAULT_STAGE_DEPS, type RequestContext, type Stage, type StageDeps, type StageFactory, type Verdict } from '../pipeline/stage.ts';

/** The largest body verified (and so held in memory) per request: webhook payloads are JSON documents of KiBs. */
export const MAX_WEBHOOK_BODY_BYTES = 1024 * 1024;

const DIGEST_BYTES = { sha256: 32, sha1: 20 } as const;

function compileWebhook(endpoint: EndpointConfig, config: WebhookVerificationConfig, deps: StageDeps): Stage {
  if (deps.secrets === undefined) throw new Error('webhook verification needs the edge secret key (EDGE_SECRET_KEY) to open its secret');
  // Throws for a secret sealed under another key: the config then fails to compile and the previous one stays.
  const secret = Buffer.from(deps.secrets.open(config.secret_sealed), 'utf8');
  const { algo, prefix } = config;
  const name = config.header.toLowerCase();
  const hexLength = DIGEST_BYTES[algo] * 2;
  const uuid = endpoint.uuid;
  const count = (outcome: AuthOutcome) => deps.authOutcome?.(uuid, 'webhook', outcome);

  const refuse = (ctx: RequestContext, outcome: AuthOutcome, detail: string): 'done' => {
    count(outcome);
    // The body was not (or not wholly) read: the connection cannot carry another request after this answer.
    if (!ctx.req.complete) ctx.res.shouldKeepAlive = false;
    sendEdgeError(ctx.res, 'invalid_signature', ctx.req.headers.accept, detail);
    return 'done';
  };

  return {
    name: 'webhook',
    run(ctx): Verdict | Promise<Verdict> {
      const value = ctx.req.headers[name];
      if (typeof value !== 'string') return refuse(ctx, 'missing', `the ${config.header} header is missing`);
      const hex = value.startsWith(prefix) ? value.slice(prefix.length).trim() : '';
      if (hex.length !== hexLength || !/^[0-9a-fA-F]+$/.test(hex)) {
        return refuse(ctx, 'invalid', `the ${config.header} header is not ${prefix ? `"${prefix}" and ` : ''}a hex ${algo} HMAC`);
      }
      const given = Buffer.from(hex, 'hex');
      return readRequestBody(ctx.req, { maxBytes: MAX_WEBHOOK_BODY_BYTES }).then(
        (body) => {
          const mac = createHmac(algo, secret).update(body).digest();
          if (!timingSafeEqual(mac, given)) return refuse(ctx, 'invalid', `the ${config.header} signature does not match the body`);
          count('ok');
          // An upgrade has no body to forward (its bytes after the head are the new protocol's).
          if (!isUpgradeRequest(ctx.req)) ctx.body = body;
          return 'next';
        },
        (err: unknown) => {
          if (err instanceof BodyTooLarge) {
            count('invalid');
            ctx.res.shouldKeepAlive = false;
            sendEdgeError(ctx.res, 'body_too_large', ctx.req.headers.accept, `webhook bodies are verified up to ${MAX_WEBHOOK_BODY_BYTES} bytes`);
          } else ctx.res.destroy();
          return 'done';
        },
      );
    },
  };
}

export const webhook: StageFactory = {
  id: 'webhook',
  healthProbe: 'skips',
  failClosed: true,
  compile: (endpoint, deps = DEFAULT_STAGE_DEPS) => (endpoint.webhook ? compileWebhook(endpoint, endpoint.webhook, deps) : null),
};
