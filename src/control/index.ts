// The control role: the /v1 management API on its own port, the source of truth's only writer.
// It never opens a data-plane socket; edges learn of its writes through the change feed.
import type { AddressInfo } from 'node:net';
import { createControlApp, type ControlApp, type ControlDeps } from './http.ts';
import { accountRoutes } from './routes/accounts.ts';
import { applicationRoutes } from './routes/applications.ts';
import { gitWebhookRoutes } from './routes/git-webhooks.ts';
import { adminRoutes } from './routes/admin.ts';
import { certificateRoutes } from './routes/certificates.ts';
import { domainRoutes } from './routes/domains.ts';
import { endpointApiKeyRoutes } from './routes/endpoint-api-keys.ts';
import { endpointOriginRoutes } from './routes/endpoint-origin.ts';
import { endpointRoutes } from './routes/endpoints.ts';
import { endpointSettingsRoutes } from './routes/endpoint-settings.ts';
import { healthRoutes } from './routes/health.ts';
import { oauthProviderRoutes } from './routes/oauth-providers.ts';
import { presenceRoutes } from './routes/presence.ts';
import { rateLimitRoutes } from './routes/rate-limits.ts';
import { rbacClientRoutes } from './routes/rbac-clients.ts';
import { rbacRegistrationRoutes } from './routes/rbac-registration.ts';
import { rbacRoleRoutes } from './routes/rbac-roles.ts';
import { routingRuleRoutes } from './routes/routing-rules.ts';
import { dedicatedIpRoutes } from './routes/dedicated-ips.ts';
import { trafficAlertRoutes } from './routes/traffic-alerts.ts';
import { trafficRoutes } from './routes/traffic.ts';
import { consoleRoutes } from './console.ts';

/** Every route module, in the order they are registered. Adding an API area is one entry here. */
const ROUTES = [accountRoutes, adminRoutes, endpointRoutes, domainRoutes, certificateRoutes, presenceRoutes, routingRuleRoutes, endpointOriginRoutes, endpointSettingsRoutes, endpointApiKeyRoutes, oauthProviderRoutes, rbacClientRoutes, rbacRegistrationRoutes, rbacRoleRoutes, rateLimitRoutes, trafficRoutes, healthRoutes, trafficAlertRoutes, dedicatedIpRoutes, applicationRoutes, gitWebhookRoutes, (app: ControlApp) => consoleRoutes(app)];

export interface ControlServer {
  app: ControlApp;
  port: number;
  close(): Promise<void>;
}

export function buildControlApp(deps: ControlDeps): ControlApp {
  const app = createControlApp(deps);
  // Registered as a plugin so it loads after @fastify/swagger, whose onRoute hook must see every route.
  app.register(async (scope: ControlApp) => {
    for (const routes of ROUTES) routes(scope, deps);
  });
  return app;
}

export async function startControl(deps: ControlDeps): Promise<ControlServer> {
  const app = buildControlApp(deps);
  await app.listen({ port: deps.config.controlPort, host: deps.config.bindHost });
  const port = (app.server.address() as AddressInfo).port;
  return { app, port, close: () => app.close() };
}
