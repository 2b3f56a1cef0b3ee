/** The access module (server/access/) and the domain-error mapping at the HTTP edge. */
import { describe, expect, it } from 'vitest';
import { assertCanWrite, forFriend, onBehalfOf, ownAccount, requireVisible, visibleRows } from '../server/access/index.ts';
import type { Access } from '../server/core/context.ts';
import { DomainError, type DomainErrorKind } from '../server/core/errors.ts';
import { fromDomainError } from '../server/http/errors.ts';
import { createMember, UNKNOWN_ID } from './helpers/fixtures.ts';
import { useServer } from './helpers/server.ts';

const server = useServer();
const knex = () => server.deps.db.knex;
const friend: Access = { ownerId: UNKNOWN_ID, level: 'friend', bucketIds: [] };

describe('access', () => {
  it('an owner route works on the key’s own account at level owner; the operator acts with the owner’s rights', () => {
    expect(ownAccount({ kind: 'key', accountId: 'a', keyId: 'k', scopes: {} })).toEqual({ ownerId: 'a', level: 'owner' });
    expect(onBehalfOf('b')).toEqual({ ownerId: 'b', level: 'owner' });
  });

  it('visibleRows filters in SQL: the owner’s rows only, on the column of the named table', () => {
    const q = knex()('members as m').where(visibleRows(onBehalfOf('owner-1'), { table: 'm' })).select('m.id').toSQL().toNative();
    expect(q.sql).toBe('select "m"."id" from "members" as "m" where ("m"."user_id" = $1)');
    expect(q.bindings).toEqual(['owner-1']);
  });

  it('the owner sees all of its rows and none of another account’s', async () => {
    const a = await server.user();
    const b = await server.user();
    const mine = [await createMember(a.api, 'A1'), await createMember(a.api, 'A2')];
    await createMember(b.api, 'B1');
    const ids = await knex()('members').where(visibleRows(onBehalfOf(a.userId))).pluck('id');
    expect(ids.sort()).toEqual(mine.sort());
  });

  it('a friend access has no owner-wide predicate and no owner write; no friendship, no access', async () => {
    expect(() => visibleRows(friend)).toThrow(/filter by buckets/);
    expect(() => assertCanWrite(friend)).toThrow(DomainError);
    expect(() => assertCanWrite(onBehalfOf('x'))).not.toThrow();
    const a = await server.user();
    const b = await server.user();
    expect(await forFriend(knex(), a.userId, b.userId)).toBeNull();
  });

  it('what a viewer may not see is not found (the same answer as an unknown id)', () => {
    expect(requireVisible({ id: 1 }, 'Member')).toEqual({ id: 1 });
    for (const hidden of [null, undefined]) {
      try {
        requireVisible(hidden, 'Member');
        expect.unreachable();
      } catch (err) {
        expect(err).toBeInstanceOf(DomainError);
        expect(fromDomainError(err as DomainError)).toMatchObject({ status: 404, code: 'NOT_FOUND', message: 'Member not found' });
      }
    }
  });
});

describe('domain errors at the HTTP edge', () => {
  it('each kind maps to its status and envelope code; a specific code wins', () => {
    const expected: Record<DomainErrorKind, [number, string]> = {
      invalid: [400, 'BAD_REQUEST'],
      unauthenticated: [401, 'UNAUTHORIZED'],
      forbidden: [403, 'FORBIDDEN'],
      not_found: [404, 'NOT_FOUND'],
      conflict: [409, 'CONFLICT'],
      unsupported_media: [415, 'UNSUPPORTED_MEDIA_TYPE'],
      unavailable: [503, 'PRECONDITION_FAILED'],
    };
    for (const [kind, [status, code]] of Object.entries(expected)) {
      expect(fromDomainError(new DomainError(kind as DomainErrorKind, 'm'))).toMatchObject({ status, code, message: 'm' });
    }
    expect(fromDomainError(new DomainError('forbidden', 'cap', 'NOTE_LIMIT_REACHED'))).toMatchObject({ status: 403, code: 'NOTE_LIMIT_REACHED' });
  });

  it('a service’s domain error reaches the client as the envelope', async () => {
    const { api } = await server.user();
    const res = await api.GET('/api/v1/members/{memberId}', { params: { path: { memberId: UNKNOWN_ID } } });
    expect(res.response.status).toBe(404);
    expect(res.error).toEqual({ code: 'NOT_FOUND', message: 'Member not found' });
  });
});
