// A git-sourced application for deployment tests: a bare repository made with the `git` CLI and a work tree that
// commits versions of a small HTTP app (it answers its version on `/`, 200 on /healthz, and reads PORT).
import { execFile } from 'node:child_process';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);

/** What a version of the app does: its answer on `/`, whether /healthz answers 200, whether `sh build.sh` succeeds. */
export interface AppVersion {
  version: string;
  healthy?: boolean;
  buildFails?: boolean;
}

export interface GitApp {
  /** file:// URL of the bare repository. */
  url: string;
  /** Commits this version on `branch` (default main), pushes it and returns the commit's sha. */
  commit(v: AppVersion, branch?: string): Promise<string>;
  close(): Promise<void>;
}

/** The app's server: answers its version, and its health check; stops on SIGTERM after what is in flight. */
export function serverSource(v: AppVersion): string {
  return `const http = require('node:http');
const server = http.createServer((req, res) => {
  if (req.url === '/healthz') { res.writeHead(${v.healthy === false ? 500 : 200}); return res.end('${v.healthy === false ? 'sick' : 'ok'}'); }
  res.writeHead(200, { 'content-type': 'text/plain' });
  res.end(${JSON.stringify(v.version)});
});
server.listen(Number(process.env.PORT), '127.0.0.1');
process.on('SIGTERM', () => server.close(() => process.exit(0)));
`;
}

export async function createGitApp(): Promise<GitApp> {
  const root = await mkdtemp(join(tmpdir(), 'edge-git-'));
  const bare = join(root, 'app.git');
  const work = join(root, 'work');
  const git = (cwd: string, ...args: string[]) => run('git', args, { cwd, env: { ...process.env, GIT_CONFIG_NOSYSTEM: '1', HOME: root } });
  await mkdir(work);
  await git(root, 'init', '--quiet', '--bare', '--initial-branch=main', bare);
  await git(work, 'init', '--quiet', '--initial-branch=main');
  await git(work, 'config', 'user.email', 'dev@example.test');
  await git(work, 'config', 'user.name', 'Dev');
  await git(work, 'remote', 'add', 'origin', bare);
  return {
    url: `file://${bare}`,
    async commit(v, branch = 'main') {
      await git(work, 'checkout', '--quiet', '-B', branch);
      await writeFile(join(work, 'server.js'), serverSource(v));
      await writeFile(join(work, 'build.sh'), v.buildFails ? 'echo "build step failing on purpose" >&2\nexit 1\n' : `echo "building ${v.version}"\n`);
      await git(work, 'add', '.');
      await git(work, 'commit', '--quiet', '--allow-empty', '-m', v.version);
      await git(work, 'push', '--quiet', '--force', 'origin', branch);
      return (await git(work, 'rev-parse', 'HEAD')).stdout.trim();
    },
    close: () => rm(root, { recursive: true, force: true }),
  };
}
