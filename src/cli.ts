// The `edge` command: `serve` runs the node, `admin` bootstraps users and keys directly against the store.
// Configuration errors exit with status 2 and one line naming the bad setting.
import { resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { ConfigError, loadConfig, type Config } from './shared/config.ts';
import { createLogger } from './shared/log.ts';
import { agentConsole, LOG_FORMATS, type LogFormat } from './agent/console.ts';
import type { Welcome } from './shared/tunnel/protocol.ts';
import type { Agent, ReconnectInfo } from './agent/agent.ts';
import type { HaAgent } from './agent/ha.ts';
import { generateApiKey } from './shared/api-keys.ts';
import { isUuid } from './shared/schema.ts';
import { openDatabase } from './store/db.ts';
import * as accounts from './store/accounts.ts';
import { bootstrapAdmin } from './control/bootstrap.ts';
import { startNode } from './main.ts';

const HELP = `Usage: edge <command> [options]

Commands:
  serve [--role all|control|edge|worker]   Run the node (default role: EDGE_ROLE or all)
  agent <http|tcp|udp> <port|url>          Expose a local service through the edge
  agent deploy <application-uuid> --dir D  Serve an application and run its deployments on this machine
  agent start --config FILE (NAME...|--all)  Run several tunnels from an agent file (docs/agent-config.md)
  agent config check FILE                  Check an agent file: one line per tunnel, or every mistake located
  admin <subcommand>                       Operate on the store directly (no running server needed)
  cluster [--edges N]                      Start control, worker and N edges as local processes (development, tests)
  diff | apply | export                    Configuration as code over the /v1 API (edge diff --help)
  help                                     Show this text

Run "edge <command> --help" for a command's options. Configuration: environment variables (see README).`;

const ADMIN_HELP = `Usage: edge admin <subcommand> [options]

Subcommands:
  bootstrap                                   Ensure the admin user exists; prints a generated key if the store is empty
  create-user --email E --plan P [--admin]    Create a user and print their first API key (JSON)
  set-plan --email E --plan P                 Change a user's plan
  suspend --email E | unsuspend --email E     Suspend or reinstate a user's personal account
  create-key --email E [--name N]             Issue another API key for a user (printed once)
  verify --email E [--email-verified] [--payment-method] [--identity-verified]
                                              Set a user's verification flags`;

function config(): Config {
  try {
    return loadConfig();
  } catch (err) {
    if (err instanceof ConfigError) {
      process.stderr.write(`edge: configuration error: ${err.message}\n`);
      process.exit(2);
    }
    throw err;
  }
}

async function serve(args: string[]): Promise<void> {
  const { values } = parseArgs({ args, options: { role: { type: 'string' }, help: { type: 'boolean', short: 'h' } } });
  if (values.help) return void process.stdout.write('Usage: edge serve [--role all|control|edge|worker]\n');
  if (values.role) process.env.EDGE_ROLE = values.role;
  const cfg = config();
  const logger = createLogger(cfg.logLevel, { role: cfg.role, node: cfg.nodeId, region: cfg.region });
  const node = await startNode(cfg, logger);
  if (node.generatedAdminKey) {
    process.stdout.write(`\nAdmin API key (shown once, store it now): ${node.generatedAdminKey}\n\n`);
  }
  logger.info({ control: node.control?.port, http: node.edge?.httpPort, https: node.edge?.httpsPort, ops: node.edge?.opsPort, worker_ops: node.workerOpsPort, relay: node.edge?.relayPort, dns: node.dns?.server.port }, 'node ready');
  let stopping = false;
  const stop = async (signal: string) => {
    if (stopping) return;
    stopping = true;
    logger.info({ signal }, 'shutting down');
    // A drain that hangs must not keep the process alive forever.
    setTimeout(() => process.exit(1), 15_000).unref();
    await node.close();
    process.exit(0);
  };
  process.on('SIGTERM', () => void stop('SIGTERM'));
  process.on('SIGINT', () => void stop('SIGINT'));
}

async function admin(args: string[]): Promise<void> {
  const [sub, ...rest] = args;
  const { values } = parseArgs({
    args: rest,
    options: {
      email: { type: 'string' },
      plan: { type: 'string' },
      name: { type: 'string' },
      admin: { type: 'boolean' },
      'email-verified': { type: 'boolean' },
      'payment-method': { type: 'boolean' },
      'identity-verified': { type: 'boolean' },
      help: { type: 'boolean', short: 'h' },
    },
  });
  if (!sub || values.help || sub === 'help') return void process.stdout.write(ADMIN_HELP + '\n');
  const cfg = config();
  const db = await openDatabase({ url: cfg.databaseUrl, dataDir: `${cfg.dataDir}/pglite`, schema: cfg.databaseSchema });
  const out = (v: unknown) => process.stdout.write(JSON.stringify(v, null, 2) + '\n');
  const need = (name: 'email' | 'plan'): string => {
    const v = values[name];
    if (!v) throw new UsageError(`--${name} is required`);
    if (name === 'plan' && !cfg.plans[v]) throw new UsageError(`unknown plan "${v}" (configured: ${Object.keys(cfg.plans).join(', ')})`);
    return v;
  };
  const user = async () => {
    const u = await accounts.findUserByEmail(db, need('email'));
    if (!u) throw new UsageError(`no user with e-mail ${values.email}`);
    return u;
  };
  try {
    switch (sub) {
      case 'bootstrap': {
        const res = await bootstrapAdmin(db, cfg);
        out({ admin_user_id: res?.adminUserId ?? null, api_key: res?.generatedKey ?? null });
        break;
      }
      case 'create-user': {
        const key = generateApiKey();
        const { user: u, account } = await db.transaction((tx) =>
          accounts.createUserWithKey(tx, { email: need('email'), plan: need('plan'), isAdmin: values.admin, key }),
        );
        out({ id: u.id, email: u.email, plan: account.plan, account_id: account.id, api_key: key.key });
        break;
      }
      case 'set-plan': {
        const u = await user();
        const account = await db.transaction((tx) => accounts.setAccountPlan(tx, u.personal_account_id, need('plan')));
        out({ id: u.id, email: u.email, plan: account?.plan });
        break;
      }
      case 'suspend':
      case 'unsuspend': {
        const u = await user();
        const account = await db.transaction((tx) => accounts.setAccountSuspended(tx, u.personal_account_id, sub === 'suspend'));
        out({ id: u.id, account_id: account?.id, suspended: account?.suspended_at !== null });
        break;
      }
      case 'create-key': {
        const u = await user();
        const key = generateApiKey();
        const row = await db.transaction((tx) => accounts.insertApiKey(tx, { userId: u.id, accountId: u.personal_account_id, name: values.name ?? '', key }));
        out({ id: row.id, user_id: u.id, api_key: key.key });
        break;
      }
      case 'verify': {
        const u = await user();
        const row = await db.transaction((tx) =>
          accounts.setVerification(tx, u.id, {
            email_verified: values['email-verified'],
            payment_method: values['payment-method'],
            identity_verified: values['identity-verified'],
          }),
        );
        out({ id: row?.id, email_verified: row?.email_verified, payment_method: row?.payment_method, identity_verified: row?.identity_verified });
        break;
      }
      default:
        throw new UsageError(`unknown admin subcommand "${sub}"\n\n${ADMIN_HELP}`);
    }
  } finally {
    await db.close();
  }
}

const AGENT_HELP = `Usage: edge agent <http|tcp|udp> <port|host:port|url> [options]
       edge agent start --config FILE (NAME...|--all)   several tunnels from one file (edge agent start --help)

Options:
  --edge URL         The edge's public base URL (default EDGE_URL or http://127.0.0.1:8080)
  --edges LIST       Several edges: URLs separated by commas, or one http:// URL (or host:port) whose DNS name
                     has an A/AAAA record per edge (default EDGE_EDGES); the agent keeps a tunnel to several
  --ha-connections N Tunnels to keep with --edges, each on a different edge (1-8, default 2)
  --api-key KEY      API key (default EDGE_API_KEY)
  --endpoint UUID    Serve this endpoint; without it the edge creates an ephemeral one (one-shot)
  --id ID            Agent id, stable across reconnects (default: hostname + random)
  --tags a,b         Tags routing rules can select this agent by
  --host-header H    Fixed Host header for the local service
  --transport T      auto (default), raw or ws (default EDGE_TRANSPORT): raw runs HTTP/2 on the connection
                     after an edge-tunnel/2 upgrade; ws carries it in WebSocket messages, for proxies that pass
                     only WebSockets; auto tries raw and falls back to ws
  --data-connections N  Spare data connections to keep (default EDGE_DATA_CONNECTIONS or 8): on the raw
                     transport the edge sends HTTP requests on them as plain HTTP/1.1, spliced to a plain-HTTP
                     local service; 0 sends every request over the tunnel's HTTP/2 streams

The agent prints the public URL, reconnects with backoff after any drop, and exits non-zero when the edge refuses it.
At a terminal it prints status lines and warnings as text; piped, JSON log lines (EDGE_LOG_FORMAT=auto|text|json,
EDGE_LOG_LEVEL).`;

const DEPLOY_HELP = `Usage: edge agent deploy <application-uuid> --dir DIR [options]

Serves the application's endpoint from the release that is live, and runs its deployments on this machine as the
control plane orders them (a git push to its webhook, a manual deploy, a rollback): fetch the commit with git into a
new release under DIR, run the build command, start the run command with PORT set, wait for the health path to
answer 2xx, switch visitors to it with no request dropped, then stop the old release (docs/deploy.md).

Options:
  --dir DIR          Where releases and the agent's state live (required; created if missing)
  --edge URL         The edge's public base URL (default EDGE_URL or http://127.0.0.1:8080)
  --api-key KEY      API key (default EDGE_API_KEY); its user needs tunnels:connect in the application's account
  --id ID            Agent id, stable across reconnects (default: hostname + random)
  --tags a,b         Tags routing rules can select this agent by
  --transport T      auto (default), raw or ws, as for edge agent http
  --build-timeout S  Seconds a build may run (default 600)
  --health-timeout S Seconds a new release has to answer its health path with 2xx (default 60)
  --keep-releases N  Releases kept on disk for rollback, the live one included (default 3)`;

/** A whole number of seconds from an option, in range, as milliseconds. */
function secondsOption(name: string, value: string | undefined, max: number): number | undefined {
  if (value === undefined) return undefined;
  if (!/^[0-9]{1,6}$/.test(value) || Number(value) < 1 || Number(value) > max) throw new UsageError(`--${name} must be a whole number of seconds from 1 to ${max}, got "${value}"`);
  return Number(value) * 1000;
}

async function deployCommand(args: string[]): Promise<void> {
  const { values, positionals } = parseArgs({
    args,
    allowPositionals: true,
    options: {
      dir: { type: 'string' },
      edge: { type: 'string' },
      'api-key': { type: 'string' },
      id: { type: 'string' },
      tags: { type: 'string' },
      transport: { type: 'string' },
      'build-timeout': { type: 'string' },
      'health-timeout': { type: 'string' },
      'keep-releases': { type: 'string' },
      help: { type: 'boolean', short: 'h' },
    },
  });
  if (values.help) return void process.stdout.write(DEPLOY_HELP + '\n');
  const [application] = positionals;
  if (!application || positionals.length > 1 || !isUuid(application)) throw new UsageError(`give the application's uuid\n\n${DEPLOY_HELP}`);
  if (!values.dir) throw new UsageError(`--dir is required: where releases live\n\n${DEPLOY_HELP}`);
  const apiKey = values['api-key'] ?? process.env.EDGE_API_KEY;
  if (!apiKey) throw new UsageError('an API key is needed: --api-key or EDGE_API_KEY');
  const transport = values.transport ?? process.env.EDGE_TRANSPORT ?? 'auto';
  if (transport !== 'auto' && transport !== 'raw' && transport !== 'ws') throw new UsageError(`--transport must be auto, raw or ws, got "${transport}"`);
  const keep = values['keep-releases'];
  if (keep !== undefined && (!/^[0-9]{1,2}$/.test(keep) || Number(keep) < 1 || Number(keep) > 50)) throw new UsageError(`--keep-releases must be a whole number from 1 to 50, got "${keep}"`);
  const format = (process.env.EDGE_LOG_FORMAT ?? 'auto') as LogFormat;
  if (!LOG_FORMATS.includes(format)) throw new UsageError(`EDGE_LOG_FORMAT must be auto, text or json, got "${format}"`);
  const terminal = agentConsole({ out: process.stdout, format, level: process.env.EDGE_LOG_LEVEL });
  const { DeployAgent } = await import('./agent/deploy/deploy-agent.ts');
  const { TunnelRefusedError } = await import('./agent/agent.ts');
  const agent = new DeployAgent({
    application,
    dir: resolve(values.dir),
    edgeUrl: values.edge ?? process.env.EDGE_URL ?? 'http://127.0.0.1:8080',
    apiKey,
    agentId: values.id,
    tags: values.tags ? values.tags.split(',').map((t) => t.trim()).filter(Boolean) : [],
    transport,
    logger: terminal.logger,
    deployer: {
      buildTimeoutMs: secondsOption('build-timeout', values['build-timeout'], 86_400),
      healthTimeoutMs: secondsOption('health-timeout', values['health-timeout'], 3_600),
      keepReleases: keep === undefined ? undefined : Number(keep),
    },
  });
  try {
    const welcome = await agent.start();
    terminal.forwarding(welcome, 'http', `application ${application}`, agent.agent.transport ?? transport);
  } catch (err) {
    if (err instanceof TunnelRefusedError) {
      process.stderr.write(`edge: the edge refused this agent (${err.code}): ${err.message}\n`);
      await agent.stop(0);
      process.exit(3);
    }
    throw err;
  }
  agent.agent.on('reconnecting', (info: ReconnectInfo) => terminal.reconnecting(info));
  agent.agent.on('stopped', (err: { code: string; message: string } | null) => {
    if (!err) return;
    process.stderr.write(`edge: stopped by the edge (${err.code}): ${err.message}\n`);
    void agent.stop(0).finally(() => process.exit(3));
  });
  const stop = async () => {
    await agent.stop();
    process.exit(0);
  };
  process.on('SIGTERM', () => void stop());
  process.on('SIGINT', () => void stop());
}

async function agentCommand(args: string[]): Promise<void> {
  if (args[0] === 'deploy') return deployCommand(args.slice(1));
  if (args[0] === 'start' || args[0] === 'config') {
    const { agentFileCommand, AgentFileUsageError } = await import('./agent/start-command.ts');
    return agentFileCommand(args).catch((err: unknown) => {
      throw err instanceof AgentFileUsageError ? new UsageError(err.message) : err;
    });
  }
  const { values, positionals } = parseArgs({
    args,
    allowPositionals: true,
    options: {
      edge: { type: 'string' },
      edges: { type: 'string' },
      'ha-connections': { type: 'string' },
      'api-key': { type: 'string' },
      endpoint: { type: 'string' },
      id: { type: 'string' },
      tags: { type: 'string' },
      'host-header': { type: 'string' },
      transport: { type: 'string' },
      'data-connections': { type: 'string' },
      help: { type: 'boolean', short: 'h' },
    },
  });
  if (values.help) return void process.stdout.write(AGENT_HELP + '\n');
  const [protocol, target] = positionals;
  if (protocol !== 'http' && protocol !== 'tcp' && protocol !== 'udp') throw new UsageError(`the protocol must be http, tcp or udp\n\n${AGENT_HELP}`);
  if (!target || positionals.length > 2) throw new UsageError(`give one local target (a port, host:port or URL)\n\n${AGENT_HELP}`);
  const apiKey = values['api-key'] ?? process.env.EDGE_API_KEY;
  if (!apiKey) throw new UsageError('an API key is needed: --api-key or EDGE_API_KEY');
  const transport = values.transport ?? process.env.EDGE_TRANSPORT ?? 'auto';
  if (transport !== 'auto' && transport !== 'raw' && transport !== 'ws') throw new UsageError(`--transport must be auto, raw or ws, got "${transport}"`);
  const spares = values['data-connections'] ?? process.env.EDGE_DATA_CONNECTIONS ?? '8';
  if (!/^[0-9]{1,4}$/.test(spares) || Number(spares) > 1024) throw new UsageError(`--data-connections must be a whole number from 0 to 1024, got "${spares}"`);
  const format = (process.env.EDGE_LOG_FORMAT ?? 'auto') as LogFormat;
  if (!LOG_FORMATS.includes(format)) throw new UsageError(`EDGE_LOG_FORMAT must be auto, text or json, got "${format}"`);
  const edgeList = values.edges ?? process.env.EDGE_EDGES;
  if (values.edge !== undefined && values.edges !== undefined) throw new UsageError('give --edge (one edge) or --edges (several), not both');
  const edges = edgeList?.split(',').map((e) => e.trim());
  if (edges && edges.some((e) => e === '')) throw new UsageError(`--edges must list edge URLs separated by commas, got "${edgeList}"`);
  const ha = values['ha-connections'];
  if (ha !== undefined && edges === undefined) throw new UsageError('--ha-connections goes with --edges');
  if (ha !== undefined && (!/^[0-9]{1,2}$/.test(ha) || Number(ha) < 1 || Number(ha) > 8)) throw new UsageError(`--ha-connections must be a whole number from 1 to 8, got "${ha}"`);
  if (edges) {
    const { checkHaOptions } = await import('./agent/ha.ts');
    try {
      checkHaOptions(edges, ha === undefined ? undefined : Number(ha));
    } catch (err) {
      throw new UsageError(`--edges: ${(err as Error).message}`);
    }
  }
  const { startAgent, TunnelRefusedError } = await import('./agent/agent.ts');
  // A person at a terminal gets status lines and readable warnings; a pipe gets JSON log lines (src/agent/console.ts).
  const terminal = agentConsole({ out: process.stdout, format, level: process.env.EDGE_LOG_LEVEL });
  const logger = terminal.logger;
  let agent: Agent | HaAgent;
  const common = {
    apiKey,
    endpoint: values.endpoint,
    protocol: protocol as 'http' | 'tcp' | 'udp',
    target: /^\d+$/.test(target) ? Number(target) : target,
    agentId: values.id,
    tags: values.tags ? values.tags.split(',').map((t) => t.trim()).filter(Boolean) : [],
    hostHeader: values['host-header'],
    transport: transport as 'auto' | 'raw' | 'ws',
    dataConnections: Number(spares),
    logger,
  };
  try {
    if (edges) {
      const { startHaAgent } = await import('./agent/ha.ts');
      agent = await startHaAgent({ ...common, edges, haConnections: ha === undefined ? undefined : Number(ha) });
    } else {
      agent = await startAgent({ ...common, edgeUrl: values.edge ?? process.env.EDGE_URL ?? 'http://127.0.0.1:8080' });
    }
  } catch (err) {
    if (err instanceof TunnelRefusedError) {
      process.stderr.write(`edge: the edge refused this agent (${err.code}): ${err.message}\n`);
      process.exit(3);
    }
    throw err;
  }
  // Which transport carries the tunnel is said on the same line: auto may have fallen back to WebSocket.
  const show = (w: Welcome) => terminal.forwarding(w, protocol, target, agent.transport ?? transport);
  if (agent.welcome) show(agent.welcome);
  // With --edges each tunnel says its own edge (the welcome names the node and region).
  agent.on('connected', show);
  agent.on('reconnecting', (info: ReconnectInfo) => terminal.reconnecting(info));
  agent.on('stopped', (err: { code: string; message: string } | null) => {
    if (err) {
      process.stderr.write(`edge: stopped by the edge (${err.code}): ${err.message}\n`);
      process.exit(3);
    }
  });
  const stop = async () => {
    await agent.stop();
    process.exit(0);
  };
  process.on('SIGTERM', () => void stop());
  process.on('SIGINT', () => void stop());
}

class UsageError extends Error {}

async function main(argv: string[]): Promise<void> {
  const [command, ...args] = argv;
  switch (command) {
    case 'serve':
      return serve(args);
    case 'admin':
      return admin(args);
    case 'agent':
      return agentCommand(args);
    case 'cluster': {
      const { clusterCommand, ClusterUsageError } = await import('./cluster/command.ts');
      return clusterCommand(args).catch((err: unknown) => {
        throw err instanceof ClusterUsageError ? new UsageError(err.message) : err;
      });
    }
    case 'diff':
    case 'apply':
    case 'export': {
      const { configCommand } = await import('./config-as-code/command.ts');
      process.exitCode = await configCommand(command, args);
      return;
    }
    case undefined:
    case 'help':
    case '--help':
    case '-h':
      process.stdout.write(HELP + '\n');
      return;
    default:
      throw new UsageError(`unknown command "${command}"\n\n${HELP}`);
  }
}

main(process.argv.slice(2)).catch((err) => {
  if (err instanceof UsageError || (err as { code?: string }).code === 'ERR_PARSE_ARGS_UNKNOWN_OPTION') {
    process.stderr.write(`edge: ${(err as Error).message}\n`);
    process.exit(2);
  }
  // Settings read after start-up (the OTEL_* variables) fail as a ConfigError too: one line, like loadConfig's.
  if (err instanceof ConfigError) {
    process.stderr.write(`edge: configuration error: ${err.message}\n`);
    process.exit(2);
  }
  if ((err as { code?: string }).code === '23505') {
    process.stderr.write('edge: already exists\n');
    process.exit(1);
  }
  process.stderr.write(`edge: ${(err as Error).stack ?? err}\n`);
  process.exit(1);
});
