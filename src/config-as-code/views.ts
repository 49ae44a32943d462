// The /v1 API's answers that diff, apply and export read, taken from src/shared/api/openapi.ts (generated from the
// served OpenAPI document): a field the API drops, renames or retypes fails the type-check where it is read.
import type { Operation, PathOf, SuccessBody } from '../shared/api/client.ts';

/** What the GET at `P` answers. */
type Answer<P extends PathOf<'get'>> = SuccessBody<Operation<P, 'get'>>;

export type EndpointView = Answer<'/v1/endpoints'>['items'][number];
/** A library certificate as GET /v1/certificates lists it: the file refers to it by name. */
export type CertificateView = Answer<'/v1/certificates'>['items'][number];
export type MtlsView = Answer<'/v1/endpoints/{id}/mtls'>;
export type HealthCheckView = Answer<'/v1/endpoints/{id}/health-check'>;
export type SettingsView = Answer<'/v1/endpoints/{id}/settings'>;
export type ProviderView = Answer<'/v1/endpoints/{id}/oauth/providers'>['items'][number];
export type RoleView = Answer<'/v1/endpoints/{id}/rbac/roles'>[number];
export type RateLimitView = Answer<'/v1/firewall/rate-limits'>['rules'][number];
export type RoutingRuleView = Answer<'/v1/endpoints/{id}/routing-rules'>['items'][number];
export type AlertView = Answer<'/v1/traffic/alerts'>['items'][number];
