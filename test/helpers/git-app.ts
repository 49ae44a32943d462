// A git-sourced application for deployment tests: a bare repository made with the `git` CLI, a work tree that
// commits and pushes to it, and the small HTTP app the tests deploy (it answers its version and reads PORT).
import { execFile } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { promisify } from 'node:util';

const run = promisify(execFile);

export async function git(cwd: string, ...args: string[]): Promise<string> {
  const { stdout } = await run('git', ['-c', 'user.name=Test', '-c', 'user.email=test@example.test', ...args], { cwd });
  return stdout.trim();
}

/**
 * The application: answers its version on `/` (after a few milliseconds, so requests overlap a switch), `health` on
 * /healthz (200 unless given), its pid on `/pid`; refuses to start while a file `down` is in its directory; stops on
 * SIGTERM once the requests in flight are answered.
 */
export function serverJs(version: string, health = 200): string {
  return `const http = require('node:http');
const fs = require('node:fs');
if (fs.existsSync('down')) { console.error('down file present'); process.exit(4); }
const server = http.createServer((req, res) => {
  if (req.url === '/healthz') { res.writeHead(${health}); return res.end('health'); }
  if (req.url === '/pid') return res.end(String(process.pid));
  setTimeout(() => res.end(${JSON.stringify(version)}), 5);
});
server.listen(Number(process.env.PORT), '127.0.0.1', () => console.log('listening on ' + process.env.PORT));
process.on('SIGTERM', () => server.close(() => process.exit(0)));
`;
}

/** A version of the app with a build script (`sh build.sh`) that prints "building <version>", or fails. */
export function appFiles(v: { version: string; healthy?: boolean; buildFails?: boolean }): Record<string, string> {
  return {
    'server.js': serverJs(v.version, v.healthy === false ? 500 : 200),
    'build.sh': v.buildFails ? 'echo "build step failing on purpose" >&2\nexit 1\n' : `echo "building ${v.version}"\n`,
  };
}

export interface Repo {
  root: string;
  /** file:// URL of the bare repository. */
  url: string;
  /** Commits these files on `branch` (default main) and pushes; returns the commit's sha. */
  commit(files: Record<string, string>, message?: string, branch?: string): Promise<string>;
  close(): Promise<void>;
}

export async function makeRepo(): Promise<Repo> {
  const root = await mkdtemp(join(tmpdir(), 'deploy-repo-'));
  const bare = join(root, 'app.git');
  const work = join(root, 'work');
  await git(root, 'init', '-q', '--bare', '-b', 'main', bare);
  await git(root, 'init', '-q', '-b', 'main', work);
  await git(work, 'remote', 'add', 'origin', bare);
  let n = 0;
  return {
    root,
    url: pathToFileURL(bare).href,
    async commit(files, message = `commit ${++n}`, branch = 'main') {
      await git(work, 'checkout', '-q', '-B', branch);
      for (const [name, text] of Object.entries(files)) await writeFile(join(work, name), text);
      await git(work, 'add', '-A');
      await git(work, 'commit', '-q', '--allow-empty', '-m', message);
      await git(work, 'push', '-q', '--force', 'origin', branch);
      return git(work, 'rev-parse', 'HEAD');
    },
    close: () => rm(root, { recursive: true, force: true }),
  };
}
