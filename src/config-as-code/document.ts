// The configuration-as-code document (docs/config-as-code.md): its TypeBox schema, built from the very schemas the
// control API validates its bodies with, so the file format and the API cannot drift; schemas/edge-config.schema.json is generated from it.
import { Type, type Static, type TObject, type TProperties, type TSchema } from '@sinclair/typebox';
import { Strict } from '../shared/schema.ts';
import { BCRYPT_MAX_IMPORTED_COST, BCRYPT_MIN_COST, IMPORTABLE_BCRYPT_HASH_PATTERN } from '../shared/visitor-credentials.ts';
import { MAX_RESOURCE_TAGS, TAG_PATTERN } from '../control/schemas/tags.ts';
import { SetCapture, SetPorts } from '../control/schemas/endpoints.ts';
import { PutJwtSettings, PutSettings, PutWebhookSettings } from '../control/schemas/endpoint-settings.ts';
import { CreateProvider } from '../control/schemas/oauth-providers.ts';
import { RoleBodySchema } from '../control/schemas/rbac-roles.ts';
import { CreateBody as RateLimitCreateBody } from '../control/schemas/rate-limits.ts';
import { RuleBodySchema as RoutingRuleBody } from '../control/schemas/routing-rules.ts';
import { RuleBody as AlertRuleBody } from '../control/schemas/traffic-alerts.ts';

export const DOCUMENT_VERSION = 1;
/** A `${NAME}` reference to an environment variable, resolved by the loader after validation. */
export const ENV_REFERENCE = /^\$\{([A-Za-z_][A-Za-z0-9_]*)\}$/;

/** The properties of an API body schema without `drop`, so a file entry keyed by name does not repeat it. */
function without<T extends TProperties, K extends keyof T & string>(schema: TObject<T>, ...drop: K[]): Omit<T, K> {
  return Object.fromEntries(Object.entries(schema.properties).filter(([k]) => !(drop as string[]).includes(k))) as Omit<T, K>;
}

/** A map keyed by a resource's name: YAML's mapping keys are unique (the loader refuses a duplicate). */
const Named = <T extends TSchema>(value: T, description: string) =>
  Type.Record(Type.String({ minLength: 1, maxLength: 100 }), value, { description });

const Tags = Type.Array(Type.String({ pattern: TAG_PATTERN }), {
  maxItems: MAX_RESOURCE_TAGS,
  uniqueItems: true,
  description: 'Labels for `--select-tag`: an apply with --select-tag T manages only resources carrying T',
});

const Secret = (description: string) =>
  Type.String({ minLength: 1, maxLength: 4096, description: `${description}. Write \`\${ENV_NAME}\` to take it from the environment; export never writes one` });

const settings = PutSettings.body.properties;

const BasicUser = Strict(
  {
    username: settings.basic_users.anyOf[0].items.properties.username,
    password: Type.Optional(Secret('The password, sent once and stored by the API as a bcrypt hash')),
    password_hash: Type.Optional(Type.String({ pattern: IMPORTABLE_BCRYPT_HASH_PATTERN, description: `A bcrypt hash ($2a$/$2b$/$2y$, cost ${BCRYPT_MIN_COST}-${BCRYPT_MAX_IMPORTED_COST}), as export writes it` })),
  },
  { description: 'Exactly one of password and password_hash' },
);

const Jwt = Strict(
  {
    ...without(PutJwtSettings.body, 'enabled', 'claim_headers'),
    claim_headers: Type.Optional(Type.Record(Type.String(), Type.String(), { description: 'Claim name → header name' })),
  },
  { description: 'The JWT layer, checked after the mode; omitted or null: off' },
);

const Webhook = Strict(
  {
    ...without(PutWebhookSettings.body, 'enabled', 'secret'),
    secret: Secret('The HMAC secret'),
  },
  { description: 'Inbound webhook signature verification; omitted or null: off' },
);

const Auth = Strict(
  {
    mode: Type.Union(['none', 'basic', 'oauth', 'oidc'].map((m) => Type.Literal(m)), {
      description: 'none, basic, oauth or oidc (token mode is not expressible: docs/config-as-code.md)',
    }),
    enforce_https: Type.Optional(Type.Boolean()),
    session_ttl_seconds: Type.Optional(settings.session_ttl_seconds.anyOf[0]),
    realm: Type.Optional(Type.String({ maxLength: 200, description: 'mode basic: the realm shown by browsers' })),
    allowed_redirects: Type.Optional(Type.Array(Type.String(), { description: 'mode oauth/oidc: extra return_to targets' })),
    scopes: Type.Optional(Type.Array(Type.String(), { description: 'mode oauth/oidc: scopes asked of every provider' })),
    enabled_providers: Type.Optional(
      Type.Array(Type.String(), { description: 'mode oauth/oidc: names (keys of oauth_providers) offered on the login page; omitted: every enabled one' }),
    ),
    basic_users: Type.Optional(Type.Array(BasicUser, { maxItems: settings.basic_users.anyOf[0].maxItems, description: 'mode basic: the whole set of users' })),
    jwt: Type.Optional(Type.Union([Jwt, Type.Null()])),
    webhook: Type.Optional(Type.Union([Webhook, Type.Null()])),
  },
  { description: 'Visitor authentication (PUT /v1/endpoints/{id}/settings, …/jwt, …/webhook)' },
);

const OAuthProvider = Strict(
  {
    ...without(CreateProvider.body, 'name', 'client_secret'),
    client_secret: Secret('The client secret'),
    enabled: Type.Optional(Type.Boolean({ description: 'Default true' })),
  },
  { description: 'An OAuth/OIDC provider, keyed by its name' },
);

