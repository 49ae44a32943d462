// The agent-tunnel handshake: one `hello` text frame from the agent, one `welcome` or `refused` frame from the edge.
// Both sides validate every frame against these strict schemas; after the welcome only HTTP/2 bytes flow (docs/tunnels.md).
import { Type, type Static, type TObject } from '@sinclair/typebox';
import { Value, ValueErrorType } from '@sinclair/typebox/value';
import { MAX_API_KEY_LENGTH } from '../api-keys.ts';
import { Uuid } from '../schema.ts';

/**
 * The upgrade path on the edge's public HTTP listener. It is not taken from endpoints: the edge claims an upgrade
 * there only when it is an agent's (isAgentUpgrade in src/edge/tunnels/tunnel-server.ts, docs/tunnels.md "Where
 * agents connect"); an endpoint's own requests to it reach its service.
 */
export const TUNNEL_PATH = '/_edge/tunnel';
/**
 * The WebSocket subprotocol (RFC 6455 §1.9) a WebSocket agent offers: what makes its upgrade an agent's on any host,
 * where a plain WebSocket to TUNNEL_PATH on an endpoint's host belongs to the endpoint.
 */
export const TUNNEL_SUBPROTOCOL = 'edge-tunnel';
/**
 * User-Agent prefix of agents from before TUNNEL_SUBPROTOCOL (their default client string): their plain WebSocket
 * upgrades are still claimed on an endpoint's host for one release. Remove with that compatibility.
 */
export const LEGACY_AGENT_USER_AGENT = 'edge-agent ';
export const PROTOCOL_VERSION = 1;

/** Upper bound of a hello in bytes: 16 tags of 64 characters, a 256-character key and a client string fit easily. */
export const MAX_HELLO_BYTES = 8 * 1024;
/** Upper bound of a welcome or refused frame in bytes. */
export const MAX_REPLY_BYTES = 8 * 1024;
export const MAX_TAGS = 16;
export const MAX_TAG_LENGTH = 64;
export const MAX_AGENT_ID_LENGTH = 64;
export const MAX_CLIENT_LENGTH = 128;
export const MAX_REFUSAL_MESSAGE_LENGTH = 1024;

export const TUNNEL_PROTOCOLS = ['http', 'tcp', 'udp'] as const;
export type TunnelProtocol = (typeof TUNNEL_PROTOCOLS)[number];

/** Tags are compared case-insensitively; JSON Schema patterns have no flags, hence both cases spelled out. */
export const TAG_PATTERN = '^[A-Za-z0-9][A-Za-z0-9_.-]*$';
/** Agent ids end up in logs, presence keys and routing rules: printable, no spaces, no separators beyond these. */
export const AGENT_ID_PATTERN = '^[A-Za-z0-9][A-Za-z0-9_.:@-]*$';
/** A Host field value: visible ASCII, no spaces (RFC 9110 §7.2 is stricter; this keeps any header injection out). */
export const HOST_HEADER_PATTERN = '^[\\x21-\\x7e]+$';
/** A data connection id or key: 32 random bytes in base64url (43 characters). */
export const DATA_TOKEN_PATTERN = '^[A-Za-z0-9_-]{43}$';
/** Most data connections an edge ever grants one session (it may grant fewer). */
export const MAX_DATA_CONNECTIONS = 1024;

export const HelloSchema = Type.Object(
  {
    type: Type.Literal('hello'),
    version: Type.Integer({ minimum: 1, maximum: 1000 }),
    api_key: Type.String({ minLength: 1, maxLength: MAX_API_KEY_LENGTH }),
    endpoint: Type.Optional(Uuid()),
    protocol: Type.Union(TUNNEL_PROTOCOLS.map((p) => Type.Literal(p))),
    agent_id: Type.String({ minLength: 1, maxLength: MAX_AGENT_ID_LENGTH, pattern: AGENT_ID_PATTERN }),
    tags: Type.Array(Type.String({ minLength: 1, maxLength: MAX_TAG_LENGTH, pattern: TAG_PATTERN }), { maxItems: MAX_TAGS }),
    client: Type.String({ maxLength: MAX_CLIENT_LENGTH }),
    /**
     * The agent can serve HTTP requests on data connections (docs/tunnels.md "Data connections"): raw transport,
     * http protocol, a plain-HTTP local service. `host_header` is the Host its local service must see instead of the
     * visitor's (the agent's --host-header), which the edge then writes itself, since the agent no longer parses.
     */
    /**
     * A deploying agent (`edge agent deploy`) names its application: the edge then serves the application's endpoint
     * (`endpoint` may be omitted) and opens the control stream that carries its deployment orders (docs/deploy.md).
     */
    application: Type.Optional(Uuid()),
    data_connections: Type.Optional(
      Type.Object({ host_header: Type.Optional(Type.String({ minLength: 1, maxLength: 255, pattern: HOST_HEADER_PATTERN })) }, { additionalProperties: false }),
    ),
  },
  { additionalProperties: false },
);
export type Hello = Static<typeof HelloSchema>;

