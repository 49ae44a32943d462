// The registration pages reading the control API's answer (src/edge/registration/control-answer.ts): the new
// client, the form again with why, a refusal with the registry's code, or an unexpected status; odd bodies too.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { controlMessage, registrationOutcome } from '../../src/edge/registration/control-answer.ts';

const RESULT = { client_id: 7, identifier: 'bob', status: 'active', registration_source: 'invite', feed_version: 12 };

describe('registration: the control API answer', () => {
  it('200 with a result is registered; 200 without one is unexpected', () => {
    assert.deepEqual(registrationOutcome({ status: 200, body: RESULT }, 'invite'), { kind: 'registered', result: RESULT });
    assert.deepEqual(registrationOutcome({ status: 200, body: { client_id: '7' } }, 'invite'), { kind: 'unexpected', status: 200 });
  });

  it('fixable refusals show the form again; the rest refuse with the right code', () => {
    const invalid = { error: 'Bad request', code: 'bad_request', detail: { field: 'username', reason: 'is taken' } };
    assert.deepEqual(registrationOutcome({ status: 400, body: invalid }, 'invite'), { kind: 'form', status: 400, code: 'registration_invalid', text: 'Bad request (username: is taken)' });
    assert.equal((registrationOutcome({ status: 409, body: { code: 'already_exists' } }, 'self') as { kind: string }).kind, 'form');
    assert.deepEqual(registrationOutcome({ status: 404, body: {} }, 'invite'), { kind: 'refused', code: 'invite_not_found', text: 'the registration was refused' });
    assert.equal((registrationOutcome({ status: 404, body: {} }, 'self') as { code: string }).code, 'self_registration_disabled');
    assert.equal((registrationOutcome({ status: 410, body: {} }, 'invite') as { code: string }).code, 'invite_expired');
    assert.equal((registrationOutcome({ status: 401, body: {} }, 'self') as { code: string }).code, 'login_required');
    assert.deepEqual(registrationOutcome({ status: 500, body: 'boom' }, 'self'), { kind: 'unexpected', status: 500 });
  });

  it('a control code is kept only when the registry has it with that status', () => {
    assert.equal((registrationOutcome({ status: 403, body: { code: 'no_such_code' } }, 'self') as { code: string }).code, 'self_registration_disabled');
    assert.equal((registrationOutcome({ status: 403, body: { code: 'invite_expired' } }, 'self') as { code: string }).code, 'self_registration_disabled', 'invite_expired is 410, not 403');
  });

  it('odd bodies read as a message, never a throw', () => {
    assert.equal(controlMessage(null).text, 'the registration was refused');
    assert.equal(controlMessage('x'.repeat(1000)).text.length, 300);
    assert.equal(controlMessage({ error: 5, detail: 'plain' }).text, 'the registration was refused: plain');
    assert.equal(controlMessage({ error: 'E', detail: { reason: 'r' } }).text, 'E: r');
  });
});
