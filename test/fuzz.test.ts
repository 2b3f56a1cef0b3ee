/**
 * The fuzzer's own parts (scripts/fuzz), without a server: it must see every operation of the
 * contract, build requests the contract admits when it means to, recognise the invalid ones it
 * sends, and flag each kind of bad answer. `npm run fuzz` (in .ci/run) is the run against a server.
 */
import { describe, expect, it } from 'vitest';
import { loadBundledSpec, OperationIndex } from '../server/http/spec.ts';
import { checkResponse } from '../scripts/fuzz/checks.ts';
import { Contract, NOT_FUZZED, type Operation } from '../scripts/fuzz/contract.ts';
import { Fixtures } from '../scripts/fuzz/fixtures.ts';
import type { FuzzResponse } from '../scripts/fuzz/http.ts';
import { MUTATORS } from '../scripts/fuzz/mutate.ts';
import { Prng } from '../scripts/fuzz/prng.ts';
import { buildValid, judge, type Credentials, type Draft } from '../scripts/fuzz/request.ts';

const contract = new Contract();

function credentials(): Credentials {
  const fixtures = new Fixtures('http://127.0.0.1:9', 'adm_fuzz_test');
  fixtures.apiKey = 'adk_all';
  fixtures.readOnlyKey = 'adk_read';
  fixtures.noScopeKey = 'adk_none';
  const rng = new Prng('fixtures');
  for (const name of [
    'userId',
    'sideSystemId',
    'memberId',
    'subSystemId',
    'groupId',
    'folderId',
    'layoutId',
    'fieldId',
    'statusId',
    'entryId',
    'tierId',
    'sessionId',
    'schemeId',
    'fontId',
  ]) {
    fixtures.sharedIds.set(name, rng.uuid());
  }
  return { adminToken: 'adm_fuzz_test', metricsToken: 'met_fuzz_test', fixtures };
}

const creds = credentials();
const op = (id: string): Operation => contract.operations.find((o) => o.operationId === id)!;

function response(status: number, body: unknown, contentType = 'application/json'): FuzzResponse {
  const text = body === undefined ? '' : typeof body === 'string' ? body : JSON.stringify(body);
  return { status, contentType, headers: {}, body: Buffer.from(text), ms: 1 };
}

describe('the fuzzer walks the contract', () => {
  it('sees every operation the server routes but the ones left out with a reason, so a new route is fuzzed the day it exists', () => {
    const routed = new OperationIndex(loadBundledSpec()).operations
      .filter((o) => !NOT_FUZZED[o.operationId])
      .map((o) => `${o.method} ${o.path}`)
      .sort();
    expect(contract.operations.map((o) => `${o.method} ${o.path}`).sort()).toEqual(routed);
    expect(Object.keys(NOT_FUZZED)).toEqual(['streamEvents']);
  });

  it('replays the same stream for the same seed and label', () => {
    const a = new Prng('seed').fork('createMember');
    const b = new Prng('seed').fork('createMember');
    const c = new Prng('other').fork('createMember');
    const draw = (p: Prng) => Array.from({ length: 8 }, () => p.nextUint32());
    expect(draw(a)).toEqual(draw(b));
    expect(draw(new Prng('seed').fork('createMember'))).not.toEqual(draw(c));
  });
});

describe('valid requests are valid and mutations are judged by the contract', () => {
  it('every operation gets requests its own verdict admits (generator and judge agree)', async () => {
    for (const o of contract.operations) {
      const rng = new Prng('valid').fork(o.operationId);
      for (let i = 0; i < 25; i++) {
        const draft = await buildValid(contract, o, rng, creds, {});
        const verdict = judge(contract, o, draft, creds);
        expect(verdict, `${o.operationId}: ${JSON.stringify(draft).slice(0, 500)}`).toEqual({ valid: true });
      }
    }
  });

  it('a mutation that breaks a rule every operation shares is judged invalid', async () => {
    const rng = new Prng('mutations');
    const always = [
      'query.duplicate',
      'auth.missing',
      'body.missing',
      'body.missing-required',
      'body.oversize',
      'query.unknown',
    ];
    for (const o of contract.operations) {
      const draft = await buildValid(contract, o, rng, creds, {});
      for (const m of MUTATORS.filter((x) => always.includes(x.name) && x.applies(o))) {
        const mutated = m.apply({ contract, op: o, rng, creds }, draft);
        if (!mutated) continue;
        expect(judge(contract, o, mutated, creds).valid, `${o.operationId} ${m.name}`).toBe(false);
      }
    }
  });

  it('judges the shared input rules', async () => {
    const list = op('listMembersPage');
    const base: Draft = { path: {}, query: [['limit', '10']], headers: { authorization: 'Bearer adk_all' } };
    expect(judge(contract, list, base, creds)).toEqual({ valid: true });
    expect(judge(contract, list, { ...base, query: [] }, creds).valid).toBe(false); // limit is required here
    for (const query of [
      [['limit', '1e1']],
      [['limit', '0']],
      [
        ['limit', '10'],
        ['limit', '10'],
      ],
      [
        ['limit', '10'],
        ['cursor', 'a\u0000'],
      ],
      [
        ['limit', '10'],
        ['sort', 'x'],
      ],
    ] as Array<Array<[string, string]>>) {
      expect(judge(contract, list, { ...base, query }, creds).valid, JSON.stringify(query)).toBe(false);
    }
    expect(judge(contract, list, { ...base, headers: { authorization: 'Bearer adk_none' } }, creds).valid).toBe(false);
    expect(judge(contract, list, { ...base, headers: { authorization: 'Bearer adk_read' } }, creds).valid).toBe(true);
    const create = op('createMember');
    const body = {
      path: {},
      query: [],
      headers: { authorization: 'Bearer adk_all', 'content-type': 'application/json' },
    };
    expect(judge(contract, create, { ...body, json: { name: 'Robin' } }, creds).valid).toBe(true);
    expect(
      judge(
        contract,
        create,
        { ...body, headers: { ...body.headers, authorization: 'Bearer adk_read' }, json: { name: 'Robin' } },
        creds,
      ).valid,
    ).toBe(false);
    for (const bodyText of [
      '{"name":"a\\u0000"}',
      '{"name":"\\ud800"}',
      '{"name":"x","__proto__":{"a":1}}',
      '{"name":',
      '"Robin"',
    ]) {
      expect(judge(contract, create, { ...body, bodyText }, creds).valid, bodyText).toBe(false);
    }
    expect(
      judge(
        contract,
        create,
        { ...body, headers: { ...body.headers, 'content-type': 'text/plain' }, json: { name: 'Robin' } },
        creds,
      ).valid,
    ).toBe(false);
  });
});

