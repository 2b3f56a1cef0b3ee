/**
 * Recognises failures that mean "the database is not there" rather than "this statement is
 * wrong", so the API can answer 503 PRECONDITION_FAILED (retry later) instead of 500.
 */

/** SQLSTATEs of an unreachable or unusable database (class 08 is matched by prefix). */
const SQLSTATES = new Set([
  '57P01', // admin_shutdown: the server terminated the connection
  '57P02', // crash_shutdown
  '57P03', // cannot_connect_now: starting up or shutting down
  '53300', // too_many_connections
  '3D000', // invalid_catalog_name: the configured database does not exist
  '42P01', // undefined_table: the schema is missing (migrations not applied)
]);

/** Socket errors of the `pg` driver when the server cannot be reached. */
const SOCKET_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ETIMEDOUT',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'ENOTFOUND',
  'EAI_AGAIN',
  'EPIPE',
]);

/** Messages of the pool (knex/tarn) and driver when no connection can be had. */
const MESSAGES = [
  /^Unable to acquire a connection/,
  /Timeout acquiring a connection/,
  /^Connection terminated/,
  /connection error/i,
];

export function isDatabaseUnavailable(err: unknown): boolean {
  if (!err || typeof err !== 'object') return false;
  const { code, name, message } = err as { code?: unknown; name?: unknown; message?: unknown };
  if (name === 'KnexTimeoutError') return true;
  if (typeof code === 'string' && (code.startsWith('08') || SQLSTATES.has(code) || SOCKET_CODES.has(code))) return true;
  return typeof message === 'string' && MESSAGES.some((re) => re.test(message));
}