export const TunnelEndpointSchema = Type.Object(
  {
    uuid: Uuid(),
    hostname: Type.String({ minLength: 1, maxLength: 253 }),
    /**
     * The endpoint's public host name, a bare FQDN with no scheme (as the API's `public_url`, docs/api.md), not a URL:
     * an agent shows `https://<public_url>` for an HTTP endpoint. Named so on the wire since the first release.
     */
    public_url: Type.String({ minLength: 1, maxLength: 2048 }),
  },
  { additionalProperties: false },
);
export type TunnelEndpoint = Static<typeof TunnelEndpointSchema>;

export const WelcomeSchema = Type.Object(
  {
    type: Type.Literal('welcome'),
    endpoint: TunnelEndpointSchema,
    region: Type.String({ minLength: 1, maxLength: 64 }),
    node: Type.String({ minLength: 1, maxLength: 64 }),
    /**
     * Granted only to a hello that offered data connections, on the raw transport: the agent opens up to `max`
     * connections of its own naming `id` and proving `key`, and the edge sends HTTP/1.1 requests on them.
     */
    data_connections: Type.Optional(
      Type.Object(
        {
          id: Type.String({ pattern: DATA_TOKEN_PATTERN }),
          key: Type.String({ pattern: DATA_TOKEN_PATTERN }),
          max: Type.Integer({ minimum: 1, maximum: MAX_DATA_CONNECTIONS }),
        },
        { additionalProperties: false },
      ),
    ),
  },
  { additionalProperties: false },
);
export type Welcome = Static<typeof WelcomeSchema>;
export type DataConnectionGrant = NonNullable<Welcome['data_connections']>;

/**
 * Why an edge refuses an agent, with the WebSocket close code that follows the `refused` frame and whether the
 * agent should try again. Close codes are 4000 + the closest HTTP status, in the private-use range of RFC 6455
 * §7.4.2, so a code alone (as a proxy in the middle may leave) still tells the agent what happened. The same codes
 * end a live tunnel whose credentials lost their standing (revoked key, suspended account, permission removed),
 * carried by the edge's GOAWAY (see GoAwayReason).
 */
export const REFUSALS = {
  invalid_hello: { close: 4400, retry: false },
  unauthorized: { close: 4401, retry: false },
  forbidden: { close: 4403, retry: false },
  account_suspended: { close: 4403, retry: false },
  region_not_allowed: { close: 4403, retry: false },
  protocol_not_allowed: { close: 4403, retry: false },
  entitlement_required: { close: 4403, retry: false },
  /** The key's user lacks `tunnels:connect` in the key's account. */
  permission_denied: { close: 4403, retry: false },
  endpoint_not_found: { close: 4404, retry: false },
  /** The hello's application does not exist in the key's account (or was deleted while the agent served it). */
  application_not_found: { close: 4404, retry: false },
  handshake_timeout: { close: 4408, retry: true },
  /** Another connection with the same agent id took this one's place on the endpoint. */
  replaced: { close: 4409, retry: false },
  unsupported_version: { close: 4426, retry: false },
  too_many_agents: { close: 4429, retry: true },
  internal: { close: 4500, retry: true },
  unavailable: { close: 4503, retry: true },
  /** The edge is draining for a restart; another edge (or this one, restarted) will take the agent. */
  shutting_down: { close: 4503, retry: true },
} as const satisfies Record<string, { close: number; retry: boolean }>;
export type RefusalCode = keyof typeof REFUSALS;

/** Close code for a session that ended normally after the welcome (a GOAWAY was sent first). */
export const CLOSE_NORMAL = 1000;
/** Close code for a session whose keepalive pings went unanswered. */
export const CLOSE_PING_TIMEOUT = 4408;
/** Close code for a text frame after the welcome, or any other framing violation. */
export const CLOSE_PROTOCOL_ERROR = 4400;