describe('every kind of bad answer is caught', () => {
  const get = op('getMember');
  const member = op('createMember');
  const failing = (o: Operation, invalid: boolean, res: FuzzResponse, sent = '') =>
    checkResponse(contract, o, invalid, sent, res).map((f) => f.check);

  it('passes answers within the contract', () => {
    expect(failing(get, false, response(404, { code: 'NOT_FOUND', message: 'Member not found' }))).toEqual([]);
    expect(failing(member, true, response(400, { code: 'BAD_REQUEST', message: "Unknown field 'x'" }))).toEqual([]);
    expect(failing(member, false, response(201, { id: '9e8d7c6b-5a4f-4e3d-8c2b-1a0f9e8d7c6b' }))).toEqual([]);
    // getMemberMedia declares its 404 without content: an empty body is within the contract.
    expect(failing(op('getMemberMedia'), false, response(404, undefined, ''))).toEqual([]);
  });

  it('flags 5xx, undeclared statuses, 2xx for invalid input and bodies off the schema', () => {
    expect(failing(get, false, response(500, { code: 'INTERNAL', message: 'Internal server error' }))).toContain(
      'server-error',
    );
    expect(failing(get, false, response(418, { code: 'BAD_REQUEST', message: 'x' }))).toContain('undeclared-status');
    expect(failing(member, true, response(201, { id: '9e8d7c6b-5a4f-4e3d-8c2b-1a0f9e8d7c6b' }))).toEqual([
      'invalid-accepted',
    ]);
    expect(failing(member, false, response(201, { id: 'nope' }))).toEqual(['schema-mismatch']);
    expect(failing(member, false, response(201, { id: '9e8d7c6b-5a4f-4e3d-8c2b-1a0f9e8d7c6b', extra: 1 }))).toEqual([
      'schema-mismatch',
    ]);
    expect(failing(member, false, response(201, 'not json'))).toEqual(['not-json']);
    expect(failing(member, false, response(201, '<p>hi</p>', 'text/html'))).toEqual(['media-type']);
    expect(failing(op('deleteMember'), false, response(204, 'x'))).toEqual(['body-on-empty-status']);
  });

  it('flags errors outside the envelope and errors that show internals', () => {
    expect(failing(get, false, response(404, { error: 'not found' }))).toEqual(['schema-mismatch', 'error-envelope']);
    expect(failing(get, false, response(404, 'Not Found', 'text/plain'))).toEqual(['media-type', 'error-envelope']);
    const leaks = [
      'Error: boom\n    at Object.handler (/work/app/server/features/members/service.ts:12:5)',
      'insert into "members" ("id") values ($1) - duplicate key value violates unique constraint "members_pkey"',
      'select * from members where id = $1',
      "ENOENT: no such file or directory, open '/var/lib/app/objects/u/x'",
      "TypeError: Cannot read properties of undefined (reading 'id')",
      'relation "members" does not exist',
    ];
    for (const message of leaks) {
      expect(failing(get, false, response(404, { code: 'NOT_FOUND', message })), message).toContain('leak');
    }
    // Text the request itself carried is not a leak when an error quotes it back.
    expect(
      failing(
        member,
        true,
        response(400, { code: 'BAD_REQUEST', message: "Unknown field 'select 1 from x'" }),
        'select 1 from x',
      ),
    ).toEqual([]);
  });
});
