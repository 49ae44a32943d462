// `edge diff`, `edge apply` and `edge export`: configuration as code over the public /v1 API, so each does exactly
// what the same calls by hand would, under the same API key's permissions. Exit codes: docs/config-as-code.md.
import { writeFile } from 'node:fs/promises';
import { parseArgs } from 'node:util';
import { applyPlan, formatReport, type Outcome } from './apply.ts';
import { ApiClient, ApiError } from './client.ts';
import { TAG_PATTERN } from '../control/schemas/tags.ts';
import type { Document } from './document.ts';
import { documentText, exportDocument } from './export.ts';
import { DocumentError, loadDocumentFile } from './loader.ts';
import { RULE_GROUPS, SETTING_GROUPS } from './model.ts';
import { formatPlan, makePlan, needsAlerts, needsCertificates, needsOf, PlanError, type PlanOptions } from './plan.ts';
import { readState } from './state.ts';

/** The control API of a node on this machine (config/default.json controlPort). */
export const DEFAULT_CONTROL_URL = 'http://127.0.0.1:8081';

export const CONFIG_HELP = `Configuration as code (docs/config-as-code.md):
  diff   -f FILE [--prune] [--select-tag T]              Print what apply would change; exit 0 none, 2 some, 1 error
  apply  -f FILE [--prune] [--select-tag T] [--dry-run]  Make the account match the file
  export [-o yaml|json] [--file F] [--select-tag T]      Write the account's configuration as such a file

  --api-key K       or EDGE_API_KEY
  --control-url U   or EDGE_CONTROL_URL (default ${DEFAULT_CONTROL_URL})
  --account-id N    act in an organization (X-Account-Id)`;

export interface Io {
  stdout: (s: string) => void;
  stderr: (s: string) => void;
  env: NodeJS.ProcessEnv;
}

const processIo: Io = { stdout: (s) => process.stdout.write(s), stderr: (s) => process.stderr.write(s), env: process.env };

class Usage extends Error {}

/** Runs one command; resolves to its exit status. */
export async function configCommand(command: 'diff' | 'apply' | 'export', args: string[], io: Io = processIo): Promise<number> {
  try {
    return await run(command, args, io);
  } catch (err) {
    if (err instanceof DocumentError) io.stderr(`edge ${command}: the file is not valid; nothing was sent\n${err.message}\n`);
    else if (err instanceof PlanError) io.stderr(`edge ${command}: ${err.message}; nothing was applied\n`);
    else if (err instanceof ApiError) io.stderr(`edge ${command}: ${err.method} ${err.path}: ${err.describe()}\n`);
    else if (err instanceof Usage || (err as { code?: string }).code?.startsWith('ERR_PARSE_ARGS')) io.stderr(`edge ${command}: ${(err as Error).message}\n\n${CONFIG_HELP}\n`);
    else throw err;
    return 1;
  }
}

async function run(command: 'diff' | 'apply' | 'export', args: string[], io: Io): Promise<number> {
  const { values } = parseArgs({
    args,
    options: {
      file: { type: 'string', short: 'f' },
      output: { type: 'string', short: 'o' },
      prune: { type: 'boolean' },
      'select-tag': { type: 'string' },
      'dry-run': { type: 'boolean' },
      'api-key': { type: 'string' },
      'control-url': { type: 'string' },
      'account-id': { type: 'string' },
      help: { type: 'boolean', short: 'h' },
    },
  });
  if (values.help) return io.stdout(CONFIG_HELP + '\n'), 0;
  const selectTag = values['select-tag'];
  if (selectTag !== undefined && !new RegExp(TAG_PATTERN).test(selectTag)) throw new Usage(`--select-tag "${selectTag}" is not a tag (${TAG_PATTERN})`);
  const forbid = (flag: string, on: unknown) => {
    if (on !== undefined) throw new Usage(`${flag} does not apply to ${command}`);
  };
  if (command === 'export') {
    forbid('--prune', values.prune);
    forbid('--dry-run', values['dry-run']);
  } else {
    forbid('--output', values.output);
    if (command === 'diff') forbid('--dry-run', values['dry-run']);
    if (!values.file) throw new Usage('-f FILE is required');
  }
  const format = values.output ?? 'yaml';
  if (format !== 'yaml' && format !== 'json') throw new Usage(`-o takes yaml or json, not "${format}"`);

  // The file first: a mistake in it is reported before any call is made.
  const doc = command === 'export' ? undefined : await loadDocumentFile(values.file!, { env: io.env, selectTag });
  const apiKey = values['api-key'] ?? io.env.EDGE_API_KEY;
  if (!apiKey) throw new Usage('an API key is needed: --api-key or EDGE_API_KEY');
  const client = new ApiClient({ controlUrl: values['control-url'] ?? io.env.EDGE_CONTROL_URL ?? DEFAULT_CONTROL_URL, apiKey, accountId: values['account-id'] });

  if (command === 'export') {
    const every = new Set([...SETTING_GROUPS, ...RULE_GROUPS]);
    const state = await readState(client, () => every, selectTag, 'if-allowed', true);
    const { document, references, warnings } = exportDocument(state);
    for (const w of warnings) io.stderr(`edge export: ${w}\n`);
    if (references.length > 0) io.stderr(`edge export: secrets are references; set ${references.join(', ')} before applying\n`);
    const text = documentText(document, format);
    if (values.file) await writeFile(values.file, text);
    else io.stdout(text);
    return 0;
  }

  const options: PlanOptions = { prune: values.prune === true, selectTag };
  const state = await readState(client, needsOf(doc as Document, options), selectTag, needsAlerts(doc as Document, options), needsCertificates(doc as Document));
  const entries = await makePlan(doc as Document, state, options);
  io.stdout(formatPlan(entries));
  if (command === 'diff') return entries.length === 0 ? 0 : 2;
  if (values['dry-run'] || entries.length === 0) {
    if (values['dry-run']) io.stdout('Dry run: nothing was changed.\n');
    return 0;
  }
  io.stdout('\n');
  const progress = (o: Outcome) => {
    if (o.status === 'done') io.stdout(`${o.entry.action === 'create' ? 'created' : o.entry.action === 'update' ? 'updated' : 'deleted'} ${o.entry.kind.replace('_', ' ')} ${o.entry.key}\n`);
  };
  const report = await applyPlan(client, doc as Document, state, entries, options, progress);
  io.stdout(formatReport(report));
  return report.outcomes.some((o) => o.status === 'failed' || (o.status === 'skipped' && o.error !== 're-planned after a conflict')) ? 1 : 0;
}
