// The error registry: docs/errors.md and the registry list the same codes with the same statuses, errors are built only
// through the registry's helpers, and the bodies the API contract fixes for some errors instead of the uniform one.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { ERROR_CODES, EdgeError, fail, invalid, quotaExceededAsText, verificationRequired } from '../../src/shared/errors.ts';

const root = fileURLToPath(new URL('../../', import.meta.url));

/** Every `| \`code\` | status |` row of docs/errors.md's tables. */
function documentedCodes(): Map<string, number> {
  const doc = readFileSync(join(root, 'docs/errors.md'), 'utf8');
  const rows = new Map<string, number>();
  for (const [, code, status] of doc.matchAll(/^\| `([a-z0-9_]+)` \| (\d{3}) \|/gm)) {
    assert.ok(!rows.has(code), `docs/errors.md lists ${code} twice`);
    rows.set(code, Number(status));
  }
  return rows;
}

describe('error registry and docs/errors.md', () => {
  const documented = documentedCodes();

  it('documents every registered code with its status', () => {
    const missing = Object.entries(ERROR_CODES)
      .filter(([code, [status]]) => documented.get(code) !== status)
      .map(([code, [status]]) => `${code} ${status} (docs: ${documented.get(code) ?? 'absent'})`);
    assert.deepEqual(missing, []);
  });

  it('documents no code the registry does not have', () => {
    const unknown = [...documented.keys()].filter((code) => !(code in ERROR_CODES));
    assert.deepEqual(unknown, []);
  });

  it('reads both tables of the page: the control API codes and the edge pages', () => {
    assert.equal(documented.get('verification_required'), 403);
    assert.equal(documented.get('endpoint_not_found'), 404);
  });
});

describe('EdgeError is constructed only through the registry', () => {
  const sources = readdirSync(join(root, 'src'), { recursive: true, encoding: 'utf8' })
    .filter((file) => /\.[cm]?[jt]s$/.test(file))
    .map((file) => relative(root, join(root, 'src', file)).split('\\').join('/'));

  const constructions = new Map<string, number>();
  for (const file of sources) {
    if (file === 'src/shared/errors.ts') continue;
    const count = readFileSync(join(root, file), 'utf8').match(/new\s+EdgeError\s*\(/g)?.length ?? 0;
    if (count > 0) constructions.set(file, count);
  }

  it('finds the sources it checks', () => {
    assert.ok(sources.includes('src/shared/errors.ts') && sources.includes('src/control/http.ts'), sources.slice(0, 5).join(', '));
  });

  it('has no `new EdgeError(` outside src/shared/errors.ts', () => {
    const offenders = [...constructions].map(([file, count]) => `${file} (${count})`);
    assert.deepEqual(offenders, [], 'use fail.<code>(message, detail), invalid(field, reason) or a registry helper (withBody for the bodies docs/errors.md lists as fixed differently)');
  });
});

describe('registry helpers', () => {
  it('builds errors carrying status, code and the uniform body', () => {
    const err = fail.not_found('endpoint not found', { id: 1 });
    assert.ok(err instanceof EdgeError);
    assert.equal(err.status, 404);
    assert.deepEqual(err.toBody(), { error: 'endpoint not found', code: 'not_found', detail: { id: 1 } });
    assert.deepEqual(fail.conflict().toBody(), { error: 'Conflict', code: 'conflict' });
  });

  it('gives a validation error the detail {field, reason}, extra keys after them', () => {
    assert.deepEqual(invalid('path', 'must start with "/"').toBody(), {
      error: 'Invalid path: must start with "/"',
      code: 'invalid_request',
      detail: { field: 'path', reason: 'must start with "/"' },
    });
    assert.deepEqual(invalid('ports', 'too many', { limit: 3 }).detail, { field: 'ports', reason: 'too many', limit: 3 });
  });

  it('answers the verification_required body the API contract fixes: error, gate_type, feature, message (and code)', () => {
    const err = verificationRequired('email_verified', 'dedicated_ports', 'Verify your e-mail first');
    assert.equal(err.status, 403);
    assert.deepEqual(err.toBody(), {
      error: 'verification_required',
      code: 'verification_required',
      gate_type: 'email_verified',
      feature: 'dedicated_ports',
      message: 'Verify your e-mail first',
    });
  });

  it('answers the permanent-quota refusal on promote as plain text, keeping its detail for logs', () => {
    const err = quotaExceededAsText('Permanent endpoint limit reached: 1 of 1', { limit: 1 });
    assert.deepEqual([err.status, err.code, err.toBody(), err.detail], [403, 'quota_exceeded', 'Permanent endpoint limit reached: 1 of 1', { limit: 1 }]);
  });

  it('withBody patches the uniform body (null removes a key) and leaves the original error as it was', () => {
    const original = invalid('interval_seconds', 'too small');
    const patched = original.withBody({ error: 'one string', code: null, detail: null });
    assert.deepEqual(patched.toBody(), { error: 'one string' });
    assert.deepEqual([patched.status, patched.code, patched.message], [400, 'invalid_request', original.message]);
    assert.deepEqual(Object.keys(original.toBody()), ['error', 'code', 'detail']);
  });
});
