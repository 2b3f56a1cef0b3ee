/**
 * Operator CLI over the admin API. Prints the JSON response; exits 1 with the error envelope on failure.
 *
 *   npm run admin -- create-account --username aurora [--display-name "Aurora"] [--plan free|pro|pro_plus] [--admin]
 *                                   [--pronouns ..] [--status ..] [--timezone ..] [--country ..] [--about ..]
 *   npm run admin -- create-key --user <userId> (--scopes members:read,front:read_write | --all-scopes) [--name ..] [--expires-at <ISO time or epoch ms>]
 *   npm run admin -- revoke-key --key <keyId>
 *   npm run admin -- list-accounts [--prefix <username prefix>] [--limit n] [--cursor c]
 *   npm run admin -- show-account --user <userId>
 *   npm run admin -- list-keys --user <userId> [--limit n] [--cursor c]
 *   npm run admin -- delete-account --user <userId> --yes
 *
 * Server: --url, else ADMIN_URL, else http://127.0.0.1:$PORT (3000). Token: --token, else ADMIN_TOKEN,
 * else the token the embedded default keeps in $DATA_DIR/admin-token.
 */
import { existsSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { createApiClient, type components } from '../client/index.ts';
import { SCOPES } from '../server/http/spec.ts';

type ScopeMap = components['schemas']['ScopeMap'];

const USAGE = `usage:
  npm run admin -- create-account --username <name> [--display-name <text>] [--plan free|pro|pro_plus] [--admin]
                                  [--pronouns <text>] [--status <text>] [--timezone <tz>] [--country <text>] [--about <markdown>]
  npm run admin -- create-key --user <userId> (--scopes scope:level,... | --all-scopes) [--name <text>] [--expires-at <ISO time | epoch ms>]
  npm run admin -- revoke-key --key <keyId>
  npm run admin -- list-accounts [--prefix <username prefix>] [--limit <1-200>] [--cursor <nextCursor>]
  npm run admin -- show-account --user <userId>
  npm run admin -- list-keys --user <userId> [--limit <1-200>] [--cursor <nextCursor>]
  npm run admin -- delete-account --user <userId> --yes      (deletes the account and all its data)
common options: --url <server origin> --token <admin token>`;

function fail(message: string): never {
  console.error(message);
  process.exit(2);
}

const { positionals, values } = parseArgs({
  allowPositionals: true,
  options: {
    url: { type: 'string' },
    token: { type: 'string' },
    username: { type: 'string' },
    'display-name': { type: 'string' },
    plan: { type: 'string' },
    admin: { type: 'boolean' },
    pronouns: { type: 'string' },
    status: { type: 'string' },
    timezone: { type: 'string' },
    country: { type: 'string' },
    about: { type: 'string' },
    user: { type: 'string' },
    scopes: { type: 'string' },
    'all-scopes': { type: 'boolean' },
    name: { type: 'string' },
    key: { type: 'string' },
    'expires-at': { type: 'string' },
    prefix: { type: 'string' },
    limit: { type: 'string' },
    cursor: { type: 'string' },
    yes: { type: 'boolean' },
    help: { type: 'boolean', short: 'h' },
  },
});

const command = positionals[0];
if (values.help || !command) {
  console.log(USAGE);
  process.exit(values.help ? 0 : 2);
}

function adminToken(): string {
  if (values.token) return values.token;
  if (process.env.ADMIN_TOKEN) return process.env.ADMIN_TOKEN;
  const file = join(resolve(process.env.DATA_DIR || './data'), 'admin-token');
  if (existsSync(file)) return readFileSync(file, 'utf8').trim();
  return fail('No admin token: pass --token, set ADMIN_TOKEN, or run where DATA_DIR holds the generated admin-token');
}

function parseScopes(): ScopeMap {
  if (values['all-scopes']) return Object.fromEntries(SCOPES.map((s) => [s, 'read_write']));
  if (!values.scopes) return fail('create-key needs --scopes scope:level,... or --all-scopes');
  const scopes: Record<string, string> = {};
  for (const part of values.scopes
    .split(',')
    .map((p) => p.trim())
    .filter(Boolean)) {
    const [scope, level = 'read'] = part.split(':');
    scopes[scope!] = level;
  }
  return scopes as ScopeMap; // the server validates names and levels
}

function parseTime(raw: string): number {
  const ms = /^\d+$/.test(raw) ? Number(raw) : Date.parse(raw);
  if (!Number.isSafeInteger(ms))
    return fail(`--expires-at must be an ISO time (2027-01-31T00:00:00Z) or epoch milliseconds, got "${raw}"`);
  return ms;
}

function parseLimit(): number | undefined {
  if (values.limit === undefined) return undefined;
  if (!/^\d+$/.test(values.limit)) return fail(`--limit must be a whole number, got "${values.limit}"`);
  return Number(values.limit);
}

function userId(command: string): string {
  return values.user ?? fail(`${command} needs --user <userId>`);
}

const baseUrl = values.url ?? process.env.ADMIN_URL ?? `http://127.0.0.1:${process.env.PORT || 3000}`;
const api = createApiClient({ baseUrl, apiKey: adminToken() });

async function run(): Promise<{ data?: unknown; error?: unknown; response: Response }> {
  switch (command) {
    case 'create-account': {
      if (!values.username) fail('create-account needs --username');
      const body: components['schemas']['CreateAccountRequest'] = { username: values.username };
      if (values['display-name']) body.displayName = values['display-name'];
      if (values.plan) body.plan = values.plan as components['schemas']['Plan'];
      if (values.admin) body.isAdmin = true;
      if (values.pronouns) body.pronouns = values.pronouns;
      if (values.status) body.status = values.status;
      if (values.timezone) body.timezone = values.timezone;
      if (values.country) body.country = values.country;
      if (values.about) body.aboutMarkdown = values.about;
      return api.POST('/admin/v1/accounts', { body });
    }
    case 'create-key': {
      if (!values.user) fail('create-key needs --user <userId>');
      return api.POST('/admin/v1/accounts/{userId}/api-keys', {
        params: { path: { userId: values.user } },
        body: {
          scopes: parseScopes(),
          ...(values.name ? { name: values.name } : {}),
          ...(values['expires-at'] ? { expiresAt: parseTime(values['expires-at']) } : {}),
        },
      });
    }
    case 'list-accounts': {
      const query = { limit: parseLimit(), cursor: values.cursor, usernamePrefix: values.prefix };
      return api.GET('/admin/v1/accounts', { params: { query } });
    }
    case 'show-account':
      return api.GET('/admin/v1/accounts/{userId}', { params: { path: { userId: userId(command) } } });
    case 'list-keys':
      return api.GET('/admin/v1/accounts/{userId}/api-keys', {
        params: { path: { userId: userId(command) }, query: { limit: parseLimit(), cursor: values.cursor } },
      });
    case 'delete-account': {
      const id = userId(command);
      if (!values.yes) fail('delete-account removes the account and all its data for good; add --yes to confirm');
      const result = await api.DELETE('/admin/v1/accounts/{userId}', { params: { path: { userId: id } } });
      return { ...result, data: result.response.ok ? { deleted: id } : undefined };
    }
    case 'revoke-key': {
      if (!values.key) fail('revoke-key needs --key <keyId>');
      const result = await api.DELETE('/admin/v1/api-keys/{keyId}', { params: { path: { keyId: values.key } } });
      return { ...result, data: result.response.ok ? { revoked: values.key } : undefined };
    }
    default:
      return fail(`unknown command "${command}"\n${USAGE}`);
  }
}

try {
  const { data, error, response } = await run();
  if (response.ok) {
    console.log(JSON.stringify(data, null, 2));
  } else {
    console.error(JSON.stringify(error ?? { status: response.status }, null, 2));
    process.exit(1);
  }
} catch (err) {
  console.error(
    JSON.stringify({ code: 'UNREACHABLE', message: `Could not reach ${baseUrl}: ${(err as Error).message}` }),
  );
  process.exit(1);
}
