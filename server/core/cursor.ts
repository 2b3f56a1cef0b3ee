/**
 * Opaque keyset cursors: the sort-key values of the last row of a page, as base64url JSON. A
 * cursor that does not decode to the expected shape is the caller's mistake (400), never a 500.
 */
import { badRequest } from './errors.ts';

export type CursorField = 'string' | 'integer' | 'uuid';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

export function encodeCursor(values: Array<string | number>): string {
  return Buffer.from(JSON.stringify(values), 'utf8').toString('base64url');
}

export function decodeCursor<T extends Array<string | number>>(cursor: string, shape: CursorField[]): T {
  let values: unknown;
  try {
    values = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8'));
  } catch {
    values = undefined;
  }
  const ok =
    Array.isArray(values) &&
    values.length === shape.length &&
    shape.every((field, i) => {
      const v = values[i];
      if (field === 'integer') return Number.isSafeInteger(v);
      if (field === 'uuid') return typeof v === 'string' && UUID.test(v);
      return typeof v === 'string' && v.length <= 200;
    });
  if (!ok) throw badRequest('cursor is invalid; pass the nextCursor of the previous page');
  return values as T;
}
