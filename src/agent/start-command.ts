// `edge agent start --config FILE (NAME… | --all)` and `edge agent config check FILE`: the tunnels of an agent file
// run in one process under one Supervisor, one Forwarding line each; SIGHUP reloads the file, SIGTERM/SIGINT stop all.
//
// Exit status: 0 after SIGTERM/SIGINT or a clean check, 2 for a usage mistake or a file with mistakes, 3 once no
// tunnel is left running because the edge refused (or could not start) every one (docs/agent-config.md).
import { parseArgs } from 'node:util';
import { TunnelRefusedError } from './agent.ts';
import { agentConsole } from './console.ts';
import { describeTunnel, loadAgentFile, type AgentFile, type AgentFlags, type TunnelSpec } from './config-file.ts';
import { Supervisor, type ApplyResult } from './supervisor.ts';

/** A command-line mistake: the caller prints it after `edge: ` and exits 2. */
export class AgentFileUsageError extends Error {}

const DEFAULT_FLAGS_HELP = `Defaults for every tunnel (a tunnel's own setting in the file wins over them; precedence: the file's top level,
then the environment, then these flags):
  --edge URL           The edge's public base URL (EDGE_URL; default http://127.0.0.1:8080)
  --edges LIST         Several edges, URLs separated by commas (EDGE_EDGES)
  --ha-connections N   Tunnels to keep with --edges, each on a different edge (1-8, default 2)
  --api-key KEY        API key (EDGE_API_KEY); the file can say api_key: \${VARIABLE} instead
  --transport T        auto, raw or ws (EDGE_TRANSPORT; default auto)
  --data-connections N Spare data connections of http tunnels (EDGE_DATA_CONNECTIONS; default 8)`;

export const START_HELP = `Usage: edge agent start --config FILE (NAME... | --all) [options]

Runs the named tunnels of an agent file (or --all of them) in this one process: http, tcp, udp and deploy tunnels,
each with its own endpoint, target, tags, transport and data connections (docs/agent-config.md). Prints one line per
tunnel once it is online: "[name] Forwarding <public URL> -> <target> (<transport> transport)".

SIGHUP reads the file again: removed tunnels stop, added ones start, changed ones restart, the others are not
touched. A file with mistakes is refused (the mistakes are printed) and the running tunnels are kept.

A tunnel the edge refuses is reported on stderr by name and the others keep running. Exit status: 0 after SIGTERM or
SIGINT, 2 for a usage mistake or a file with mistakes, 3 once no tunnel is left running.

Options:
  --config FILE        The agent file (YAML or JSON; required)
  --all                Start every tunnel in the file (with a reload, the tunnels the file then has)

${DEFAULT_FLAGS_HELP}`;

export const CONFIG_HELP = `Usage: edge agent config check FILE [options]

Checks an agent file as \`edge agent start\` would read it, with the environment and the same default options, and
prints one line per tunnel (exit 0), or every mistake as FILE:LINE:COLUMN path: message (exit 2).

${DEFAULT_FLAGS_HELP}`;

const DEFAULT_OPTIONS = {
  edge: { type: 'string' },
  edges: { type: 'string' },
  'ha-connections': { type: 'string' },
  'api-key': { type: 'string' },
  transport: { type: 'string' },
  'data-connections': { type: 'string' },
  help: { type: 'boolean', short: 'h' },
} as const;

function flagsOf(values: { [K in keyof typeof DEFAULT_OPTIONS]?: string | boolean }): AgentFlags {
  const s = (v: string | boolean | undefined) => (typeof v === 'string' ? v : undefined);
  return {
    edge: s(values.edge),
    edges: s(values.edges),
    haConnections: s(values['ha-connections']),
    apiKey: s(values['api-key']),
    transport: s(values.transport),
    dataConnections: s(values['data-connections']),
  };
}

/** `edge agent start …` and `edge agent config …`, after `edge agent`. */
export async function agentFileCommand(args: string[]): Promise<void> {
  const [sub, ...rest] = args;
  if (sub === 'config') return configCommand(rest);
  return startCommand(rest);
}

function printMistakes(errors: string[]): void {
  for (const line of errors) process.stderr.write(`${line}\n`);
}

async function configCommand(args: string[]): Promise<void> {
  const { values, positionals } = parseArgs({ args, allowPositionals: true, options: DEFAULT_OPTIONS });
  if (values.help || positionals.length === 0) return void process.stdout.write(CONFIG_HELP + '\n');
  const [sub, file, ...extra] = positionals;
  if (sub !== 'check') throw new AgentFileUsageError(`unknown agent config subcommand "${sub}"\n\n${CONFIG_HELP}`);
  if (!file || extra.length > 0) throw new AgentFileUsageError(`give one file to check\n\n${CONFIG_HELP}`);
  const loaded = await loadAgentFile(file, process.env, flagsOf(values));
  if (!loaded.ok) {
    printMistakes(loaded.errors);
    process.stderr.write(`edge: ${file}: ${loaded.errors.length} ${loaded.errors.length === 1 ? 'mistake' : 'mistakes'}\n`);
    process.exitCode = 2;
    return;
  }
  const n = loaded.file.tunnels.length;
  process.stdout.write(`${file}: ${n} ${n === 1 ? 'tunnel' : 'tunnels'}, no mistakes\n`);
  for (const tunnel of loaded.file.tunnels) process.stdout.write(`  ${describeTunnel(tunnel)}\n`);
}