export const RefusedSchema = Type.Object(
  {
    type: Type.Literal('refused'),
    // Any snake_case code is accepted so that an older agent still reports a code added later.
    code: Type.String({ minLength: 1, maxLength: 64, pattern: '^[a-z][a-z0-9_]*$' }),
    message: Type.String({ maxLength: MAX_REFUSAL_MESSAGE_LENGTH }),
  },
  { additionalProperties: false },
);
export type Refused = Static<typeof RefusedSchema>;

export type EdgeReply = Welcome | Refused;

export type Parsed<T> = { ok: true; value: T } | { ok: false; message: string };

/** Whether an agent should reconnect after this refusal code (unknown codes: no, a person has to look). */
export function isRetryableRefusal(code: string): boolean {
  return Object.hasOwn(REFUSALS, code) ? REFUSALS[code as RefusalCode].retry : false;
}

export function refusalCloseCode(code: RefusalCode): number {
  return REFUSALS[code].close;
}

/** The refusal code a close code stands for when no `refused` frame arrived (a proxy may drop it). */
export function refusalForCloseCode(closeCode: number): RefusalCode | null {
  for (const [code, r] of Object.entries(REFUSALS)) if (r.close === closeCode) return code as RefusalCode;
  return null;
}

function parseJson(data: string | Buffer, max: number): Parsed<unknown> {
  const bytes = typeof data === 'string' ? Buffer.byteLength(data) : data.length;
  if (bytes > max) return { ok: false, message: `frame of ${bytes} bytes exceeds the limit of ${max}` };
  try {
    return { ok: true, value: JSON.parse(typeof data === 'string' ? data : data.toString('utf8')) };
  } catch {
    return { ok: false, message: 'frame is not valid JSON' };
  }
}

function check<T extends TObject>(schema: T, value: unknown): Parsed<Static<T>> {
  const first = Value.Errors(schema, value).First();
  if (!first) return { ok: true, value: value as Static<T> };
  // Strict decoding: a field the protocol does not define is an error naming it, never silently dropped.
  if (first.type === ValueErrorType.ObjectAdditionalProperties) return { ok: false, message: `unknown field ${first.path}` };
  return { ok: false, message: `${first.path || '/'}: ${first.message}` };
}

/** Validates a hello frame; the edge answers a failure with `refused` code `invalid_hello` and the message. */
export function parseHello(data: string | Buffer): Parsed<Hello> {
  const json = parseJson(data, MAX_HELLO_BYTES);
  return json.ok ? check(HelloSchema, json.value) : json;
}

/** Validates the edge's answer to a hello. */
export function parseEdgeReply(data: string | Buffer): Parsed<EdgeReply> {
  const json = parseJson(data, MAX_REPLY_BYTES);
  if (!json.ok) return json;
  const type = (json.value as { type?: unknown } | null)?.type;
  if (type === 'welcome') return check(WelcomeSchema, json.value);
  if (type === 'refused') return check(RefusedSchema, json.value);
  return { ok: false, message: `unexpected frame type ${JSON.stringify(type) ?? 'undefined'}` };
}

/**
 * Why a side closes an established tunnel, carried as the opaque data of its HTTP/2 GOAWAY (RFC 9113 §6.8 allows
 * diagnostic data there). The WebSocket close that follows carries no meaning of its own after the welcome.
 */
export interface GoAwayReason {
  code: string;
  message: string;
}

const GoAwayReasonSchema = Type.Object(
  { code: RefusedSchema.properties.code, message: RefusedSchema.properties.message },
  { additionalProperties: false },
);

export function encodeGoAwayReason(reason: GoAwayReason): Buffer {
  return Buffer.from(JSON.stringify({ code: reason.code, message: reason.message.slice(0, MAX_REFUSAL_MESSAGE_LENGTH) }));
}

/** The reason in a GOAWAY's opaque data, or null when there is none or it is not ours. */
export function parseGoAwayReason(data: Buffer | undefined): GoAwayReason | null {
  if (!data || data.length === 0) return null;
  const json = parseJson(data, MAX_REPLY_BYTES);
  if (!json.ok) return null;
  const checked = check(GoAwayReasonSchema, json.value);
  return checked.ok ? checked.value : null;
}

/** Tags as the registry compares them: lower case, duplicates removed, order kept. */
export function normalizeTags(tags: readonly string[]): string[] {
  return [...new Set(tags.map((t) => t.toLowerCase()))];
}
