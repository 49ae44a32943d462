// Every error code in the registry is documented, so clients can rely on the list in docs/errors.md.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { ERROR_CODES, EdgeError, fail } from '../../src/shared/errors.ts';

describe('error registry', () => {
  const doc = readFileSync(new URL('../../docs/errors.md', import.meta.url), 'utf8');

  for (const [code, [status]] of Object.entries(ERROR_CODES)) {
    it(`documents ${code} with status ${status}`, () => {
      assert.match(doc, new RegExp(`\\| \`${code}\` \\| ${status} \\|`));
    });
  }

  it('builds errors carrying status, code and the uniform body', () => {
    const err = fail.not_found('endpoint not found', { id: 1 });
    assert.ok(err instanceof EdgeError);
    assert.equal(err.status, 404);
    assert.deepEqual(err.toBody(), { error: 'endpoint not found', code: 'not_found', detail: { id: 1 } });
  });
});