/** The tunnels `names` picks (null: all); a name the file lacks is a usage mistake at start, a note at a reload. */
function pick(file: AgentFile, names: string[] | null): { tunnels: TunnelSpec[]; missing: string[] } {
  if (names === null) return { tunnels: file.tunnels, missing: [] };
  return { tunnels: file.tunnels.filter((t) => names.includes(t.name)), missing: names.filter((n) => !file.tunnels.some((t) => t.name === n)) };
}

function summary(result: ApplyResult): string {
  const parts = (['started', 'stopped', 'restarted', 'unchanged'] as const).filter((k) => result[k].length > 0).map((k) => `${k} ${result[k].join(', ')}`);
  return parts.length > 0 ? parts.join('; ') : 'nothing to do';
}

async function startCommand(args: string[]): Promise<void> {
  const { values, positionals } = parseArgs({
    args,
    allowPositionals: true,
    options: { ...DEFAULT_OPTIONS, config: { type: 'string', short: 'c' }, all: { type: 'boolean' } },
  });
  if (values.help) return void process.stdout.write(START_HELP + '\n');
  const path = values.config;
  if (!path) throw new AgentFileUsageError(`--config FILE is required: the agent file\n\n${START_HELP}`);
  if (values.all && positionals.length > 0) throw new AgentFileUsageError('give tunnel names or --all, not both');
  if (!values.all && positionals.length === 0) throw new AgentFileUsageError(`name the tunnels to start, or --all\n\n${START_HELP}`);
  const names = values.all ? null : [...new Set(positionals)];
  const flags = flagsOf(values);
  // Taken from here on: SIGHUP's default action ends the process. One that comes before the tunnels started is
  // acted on once they have.
  let reload: (() => Promise<void>) | null = null;
  let hangupBeforeStart = false;
  let reloads: Promise<void> = Promise.resolve();
  const scheduleReload = () => {
    if (!reload) return void (hangupBeforeStart = true);
    reloads = reloads.then(reload).catch((err: Error) => void process.stderr.write(`edge: reload failed: ${err.message}\n`));
  };
  process.on('SIGHUP', scheduleReload);
  const loaded = await loadAgentFile(path, process.env, flags);
  if (!loaded.ok) {
    printMistakes(loaded.errors);
    process.exitCode = 2;
    return;
  }
  const first = pick(loaded.file, names);
  if (first.missing.length > 0) {
    throw new AgentFileUsageError(`${path} has no tunnel named ${first.missing.join(', ')} (it has ${loaded.file.tunnels.map((t) => t.name).join(', ')})`);
  }
  const { log } = loaded.file;
  const terminal = agentConsole({ out: process.stdout, format: log.format, level: log.level });
  const supervisor = new Supervisor({ logger: terminal.logger });
  supervisor.on('online', (spec, welcome, transport) => {
    const target = spec.kind === 'deploy' ? `application ${spec.application}` : String(spec.target);
    terminal.forwarding(welcome, spec.kind === 'deploy' ? 'http' : spec.kind, target, transport, spec.name);
  });
  supervisor.on('reconnecting', (spec, info) => terminal.reconnecting(info, spec.name));
  supervisor.on('failed', (spec, err) => {
    // Anything else (an edge name that resolves to nothing, a deploy directory that cannot be made) says itself.
    const why = err instanceof TunnelRefusedError ? `the edge refused it (${err.code}): ${err.message}` : err.message;
    process.stderr.write(`edge: tunnel ${spec.name} stopped: ${why}\n`);
  });
  supervisor.on('idle', () => {
    process.stderr.write('edge: no tunnel is running any more\n');
    process.exit(3);
  });
  await supervisor.apply(first.tunnels);

  // One reload at a time, in the order the signals came; a failed read or apply leaves the running tunnels as they are.
  reload = async () => {
    const again = await loadAgentFile(path, process.env, flags);
    if (!again.ok) {
      process.stderr.write(`edge: reload refused, ${path} has mistakes; the running tunnels are kept\n`);
      return printMistakes(again.errors);
    }
    const next = pick(again.file, names);
    if (next.tunnels.length === 0) {
      process.stderr.write(`edge: reload refused, ${path} has none of the tunnels this agent runs (${names?.join(', ')}); the running tunnels are kept\n`);
      return;
    }
    for (const name of next.missing) process.stderr.write(`edge: ${path} no longer has tunnel ${name}; it stops\n`);
    if (JSON.stringify(again.file.log) !== JSON.stringify(log)) process.stderr.write('edge: the log settings changed; they apply from the next start\n');
    const result = await supervisor.apply(next.tunnels);
    process.stdout.write(`Reloaded ${path}: ${summary(result)}\n`);
  };
  if (hangupBeforeStart) scheduleReload();
  let stopping = false;
  const stop = async () => {
    if (stopping) return;
    stopping = true;
    // A drain that hangs must not keep the process alive forever.
    setTimeout(() => process.exit(1), 15_000).unref();
    await supervisor.stop();
    process.exit(0);
  };
  process.on('SIGTERM', () => void stop());
  process.on('SIGINT', () => void stop());
}
