// Deployments, as control, edge and agent all see them: the application config the feed carries (topic
// `application`), the order it holds, and the control channel's messages between an edge and a deploying agent.
import { Type, type Static } from '@sinclair/typebox';
import { Nullable, Uuid } from './schema.ts';
import { AGENT_ID_PATTERN, MAX_AGENT_ID_LENGTH } from './tunnel/protocol.ts';

/** The feed topic of applications; the key is the application's uuid. */
export const APPLICATION_TOPIC = 'application';

export const DEPLOYMENT_STATUSES = ['queued', 'building', 'deploying', 'live', 'failed', 'superseded', 'cancelled'] as const;
export type DeploymentStatus = (typeof DEPLOYMENT_STATUSES)[number];
/** A deployment in one of these is finished: nothing moves it again. */
export const FINISHED_STATUSES: ReadonlySet<DeploymentStatus> = new Set(['live', 'failed', 'superseded', 'cancelled']);

export const DEPLOYMENT_TRIGGERS = ['push', 'manual', 'rollback'] as const;
export type DeploymentTrigger = (typeof DEPLOYMENT_TRIGGERS)[number];

/** A git ref name as the agent passes it to `git fetch`: no leading dash (no option injection), no spaces or `..`. */
export const GIT_REF_PATTERN = '^(?!-)(?!.*\\.\\.)[A-Za-z0-9._/+@-]{1,255}$';
/** A full commit id: 40 hex digits (SHA-1) or 64 (SHA-256 repositories). */
export const COMMIT_SHA_PATTERN = '^([0-9a-f]{40}|[0-9a-f]{64})$';

/**
 * What the agent is to run now: the application's oldest unfinished deployment (the one running, else the next
 * queued). A different order (or none) while one runs means that one was cancelled: the agent stops it and keeps
 * the release it had serving.
 */
export const DeploymentOrderSchema = Type.Object(
  {
    deployment_id: Type.Integer({ minimum: 1 }),
    trigger: Type.Union(DEPLOYMENT_TRIGGERS.map((t) => Type.Literal(t))),
    /** The branch to fetch. */
    ref: Type.String({ pattern: GIT_REF_PATTERN }),
    /** The exact commit, when known (a push, a rollback, a manual deploy of a sha); null: the branch's head. */
    commit: Nullable(Type.String({ pattern: COMMIT_SHA_PATTERN })),
  },
  { additionalProperties: false },
);
export type DeploymentOrder = Static<typeof DeploymentOrderSchema>;

/** The application as the feed carries it to edges (and edges to its deploying agent). No secrets. */
export const ApplicationConfigSchema = Type.Object(
  {
    uuid: Uuid(),
    name: Type.String({ minLength: 1, maxLength: 100 }),
    account_id: Type.Integer({ minimum: 1 }),
    endpoint_uuid: Uuid(),
    source: Type.Union([Type.Literal('git'), Type.Literal('manual')]),
    /** For source git: what the agent's `git` fetches. Credentials are the agent machine's own (ssh keys, helpers). */
    repository_url: Nullable(Type.String({ minLength: 1, maxLength: 2048 })),
    build_command: Nullable(Type.String({ minLength: 1, maxLength: 4096 })),
    run_command: Type.String({ minLength: 1, maxLength: 4096 }),
    /** The path the agent polls on the new process until it answers 2xx. */
    health_path: Type.String({ minLength: 1, maxLength: 255, pattern: '^/' }),
    order: Nullable(DeploymentOrderSchema),
  },
  { additionalProperties: false },
);
export type ApplicationConfig = Static<typeof ApplicationConfigSchema>;

// --- the control channel: one HTTP/2 stream per deploying agent's tunnel, NDJSON both ways -----------------------

/** The path of the control stream the edge opens to an agent that declared an application in its hello. */
export const CONTROL_STREAM_PATH = '/_edge/control';
/** Longest control line either side accepts, in bytes: a log batch of 64 lines of 4 KiB fits. */
export const MAX_CONTROL_LINE_BYTES = 512 * 1024;
export const MAX_LOG_LINE_LENGTH = 4096;
export const MAX_LOG_LINES_PER_EVENT = 64;
export const MAX_REASON_LENGTH = 1024;

