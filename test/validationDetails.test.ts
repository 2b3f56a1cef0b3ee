/**
 * A 400 for invalid input lists every problem in `details` (where it is, the rule it breaks, in
 * words), while `message` stays the first problem as the server has always worded it.
 */
import { randomUUID } from 'node:crypto';
import { describe, expect, expectTypeOf, it } from 'vitest';
import type { ApiError, ValidationProblem } from '../client/index.ts';
import { Contract, responseFor } from '../scripts/fuzz/contract.ts';
import {
  cachedVerdicts,
  documentChecksBuilt,
  parameterMutatorSkips,
  routeMatcherKeys,
  validatorsDocumentCheck,
  validatorsPathToRegexp,
} from '../server/http/validation.ts';
import { bearer, jsonHeaders, type TestServer, useServer } from './helpers/server.ts';

const server = useServer();
const contract = new Contract();

interface Envelope {
  code: string;
  message: string;
  details?: ValidationProblem[];
}

/** A GET with the key: its status, its body, and how far `counter` moved meanwhile. */
async function getCounting(at: TestServer, apiKey: string, path: string, counter: () => number) {
  const before = counter();
  const res = await at.fetch(path, { headers: bearer(apiKey) });
  return { status: res.status, body: (await res.json()) as Envelope, counted: counter() - before };
}

/** The 400's body, checked against the schema the operation declares for its 400. */
async function refused(operationId: string, res: Response): Promise<Envelope> {
  expect(res.status).toBe(400);
  const body = (await res.json()) as Envelope;
  const op = contract.operations.find((o) => o.operationId === operationId)!;
  const schema = responseFor(op, 400)!.media.find((m) => m.contentType === 'application/json')!.schema!;
  expect(contract.check(schema, body)).toEqual({ ok: true });
  return body;
}

