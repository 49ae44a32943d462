// The HTTPS enforcement stage: a plain-HTTP request to an endpoint with `enforce_https` is answered with a redirect
// to the same host, path and query on the edge's public HTTPS port, before any credential could cross in clear.
import { DEFAULT_STAGE_DEPS, type RequestContext, type Stage, type StageDeps, type StageFactory } from '../pipeline/stage.ts';
import { httpsLocation } from '../../shared/public-urls.ts';

export { httpsLocation };

/**
 * GET and HEAD get 301, which every client follows; any other method gets 308, which keeps the method and body
 * (RFC 9110 §15.4.9), so a POST is not silently turned into a GET. Both are cacheable: enforcement is permanent
 * in intent, and a browser that cached it stops sending clear-text requests at all.
 */
function statusFor(method: string): 301 | 308 {
  return method === 'GET' || method === 'HEAD' ? 301 : 308;
}


function compileRedirect(deps: StageDeps): Stage {
  return {
    name: 'https-redirect',
    run(ctx: RequestContext) {
      if (ctx.secure) return 'next';
      // The judged (normalised) path, as every later stage and the agent would have seen it.
      const location = httpsLocation(ctx.host, deps.publicHttpsPort(), ctx.query ? `${ctx.path}?${ctx.query}` : ctx.path);
      const { res } = ctx;
      const body = ctx.method === 'HEAD' ? '' : `Redirecting to ${location}\n`;
      // The visitor's request body is not read: closing after the answer keeps it from being parsed as a request.
      res.shouldKeepAlive = ctx.req.headers['content-length'] === undefined && ctx.req.headers['transfer-encoding'] === undefined;
      res.writeHead(statusFor(ctx.method), {
        location,
        'content-type': 'text/plain; charset=utf-8',
        'content-length': Buffer.byteLength(body),
        'cache-control': 'max-age=3600',
      });
      res.end(body);
      return 'done';
    },
  };
}

export const httpsRedirect: StageFactory = {
  id: 'https-redirect',
  healthProbe: 'skips',
  compile: (endpoint, deps = DEFAULT_STAGE_DEPS) => (endpoint.enforce_https ? compileRedirect(deps) : null),
};
