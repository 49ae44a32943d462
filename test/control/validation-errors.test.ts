// The control API's mapping of validator and parser errors onto the registry: every part of a request (body, path,
// query, headers) gives the detail {field, reason}, and the health-check operations' one-string 400 is built from it.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { ValueErrorType } from '@sinclair/typebox/errors';
import { errorStringOn400, parseJsonBody, toEdgeError } from '../../src/control/http.ts';
import { EdgeError, fail, invalid } from '../../src/shared/errors.ts';

/** A validation error as fastify hands it over from the validator compiler. */
function validation(context: string, instancePath: string, type: ValueErrorType, message: string) {
  return Object.assign(new Error(message), { validation: [{ instancePath, type, message }], validationContext: context });
}

describe('validation errors carry {field, reason}', () => {
  it('maps each part of the request to its code, naming the field as a dotted path', () => {
    const cases: Array<[ReturnType<typeof validation>, string, unknown]> = [
      [validation('body', '/conditions/0/value', ValueErrorType.String, 'Expected string'), 'invalid_request', { field: 'conditions.0.value', reason: 'Expected string' }],
      [validation('body', '/surprise', ValueErrorType.ObjectAdditionalProperties, 'Unexpected property'), 'unknown_field', { field: 'surprise', reason: 'unknown field' }],
      [validation('body', '/plan', ValueErrorType.ObjectRequiredProperty, 'Expected required property'), 'invalid_request', { field: 'plan', reason: 'missing required field' }],
      [validation('body', '', ValueErrorType.Object, 'Expected object'), 'invalid_request', { field: '(body)', reason: 'Expected object' }],
      [validation('params', '/id', ValueErrorType.String, 'Expected string'), 'invalid_id', { field: 'id', reason: 'Expected string' }],
      [validation('querystring', '/page_size', ValueErrorType.Integer, 'Expected integer'), 'invalid_query', { field: 'page_size', reason: 'Expected integer' }],
      [validation('headers', '/x-account-id', ValueErrorType.String, 'Expected string'), 'bad_request', { field: 'x-account-id', reason: 'Expected string' }],
    ];
    for (const [err, code, detail] of cases) {
      const mapped = toEdgeError(err);
      assert.deepEqual([mapped.status, mapped.code, mapped.detail], [400, code, detail], err.message);
    }
  });

  it('gives invalid JSON and forbidden keys the same shape', () => {
    let parseError: unknown;
    try {
      JSON.parse('{"a":');
    } catch (err) {
      parseError = err;
    }
    const json = toEdgeError(parseError);
    assert.equal(json.code, 'invalid_json');
    assert.equal((json.detail as { field: string }).field, '(body)');
    assert.equal(typeof (json.detail as { reason: string }).reason, 'string');
    assert.throws(() => parseJsonBody('{"a": {"__proto__": {}}}'), (err: EdgeError) => err.code === 'invalid_request' && (err.detail as { reason: string }).reason === 'forbidden key');
  });

  it('keeps registry errors as they are, and answers anything unknown as internal', () => {
    const own = fail.conflict('taken');
    assert.equal(toEdgeError(own), own);
    assert.equal(toEdgeError(new TypeError('boom')).code, 'internal');
  });
});

describe('the health-check operations’ 400: one error string, through the registry', () => {
  const rethrown = (err: unknown): EdgeError => {
    try {
      errorStringOn400(err);
    } catch (out) {
      return out as EdgeError;
    }
    assert.fail('errorStringOn400 returned');
  };

  it('answers {error} alone, carrying the field and reason the uniform body would have', () => {
    const schema = rethrown(validation('body', '/interval_seconds', ValueErrorType.Integer, 'Expected integer'));
    assert.deepEqual(schema.toBody(), { error: 'Invalid request body: interval_seconds: Expected integer' });
    assert.equal(schema.status, 400);
    assert.deepEqual(rethrown(invalid('path', 'must start with "/"')).toBody(), { error: 'Invalid path: must start with "/"' });
    assert.deepEqual(rethrown(fail.invalid_request('No fields to update')).toBody(), { error: 'No fields to update' });
    assert.deepEqual(rethrown(validation('body', '', ValueErrorType.Object, 'Expected object')).toBody(), { error: 'Invalid request body: Expected object' });
  });

  it('leaves other statuses with the uniform body', () => {
    assert.deepEqual(rethrown(fail.forbidden('not yours')).toBody(), { error: 'not yours', code: 'forbidden' });
  });
});