/** edge → agent: the application as it stands (sent at start and on every change of its feed entry). */
export const ApplicationMessageSchema = Type.Object(
  { type: Type.Literal('application'), application: ApplicationConfigSchema },
  { additionalProperties: false },
);
/** edge → agent: the control plane refused one of the agent's events for this deployment (cancelled, claimed by another agent, finished). */
export const RefusedEventMessageSchema = Type.Object(
  {
    type: Type.Literal('event_refused'),
    deployment_id: Type.Integer({ minimum: 1 }),
    code: Type.String({ minLength: 1, maxLength: 64 }),
    message: Type.String({ maxLength: MAX_REASON_LENGTH }),
  },
  { additionalProperties: false },
);
export const EdgeControlMessageSchema = Type.Union([ApplicationMessageSchema, RefusedEventMessageSchema]);
export type EdgeControlMessage = Static<typeof EdgeControlMessageSchema>;

/** Statuses an agent reports; `queued`, `superseded` are the control plane's alone. */
export const AGENT_REPORTED_STATUSES = ['building', 'deploying', 'live', 'failed', 'cancelled'] as const;

/** agent → edge → control: a deployment moved on. `commit` is the sha the agent resolved (from `building` on). */
export const StatusEventSchema = Type.Object(
  {
    type: Type.Literal('status'),
    deployment_id: Type.Integer({ minimum: 1 }),
    status: Type.Union(AGENT_REPORTED_STATUSES.map((s) => Type.Literal(s))),
    commit: Type.Optional(Type.String({ pattern: COMMIT_SHA_PATTERN })),
    reason: Type.Optional(Type.String({ maxLength: MAX_REASON_LENGTH })),
  },
  { additionalProperties: false },
);
/** agent → edge → control: lines of the build's and the deploy's output, in order. */
export const LogEventSchema = Type.Object(
  {
    type: Type.Literal('log'),
    deployment_id: Type.Integer({ minimum: 1 }),
    lines: Type.Array(Type.String({ maxLength: MAX_LOG_LINE_LENGTH }), { minItems: 1, maxItems: MAX_LOG_LINES_PER_EVENT }),
  },
  { additionalProperties: false },
);
/** agent → edge → control: the supervised live process (started, exited and restarting, given up). */
export const ProcessEventSchema = Type.Object(
  {
    type: Type.Literal('process'),
    state: Type.Union([Type.Literal('running'), Type.Literal('restarting'), Type.Literal('stopped')]),
    /** The deployment whose release runs, null when none was ever deployed by this agent. */
    deployment_id: Nullable(Type.Integer({ minimum: 1 })),
    restarts: Type.Integer({ minimum: 0 }),
    message: Type.Optional(Type.String({ maxLength: MAX_REASON_LENGTH })),
  },
  { additionalProperties: false },
);
export const AgentControlEventSchema = Type.Union([StatusEventSchema, LogEventSchema, ProcessEventSchema]);
export type AgentControlEvent = Static<typeof AgentControlEventSchema>;
export type StatusEvent = Static<typeof StatusEventSchema>;
export type LogEvent = Static<typeof LogEventSchema>;
export type ProcessEvent = Static<typeof ProcessEventSchema>;

/**
 * The control API's report route (POST /v1/applications/{uuid}/agent-events) takes a batch of these from an edge,
 * on behalf of the agent named by agent_id, authenticated with the agent's own API key.
 */
export const AgentEventsBodySchema = Type.Object(
  {
    agent_id: Type.String({ minLength: 1, maxLength: MAX_AGENT_ID_LENGTH, pattern: AGENT_ID_PATTERN }),
    events: Type.Array(AgentControlEventSchema, { minItems: 1, maxItems: 100 }),
  },
  { additionalProperties: false },
);
export type AgentEventsBody = Static<typeof AgentEventsBodySchema>;
/** Per event, in order: accepted, or refused with a code (deployment_cancelled, deployment_claimed, deployment_finished, not_found, invalid_transition). */
export const AgentEventsAnswerSchema = Type.Object(
  {
    results: Type.Array(
      Type.Object({ ok: Type.Boolean(), code: Type.Optional(Type.String()), message: Type.Optional(Type.String()) }, { additionalProperties: false }),
    ),
  },
  { additionalProperties: false },
);
export type AgentEventsAnswer = Static<typeof AgentEventsAnswerSchema>;

/**
 * The field that marks the edge's control stream. It is in the edge's own `X-Edge-*` name space, which the edge strips
 * from every visitor request (src/shared/edge-headers.ts), so a visitor's POST to CONTROL_STREAM_PATH on the
 * application's host reaches the application, never the agent's control handler.
 */
export const CONTROL_STREAM_HEADER = 'x-edge-control';
