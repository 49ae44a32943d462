// One endpoint (/console/endpoints/{uuid}/{tab}): its hostname and status over tabs that are links, each tab a URL
// of its own and a module of its own (./endpoint-<tab>.js), except `traffic`, the inspector (./inspector.js). Every
// tab reads and changes its part through the /v1 API; a refused change shows its reason next to the control.
import { html } from '../vendor/htm-preact.mjs';
import { Link } from '../router.js';
import { ErrorMessage, Loading, Tabs, useApi } from '../ui.js';
import { EndpointStatus, endpointApi, endpointPath } from './endpoint-common.js';
import { OverviewTab } from './endpoint-overview.js';
import { AuthTab } from './endpoint-auth.js';
import { RbacTab } from './endpoint-rbac.js';
import { RateLimitsTab } from './endpoint-rate-limits.js';
import { RoutingTab } from './endpoint-routing.js';
import { HealthTab } from './endpoint-health.js';
import { Inspector } from './inspector.js';

export const ENDPOINT_TABS = [
  ['overview', 'Overview'],
  ['auth', 'Visitor auth'],
  ['rbac', 'RBAC'],
  ['rate-limits', 'Rate limits'],
  ['routing', 'Routing'],
  ['health', 'Health'],
  ['traffic', 'Traffic'],
];

export function EndpointScreen({ id, tab, request, query, me }) {
  const current = tab ?? 'overview';
  const { data: endpoint, error, reload } = useApi(endpointApi(id));
  if (!ENDPOINT_TABS.some(([t]) => t === current)) {
    return html`<h1>No such section</h1>
      <p>This endpoint has no “${current}” section. <${Link} to=${endpointPath(id)}>Go to its overview</${Link}>.</p>`;
  }
  if (error && !endpoint) {
    return html`<h1>Endpoint</h1>
      <${ErrorMessage} error=${error} />
      <p><${Link} to="/endpoints">Back to the endpoints</${Link}></p>`;
  }
  if (!endpoint) return html`<${Loading} what="Loading the endpoint" />`;
  const props = { endpoint, reloadEndpoint: reload, me, query };
  let body;
  if (current === 'overview') body = html`<${OverviewTab} ...${props} />`;
  else if (current === 'auth') body = html`<${AuthTab} ...${props} />`;
  else if (current === 'rbac') body = html`<${RbacTab} ...${props} />`;
  else if (current === 'rate-limits') body = html`<${RateLimitsTab} ...${props} />`;
  else if (current === 'routing') body = html`<${RoutingTab} ...${props} />`;
  else if (current === 'health') body = html`<${HealthTab} ...${props} />`;
  else body = html`<${Inspector} endpoint=${endpoint} requestId=${request} query=${query} />`;
  return html`<article aria-labelledby="endpoint-heading">
    <p class="hint"><${Link} to="/endpoints">Endpoints</${Link}></p>
    <h1 id="endpoint-heading">${endpoint.hostname}</h1>
    <p class="toolbar"><${EndpointStatus} endpoint=${endpoint} /> <span>${endpoint.ephemeral ? 'ephemeral' : 'permanent'}</span></p>
    <${Tabs} base=${endpointPath(endpoint.uuid)} tabs=${ENDPOINT_TABS} current=${current} />
    ${body}
  </article>`;
}
