// Fetching one commit of the application's repository into a fresh release directory with the machine's `git`
// (its ssh keys and credential helpers are the agent's credentials), shallow when the server allows it.
import { mkdir } from 'node:fs/promises';
import { DeployError, Cancelled, duration } from './errors.ts';
import { runToEnd, describeExit } from './process-group.ts';

export interface FetchOptions {
  repositoryUrl: string;
  ref: string;
  /** The ordered commit, or null for the branch's head. */
  commit: string | null;
  dir: string;
  timeoutMs: number;
  graceMs: number;
  signal: AbortSignal;
  log: (line: string) => void;
}

/**
 * Only these transports: no ext:: (runs a command), no plain http or git:// (unauthenticated, unencrypted). file is
 * allowed here because the control plane decides whether a file:// repository URL is accepted at all.
 */
const ALLOWED_PROTOCOLS = 'https:ssh:file';

function gitEnv(): NodeJS.ProcessEnv {
  // Never wait for a password on a terminal nobody watches: fail, and say so in the log.
  return { ...process.env, GIT_TERMINAL_PROMPT: '0', GIT_ALLOW_PROTOCOL: ALLOWED_PROTOCOLS };
}

/** The URL without its password or token, for the log. */
export function redactUrl(url: string): string {
  return url.replace(/^([a-z][a-z0-9+.-]*:\/\/)[^/@]*@/i, '$1***@');
}

/** Fetches and checks out the commit in `dir` (created); returns the resolved sha. */
export async function fetchCommit(o: FetchOptions): Promise<string> {
  await mkdir(o.dir, { recursive: true });
  const url = redactUrl(o.repositoryUrl);
  const git = async (args: string[], shown: string[] = args): Promise<{ ok: boolean; why: string; out: string[] }> => {
    o.log(`$ git ${shown.join(' ')}`);
    const out: string[] = [];
    const r = await runToEnd('git', args, {
      cwd: o.dir,
      env: gitEnv(),
      onLine: (line) => {
        out.push(line);
        o.log(line);
      },
      timeoutMs: o.timeoutMs,
      graceMs: o.graceMs,
      signal: o.signal,
    });
    if (r.aborted) throw new Cancelled('cancelled');
    if (r.timedOut) return { ok: false, why: `timed out after ${duration(o.timeoutMs)}`, out };
    if (r.error) throw new DeployError(`git could not start (is git installed on the agent's machine?): ${r.error}`);
    return { ok: r.code === 0, why: describeExit(r), out };
  };
  // A 64-digit commit belongs to a SHA-256 repository, which the local repository must match to receive it.
  const init = await git(['init', '-q', ...(o.commit?.length === 64 ? ['--object-format=sha256'] : [])]);
  if (!init.ok) throw new DeployError(`git init ${init.why}`);
  const branch = `refs/heads/${o.ref}`;
  const fetch = (what: string, depth: boolean) => {
    const opts = ['fetch', '--no-tags', ...(depth ? ['--depth', '1'] : [])];
    // `--` ends the options: a URL or ref starting with a dash cannot become one.
    return git([...opts, '--', o.repositoryUrl, what], [...opts, '--', url, what]);
  };
  let target = 'FETCH_HEAD';
  if (o.commit) {
    target = o.commit;
    const byId = await fetch(o.commit, true);
    if (!byId.ok) {
      // Servers refuse a want of an unadvertised object unless configured to allow it (uploadpack.allow*SHA1InWant):
      // fetch the branch whole, so an older commit on it is there too.
      o.log(`fetching commit ${o.commit} by id failed (${byId.why}); fetching branch ${o.ref}`);
      const byBranch = await fetch(branch, false);
      if (!byBranch.ok) throw new DeployError(`git fetch of ${url} ${branch} ${byBranch.why}: ${lastLine(byBranch.out)}`);
    }
  } else {
    const byBranch = await fetch(branch, true);
    if (!byBranch.ok) throw new DeployError(`git fetch of ${url} ${branch} ${byBranch.why}: ${lastLine(byBranch.out)}`);
  }
  const checkout = await git(['-c', 'advice.detachedHead=false', 'checkout', '-q', '--detach', target]);
  if (!checkout.ok) {
    throw new DeployError(o.commit ? `commit ${o.commit} is not on branch ${o.ref} of ${url}` : `git checkout ${checkout.why}: ${lastLine(checkout.out)}`);
  }
  const head = await git(['rev-parse', 'HEAD']);
  const sha = head.out.find((line) => /^([0-9a-f]{40}|[0-9a-f]{64})$/.test(line));
  if (!head.ok || !sha) throw new DeployError(`git rev-parse HEAD ${head.why}`);
  if (o.commit && sha !== o.commit) throw new DeployError(`checked out ${sha}, not the ordered commit ${o.commit}`);
  return sha;
}

function lastLine(lines: string[]): string {
  return lines.filter((l) => l.trim()).at(-1) ?? 'no output';
}
