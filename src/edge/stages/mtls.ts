// The mTLS stage: for an endpoint with a client-certificate policy, reads what the TLS handshake verified on this
// connection (src/edge/tls.ts) and refuses the request (`required`) or hands the verdict to the agent (`optional`).
import { sendEdgeError } from '../http/pages.ts';
import type { RequestContext, Stage, StageFactory, Verdict } from '../pipeline/stage.ts';
import type { ErrorCode } from '../../shared/errors.ts';
import type { EndpointConfig } from '../../shared/snapshot.ts';
import { clientAuthKey, clientAuthOf } from '../tls.ts';

/**
 * The fields the agent or origin receives (src/shared/edge-headers.ts strips visitor copies in any spelling). Verify
 * is SUCCESS, FAILED or NONE, as nginx's $ssl_client_verify; subject and fingerprint are set only on SUCCESS.
 */
export const CLIENT_CERT_VERIFY = 'x-edge-client-cert-verify';
export const CLIENT_CERT_SUBJECT = 'x-edge-client-cert-subject';
export const CLIENT_CERT_FINGERPRINT = 'x-edge-client-cert-fingerprint';

function refuse(ctx: RequestContext, code: ErrorCode, detail?: string): Verdict {
  sendEdgeError(ctx.res, code, ctx.req.headers.accept, detail);
  return 'done';
}

function compileMtls(endpoint: EndpointConfig): Stage {
  const key = clientAuthKey(endpoint);
  const required = endpoint.mtls_mode === 'required';
  return {
    name: 'mtls',
    run(ctx) {
      if (!ctx.secure) {
        // No certificate crosses plain HTTP. Refused rather than redirected: the request already crossed in clear,
        // and the answer says what the endpoint needs.
        if (required) return refuse(ctx, 'client_certificate_required', 'this endpoint takes requests over HTTPS only, with a client certificate');
        ctx.upstreamHeaders[CLIENT_CERT_VERIFY] = 'NONE';
        return 'next';
      }
      const auth = clientAuthOf(ctx.req.socket);
      if (auth === undefined || auth.key !== key) {
        // The connection's TLS was set up for another name (SNI other than Host), for no name, or under this
        // endpoint's previous CA bundle: no certificate was asked for under this policy. RFC 9110 §15.5.20: 421
        // tells the client to retry on a new connection, whose handshake then asks.
        return refuse(ctx, 'misdirected_request', `open a new TLS connection with server name ${ctx.host}`);
      }
      if (auth.verify === 'SUCCESS') {
        ctx.upstreamHeaders[CLIENT_CERT_VERIFY] = 'SUCCESS';
        ctx.upstreamHeaders[CLIENT_CERT_SUBJECT] = auth.subject!;
        ctx.upstreamHeaders[CLIENT_CERT_FINGERPRINT] = auth.fingerprint!;
        return 'next';
      }
      if (required) {
        return auth.verify === 'NONE'
          ? refuse(ctx, 'client_certificate_required', 'no client certificate was presented')
          : refuse(ctx, 'client_certificate_invalid', `the certificate did not verify against this endpoint's CA bundle (${auth.reason})`);
      }
      ctx.upstreamHeaders[CLIENT_CERT_VERIFY] = auth.verify;
      return 'next';
    },
  };
}

export const mtls: StageFactory = {
  id: 'mtls',
  healthProbe: 'skips',
  failClosed: true,
  compile: (endpoint) => (endpoint.mtls_mode === 'disabled' ? null : compileMtls(endpoint)),
};