describe('every validation problem, with where it is', () => {
  it('a body: missing, wrong type, unknown, not in the enum, not a UUID — all of them', async () => {
    const { apiKey } = await server.user();
    const res = await server.fetch('/api/v1/privacy-buckets/bulk/members', {
      method: 'POST',
      headers: jsonHeaders(apiKey),
      body: JSON.stringify({ mode: 'sometimes', memberIds: [5, 'not-a-uuid'], colour: 'red', 'a/b~c': 1 }),
    });
    const body = await refused('bulkPrivacyBucketMembers', res);
    expect(body.code).toBe('BAD_REQUEST');
    expect(body.message).toBe('bucketId is required');
    expect(body.details).toEqual(
      expect.arrayContaining([
        { in: 'body', pointer: '/bucketId', rule: 'required', message: 'bucketId is required' },
        { in: 'body', pointer: '/colour', rule: 'additionalProperties', message: "Unknown field 'colour'" },
        // An unknown name with `/` and `~` in it, escaped as a JSON Pointer.
        { in: 'body', pointer: '/a~1b~0c', rule: 'additionalProperties', message: expect.any(String) },
        { in: 'body', pointer: '/mode', rule: 'enum', message: 'mode must be one of: add, remove' },
        { in: 'body', pointer: '/memberIds/0', rule: 'type', message: 'memberIds[0] must be string' },
        { in: 'body', pointer: '/memberIds/1', rule: 'pattern', message: 'memberIds[1] must be a valid UUID' },
      ]),
    );
    expect(body.details).toHaveLength(6);
  });

  it('a query: a value out of bounds, an unknown and an empty parameter', async () => {
    const { apiKey } = await server.user();
    const res = await server.fetch('/api/v1/members/page?limit=500&verbose=1&cursor=', { headers: bearer(apiKey) });
    const body = await refused('listMembersPage', res);
    // The validator's own query check came first and still words the message.
    expect(body.message).toBe("Unknown query parameter 'verbose'");
    expect(body.details).toEqual([
      { in: 'query', pointer: 'verbose', rule: 'additionalProperties', message: "Unknown query parameter 'verbose'" },
      {
        in: 'query',
        pointer: 'cursor',
        rule: 'allowEmptyValue',
        message: "Empty value found for query parameter 'cursor'",
      },
      { in: 'query', pointer: 'limit', rule: 'maximum', message: 'limit must be <= 200' },
      { in: 'query', pointer: 'cursor', rule: 'minLength', message: 'cursor must NOT have fewer than 1 characters' },
    ]);
  });

  it('a path and a body: the message is as before (the first of each), the details have both and more', async () => {
    const { apiKey } = await server.user();
    const res = await server.fetch('/api/v1/members/not-a-uuid', {
      method: 'PATCH',
      headers: jsonHeaders(apiKey),
      body: JSON.stringify({ name: 5, zz: 1 }),
    });
    const body = await refused('updateMember', res);
    expect(body.message).toBe("memberId must be a valid UUID; Unknown field 'zz'");
    expect(body.details).toEqual([
      { in: 'path', pointer: 'memberId', rule: 'pattern', message: 'memberId must be a valid UUID' },
      { in: 'body', pointer: '/zz', rule: 'additionalProperties', message: "Unknown field 'zz'" },
      { in: 'body', pointer: '/name', rule: 'type', message: 'name must be string' },
    ]);
  });

  it('nested values are named by their pointer; array rules by the array', async () => {
    const { apiKey } = await server.user();
    const res = await server.fetch('/api/v1/members', {
      method: 'POST',
      headers: jsonHeaders(apiKey),
      body: JSON.stringify({ name: 'x', aboutTags: ['a', 'a', 5, ''] }),
    });
    const body = await refused('createMember', res);
    expect(body.message).toBe('aboutTags[2] must be string');
    expect(body.details?.map(({ pointer, rule }) => [pointer, rule])).toEqual([
      ['/aboutTags/2', 'type'],
      ['/aboutTags/3', 'minLength'],
      ['/aboutTags', 'uniqueItems'],
    ]);
  });

  it('the input rules checked before the contract list each of their problems too', async () => {
    const { apiKey } = await server.user();
    const res = await server.fetch('/api/v1/members', {
      method: 'POST',
      headers: jsonHeaders(apiKey),
      body: '{"name":"x\\u0000","tags":[["\\ud800"]]}',
    });
    const body = await refused('createMember', res);
    expect(body).toEqual({
      code: 'BAD_REQUEST',
      message: 'name must not contain the NUL character (U+0000)',
      details: [
        {
          in: 'body',
          pointer: '/name',
          rule: 'nulCharacter',
          message: 'name must not contain the NUL character (U+0000)',
        },
        {
          in: 'body',
          pointer: '/tags/0/0',
          rule: 'unpairedSurrogate',
          message: 'tags[0][0] must not contain an unpaired UTF-16 surrogate (invalid Unicode)',
        },
      ],
    });
    const query = await server.fetch('/api/v1/members/page?limit=1e2&limit=3&cursor=a%00', { headers: bearer(apiKey) });
    expect((await refused('listMembersPage', query)).details).toEqual([
      { in: 'query', pointer: 'limit', rule: 'singleValue', message: 'limit must be given at most once' },
      {
        in: 'query',
        pointer: 'cursor',
        rule: 'nulCharacter',
        message: 'cursor must not contain the NUL character (U+0000)',
      },
    ]);
  });

  it('at most 100 problems are listed', async () => {
    const { apiKey } = await server.user();
    const res = await server.fetch('/api/v1/members', {
      method: 'POST',
      headers: jsonHeaders(apiKey),
      body: JSON.stringify(Object.fromEntries(Array.from({ length: 150 }, (_, i) => [`unknown${i}`, i]))),
    });
    const body = await refused('createMember', res);
    expect(body.message).toBe('name is required');
    expect(body.details).toHaveLength(100);
  });

  it('a business rule refused by a service carries no details', async () => {
    const { api } = await server.user();
    const res = await api.PATCH('/api/v1/terminology', { body: { member: { plural: 'a'.repeat(41) } } });
    expect(res.response.status).toBe(400);
    expect(res.error).toEqual({
      code: 'BAD_REQUEST',
      message: 'member.plural must be at most 40 characters after trimming (got 41)',
    });
  });

  it('the typed client sees `details` on the error', async () => {
    const { api } = await server.user();
    const res = await api.GET('/api/v1/members/page', {
      params: { query: { limit: 500 } },
    });
    expectTypeOf(res.error).toEqualTypeOf<ApiError | undefined>();
    expectTypeOf<ApiError['details']>().toEqualTypeOf<ValidationProblem[] | undefined>();
    expectTypeOf<ValidationProblem['in']>().toEqualTypeOf<'body' | 'query' | 'path' | 'header'>();
    expect(res.error?.details).toEqual([
      { in: 'query', pointer: 'limit', rule: 'maximum', message: 'limit must be <= 200' },
    ]);
  });

  it('every operation that declares a 400 accepts an envelope with details', () => {
    const sample = {
      code: 'BAD_REQUEST',
      message: 'limit must be <= 100',
      details: [{ in: 'query', pointer: 'limit', rule: 'maximum', message: 'limit must be <= 100' }],
    };
    const declaring = contract.operations.filter((op) => responseFor(op, 400));
    expect(declaring.length).toBeGreaterThan(100);
    for (const op of declaring) {
      for (const media of responseFor(op, 400)!.media.filter((m) => m.contentType === 'application/json'))
        expect(contract.check(media.schema!, sample), op.operationId).toEqual({ ok: true });
    }
    // The schema is strict: a detail without a location is refused.
    const [first] = declaring;
    const schema = responseFor(first!, 400)!.media[0]!.schema!;
    expect(contract.check(schema, { ...sample, details: [{ pointer: '', rule: 'x', message: 'x' }] }).ok).toBe(false);
  });
});