const RbacRole = Strict(without(RoleBodySchema, 'name'), { description: 'An RBAC role, keyed by its name' });

const RateLimit = Strict(
  { ...without(RateLimitCreateBody, 'name', 'endpoint_id', 'source_ip'), tags: Type.Optional(Tags) },
  { description: 'A rate-limit rule, keyed by its name' },
);

const RoutingRule = Strict(
  {
    ...without(RoutingRuleBody, 'name', 'target_agent_tags'),
    target_agent_tags: Type.Optional(Type.Array(Type.String({ minLength: 1, maxLength: 64 }), { description: 'The agent must carry every tag' })),
    tags: Type.Optional(Tags),
  },
  { description: 'A routing rule, keyed by its name' },
);

const alertChannel = AlertRuleBody.properties.channels.items;
const AlertChannel = Strict(
  { ...without(alertChannel, 'secret'), secret: Type.Optional(Secret('webhook: signs deliveries (X-Edge-Signature)')) },
  { description: alertChannel.description },
);
const Alert = Strict(
  {
    ...without(AlertRuleBody, 'name', 'endpoint_id', 'channels'),
    channels: Type.Array(AlertChannel, { minItems: 1, maxItems: AlertRuleBody.properties.channels.maxItems }),
    tags: Type.Optional(Tags),
  },
  { description: 'An alert rule, keyed by its name' },
);

const Endpoint = Strict(
  {
    tags: Type.Optional(Tags),
    origin_url: Type.Optional(Type.Union([Type.String({ minLength: 1, maxLength: 2048 }), Type.Null()], { description: 'Forward to this origin instead of agents; null: agents' })),
    capture: Type.Optional(
      Strict({
        enabled: Type.Boolean(),
        level: Type.Optional(Type.Union([Type.Literal('full'), Type.Literal('metadata'), Type.Null()], { description: SetCapture.body.properties.capture_level.description })),
      }),
    ),
    ports: Type.Optional(
      Strict(
        { tcp: SetPorts.body.properties.dedicated_tcp_port, udp: SetPorts.body.properties.dedicated_udp_port },
        { description: 'Dedicated TCP/UDP ports; null or omitted: none' },
      ),
    ),
    mtls: Type.Optional(
      Strict({
        mode: Type.Union([Type.Literal('disabled'), Type.Literal('optional'), Type.Literal('required')]),
        ca_bundle_pem: Type.Optional(Type.String({ minLength: 1, maxLength: 262144, description: 'PEM CA certificates (modes optional, required)' })),
        ca_sha256: Type.Optional(
          Type.Array(Type.String({ pattern: '^[0-9a-f]{64}$' }), {
            description: 'The SHA-256 fingerprints of the trusted CAs, as export writes them (the API never returns the PEM): unchanged when they match',
          }),
        ),
      }),
    ),
    health_check: Type.Optional(
      Strict({
        enabled: Type.Boolean(),
        path: Type.Optional(Type.String({ minLength: 1, maxLength: 1024, pattern: '^/' })),
        interval_seconds: Type.Optional(Type.Integer({ minimum: 1 })),
      }),
    ),
    auth: Type.Optional(Auth),
    certificate: Type.Optional(
      Type.Union([Type.String({ minLength: 1, maxLength: 100 }), Type.Null()], {
        description:
          'The library certificate served, by its name as GET /v1/certificates lists it (uploaded outside the file); null: the platform certificate; omitted: left as it is',
      }),
    ),
    oauth_providers: Type.Optional(Named(OAuthProvider, 'OAuth/OIDC providers by name')),
    rbac_roles: Type.Optional(Named(RbacRole, 'RBAC roles by name')),
    rate_limits: Type.Optional(Named(RateLimit, 'Rate-limit rules by name')),
    routing_rules: Type.Optional(Named(RoutingRule, 'Routing rules by name')),
    alerts: Type.Optional(Named(Alert, 'Alert rules on this endpoint, by name')),
  },
  { description: 'An endpoint; omitted groups are left as they are, rules it does not name are deleted only with --prune' },
);

export const DocumentSchema = Strict(
  {
    $schema: Type.Optional(Type.String()),
    version: Type.Literal(DOCUMENT_VERSION),
    domains: Type.Optional(Type.Array(Type.String({ minLength: 1, maxLength: 253 }), { uniqueItems: true, description: 'Custom domains the account claims' })),
    endpoints: Type.Optional(
      Type.Record(Type.String({ minLength: 1, maxLength: 253 }), Endpoint, {
        description: 'By hostname (`name.<platform domain>` or a name on a custom domain); a bare label means the platform domain',
      }),
    ),
    alerts: Type.Optional(Named(Alert, 'Alert rules over all endpoints of the account, by name')),
  },
  { title: 'edge configuration', description: 'An account’s endpoints and rules, for `edge diff`, `edge apply` and `edge export`' },
);

export type Document = Static<typeof DocumentSchema>;
export type EndpointDoc = Static<typeof Endpoint>;
export type AuthDoc = Static<typeof Auth>;
export type BasicUserDoc = Static<typeof BasicUser>;
export type ProviderDoc = Static<typeof OAuthProvider>;
export type RoleDoc = Static<typeof RbacRole>;
export type RateLimitDoc = Static<typeof RateLimit>;
export type RoutingRuleDoc = Static<typeof RoutingRule>;
export type AlertDoc = Static<typeof Alert>;
