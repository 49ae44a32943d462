// The traffic inspector API: recent errors (docs/api.md), captured exchanges page by page and one by one, their replay
// through an edge as a visitor's request, and per-endpoint metrics from the minute rollup. Reads only, account-scoped.
import { int64Param, type ControlApp, type ControlDeps } from '../http.ts';
import {
  LogDetail,
  detailView,
  LogParams,
  LogsQuery,
  LogsView,
  MetricsQuery,
  MetricsView,
  metricsView,
  RecentQuery,
  RecentView,
  ReplayQuery,
  ReplayView,
  replayView,
  summaryView,
} from '../schemas/traffic.ts';
import { DEFAULT_BUCKETS, MAX_METRICS_BUCKETS, trafficService } from '../services/traffic.ts';
import { ErrorBody, ErrorResponses, iso } from '../views.ts';

export function trafficRoutes(app: ControlApp, deps: ControlDeps): void {
  const traffic = trafficService(deps);

  app.get(
    '/v1/traffic/errors/recent',
    {
      config: { permission: 'traffic:read' },
      schema: {
        operationId: 'listRecentTrafficErrors',
        summary: 'Recent error responses of the active account, newest first',
        description:
          'Responses with status >= 400 within the last `hours`. Every parameter falls back to its default when out of range ' +
          'or not a number (docs/api.md): limit 1-100 (default 20), hours 1-720 (default 24); tier `4xx` or `5xx` (any case), ' +
          'anything else all errors. Needs traffic:read in the active account.',
        tags: ['traffic'],
        querystring: RecentQuery,
        response: { 200: RecentView, ...ErrorResponses },
      },
    },
    async (req) => {
      const { rows, hours } = await traffic.recentErrors(req.caller, req.query);
      return { errors: rows.map((r) => ({ ...r, created_at: iso(r.created_at) })), hours };
    },
  );

  app.get(
    '/v1/traffic/logs',
    {
      config: { permission: 'traffic:read' },
      schema: {
        operationId: 'listTrafficLogs',
        summary: 'Captured exchanges of the active account, newest first',
        description:
          'Rows without headers or bodies. Filters combine with AND. Cursor pagination: pass `next_cursor` as `cursor` for ' +
          'the next page; a page resumes right after the last row shown, so rows captured meanwhile never shift or repeat ' +
          'it. `next_cursor` is null on the last page. Needs traffic:read.',
        tags: ['traffic'],
        querystring: LogsQuery,
        response: { 200: LogsView, ...ErrorResponses },
      },
    },
    async (req) => {
      const { page, nextCursor } = await traffic.logs(req.caller, req.query);
      return { items: page.map(summaryView), next_cursor: nextCursor };
    },
  );

  app.get(
    '/v1/traffic/logs/:id',
    {
      config: { permission: 'traffic:read' },
      schema: {
        operationId: 'getTrafficLog',
        summary: 'One captured exchange',
        description:
          'With request and response headers and bodies when the endpoint captured at level `full` (bodies up to the capture ' +
          'limit, `truncated` when longer). Another account’s row is 404. Needs traffic:read.',
        tags: ['traffic'],
        params: LogParams,
        response: { 200: LogDetail, ...ErrorResponses },
      },
    },
    async (req) => detailView(await traffic.log(req.caller, int64Param(req.params.id))),
  );

  app.post(
    '/v1/traffic/logs/:id/replay',
    {
      // A replay also acts on the endpoint, so it needs endpoints:write beyond traffic:read.
      config: { permission: ['traffic:read', 'endpoints:write'] },
      schema: {
        operationId: 'replayTrafficLog',
        summary: 'Replay a captured request through the edge',
        description:
          'Sends the captured request again to an edge’s public listener with the endpoint’s hostname, as a visitor would, so ' +
          'it meets the endpoint as it is now (auth, RBAC, rate limits, routing, the current agent or origin). Only exchanges ' +
          'captured in full with their whole request body (409 replay_not_captured otherwise); methods other than GET and HEAD ' +
          'need `?force=true` (400 otherwise). Redacted headers are not re-sent. Answers the new status, headers and body ' +
          '(at most 1 MiB, `truncated` beyond). Needs traffic:read and endpoints:write. No body.',
        tags: ['traffic'],
        params: LogParams,
        querystring: ReplayQuery,
        response: { 200: ReplayView, ...ErrorResponses, 409: ErrorBody, 429: ErrorBody, 502: ErrorBody, 503: ErrorBody },
      },
    },
    async (req) => replayView(await traffic.replay(req.caller, req.params.id, req.query.force === 'true', req.log)),
  );

  app.get(
    '/v1/traffic/metrics',
    {
      config: { permission: 'traffic:read' },
      schema: {
        operationId: 'getTrafficMetrics',
        summary: 'Traffic per endpoint and time bucket',
        description:
          'From the per-minute rollup, which counts every exchange whether capture is on or off. Buckets are UTC-aligned and ' +
          `only those with traffic are listed. Defaults: bucket hour, to now, from ${DEFAULT_BUCKETS.minute} minutes / ` +
          `${DEFAULT_BUCKETS.hour} hours / ${DEFAULT_BUCKETS.day} days before to; at most ${MAX_METRICS_BUCKETS} buckets ` +
          'in the window (400 otherwise). Needs traffic:read.',
        tags: ['traffic'],
        querystring: MetricsQuery,
        response: { 200: MetricsView, ...ErrorResponses },
      },
    },
    async (req) => metricsView(await traffic.metrics(req.caller, req.query)),
  );
}