describe("the validator's route matchers", () => {
  it('are compiled once per route, not on every request (cdimascio/express-openapi-validator#1217)', async () => {
    const { apiKey } = await server.user();
    const route = '--/api/v1/members/:memberId';
    for (const id of ['not-a-uuid', '2f3e4d5c-6b7a-4980-a1b2-c3d4e5f60718']) {
      const res = await server.fetch(`/api/v1/members/${id}`, { headers: bearer(apiKey) });
      // The validator matched the route: a malformed id is its 400, a well-formed unknown one the handler's 404.
      expect(res.status).toBe(id === 'not-a-uuid' ? 400 : 404);
    }
    expect(routeMatcherKeys()).toContain(route);
    const { pathToRegexp } = validatorsPathToRegexp();
    const options = { sensitive: false, strict: false };
    const matcher = pathToRegexp('/api/v1/members/:memberId', options);
    expect(pathToRegexp('/api/v1/members/:memberId', { ...options })).toBe(matcher);
    expect(matcher.regexp.exec('/api/v1/members/abc')?.[1]).toBe('abc');
    // Other options (express's router) compile as before.
    expect(pathToRegexp('/api/v1/members/:memberId', { ...options, end: false })).not.toBe(
      pathToRegexp('/api/v1/members/:memberId', { ...options, end: false }),
    );
  });
});

describe("the validator's parameter mutator", () => {
  it('is skipped only without a query string on an operation whose parameters are all plain path parameters', async () => {
    const { apiKey } = await server.user();
    const unknown = '2f3e4d5c-6b7a-4980-a1b2-c3d4e5f60718';
    const get = (path: string) => getCounting(server, apiKey, path, parameterMutatorSkips);
    // getMember: one path parameter (a uuid). Skipped, and the id is still validated after it.
    expect(await get(`/api/v1/members/${unknown}`)).toMatchObject({ status: 404, counted: 1 });
    // Refused: the validator, then the instance that lists the details, each skipping it.
    const malformed = await get('/api/v1/members/not-a-uuid');
    expect(malformed).toMatchObject({ status: 400, counted: 2 });
    expect(malformed.body.details).toEqual([
      { in: 'path', pointer: 'memberId', rule: 'pattern', message: 'memberId must be a valid UUID' },
    ]);
    // A query string runs it (and the unknown parameter is refused as before).
    const queried = await get(`/api/v1/members/${unknown}?x=1`);
    expect(queried).toMatchObject({ status: 400, counted: 0 });
    expect(queried.body.message).toContain("Unknown query parameter 'x'");
    // An operation with query parameters always runs it, with or without a query string.
    expect(await get('/api/v1/front/history')).toMatchObject({ status: 200, counted: 0 });
    expect(await get('/api/v1/members/page?limit=5')).toMatchObject({ status: 200, counted: 0 });
  });
});

describe('a verdict that depends on the request line alone', () => {
  // As in production: responses not validated (with them, every request runs the validator).
  const production = useServer({ env: { VALIDATE_RESPONSES: 'false' } });

  it('is given by the validator once per line it passes; refusals, query strings and bodies run it each time', async () => {
    const { apiKey } = await production.user();
    const member = randomUUID();
    const get = (path: string) => getCounting(production, apiKey, path, cachedVerdicts);
    // getMember: its one parameter is a path parameter. The first request runs the validator, the
    // same line again is let through on its verdict, and the handler still answers it.
    expect(await get(`/api/v1/members/${member}`)).toMatchObject({ status: 404, counted: 0 });
    expect(await get(`/api/v1/members/${member}`)).toMatchObject({ status: 404, counted: 1 });
    // Another id is another line.
    expect(await get(`/api/v1/members/${randomUUID()}`)).toMatchObject({ status: 404, counted: 0 });
    // A refusal is never kept: refused again, with its details.
    for (let i = 0; i < 2; i++) {
      const refusedAgain = await get('/api/v1/members/not-a-uuid-either');
      expect(refusedAgain).toMatchObject({ status: 400, counted: 0 });
      expect(refusedAgain.body.details).toEqual([
        { in: 'path', pointer: 'memberId', rule: 'pattern', message: 'memberId must be a valid UUID' },
      ]);
    }
    // A query string on a line that passed runs the validator, which refuses the unknown parameter.
    const queried = await get(`/api/v1/members/${member}?x=1`);
    expect(queried).toMatchObject({ status: 400, counted: 0 });
    expect(queried.body.message).toContain("Unknown query parameter 'x'");
    // An operation with query parameters is validated on every request.
    expect(await get('/api/v1/front/history')).toMatchObject({ status: 200, counted: 0 });
    expect(await get('/api/v1/front/history')).toMatchObject({ status: 200, counted: 0 });
    // So is one that takes a body: here the body is refused each time.
    for (let i = 0; i < 2; i++) {
      const before = cachedVerdicts();
      const res = await production.fetch(`/api/v1/members/${member}`, {
        method: 'PATCH',
        headers: jsonHeaders(apiKey),
        body: JSON.stringify({ name: 5 }),
      });
      expect([res.status, cachedVerdicts() - before]).toEqual([400, 0]);
    }
  });

  it('is not kept where responses are validated: the validator checks each response', async () => {
    const { apiKey } = await server.user();
    const path = `/api/v1/members/${randomUUID()}`;
    for (let i = 0; i < 2; i++) {
      const before = cachedVerdicts();
      expect((await server.fetch(path, { headers: bearer(apiKey) })).status).toBe(404);
      expect(cachedVerdicts() - before).toBe(0);
    }
  });
});

describe("the validator's check of its document against the OpenAPI schema", () => {
  it('is built once per process and shared by every path’s validator, and still refuses an invalid document', async () => {
    const { apiKey } = await server.user();
    // Two paths, each a validator of its own (and a second one for the 400's details).
    expect((await server.fetch('/api/v1/members/not-a-uuid', { headers: bearer(apiKey) })).status).toBe(400);
    expect((await server.fetch('/api/v1/members/page?limit=many', { headers: bearer(apiKey) })).status).toBe(400);
    expect(documentChecksBuilt()).toBe(1);
    const { OpenAPISchemaValidator } = validatorsDocumentCheck();
    const options = { version: '3.1.0', validateApiSpec: true };
    const check = new OpenAPISchemaValidator(options);
    expect(new OpenAPISchemaValidator({ ...options })).toBe(check);
    expect(check.validate({ openapi: '3.1.0' }).errors.length).toBeGreaterThan(0);
    expect(check.validate({ openapi: '3.1.0', info: { title: 't', version: '1' }, paths: {} }).errors).toEqual([]);
  });
});
