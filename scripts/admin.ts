/**
 * Operator CLI over the admin API. Prints the JSON response; exits 1 with the error envelope on
 * failure, 2 on a usage error (nothing was sent).
 *
 *   npm run admin -- create-account --username aurora [--display-name "Aurora"] [--plan free|pro|pro_plus] [--admin]
 *                                   [--pronouns ..] [--status ..] [--timezone ..] [--country ..] [--about ..]
 *   npm run admin -- create-key --user <userId> (--scopes members:read,front:read_write | --all-scopes) [--name ..] [--expires-at <ISO time or epoch ms>]
 *   npm run admin -- revoke-key --key <keyId>
 *   npm run admin -- list-accounts [--prefix <username prefix>] [--limit n] [--cursor c]
 *   npm run admin -- show-account --user <userId>
 *   npm run admin -- list-keys --user <userId> [--limit n] [--cursor c]
 *   npm run admin -- delete-account --user <userId> --yes
 *   npm run admin -- import --user <userId> --source simply_plural|pluralkit|native --file <export> [--dry-run] [--no-wait]
 *   npm run admin -- export --user <userId> --out <file>       (the account's native archive; waits for the export)
 *   npm run admin -- backup --out <file>                       (the running embedded server; checked, then renamed into place)
 *   npm run admin -- restore --from <file> --data-dir <dir>    (offline: no server, an empty or new directory)
 *
 * Where a command goes (docs/operations.md, "Which server, which token" and "Without a server: --direct"):
 * - `--direct`: no server. The admin API runs inside this process on DATABASE_URL
 *   (server/directAdmin.ts): same validation, handlers, services, transactions, audit rows and
 *   JSON as through a server. For PostgreSQL servers without ADMIN_TOKEN. Takes no --url or
 *   --token (ADMIN_URL and ADMIN_TOKEN are ignored).
 * - Otherwise a server: --url, else ADMIN_URL, else (DATABASE_URL unset) the address the running
 *   embedded server of DATA_DIR recorded, else http://127.0.0.1:$PORT (3000). Token: --token, else
 *   ADMIN_TOKEN, else DATA_DIR/admin-token — read only when DATABASE_URL is unset and the server is
 *   the running server of that DATA_DIR on this machine (server/localServer.ts), so the embedded
 *   token is never sent to any other server.
 * - `restore` talks to no server: it writes a backup into a directory no process holds
 *   (server/db/backup.ts). Backup and restore print a one-line JSON summary.
 */
import { createHash, randomBytes } from 'node:crypto';
import { accessSync, constants, createReadStream, createWriteStream, readFileSync, statSync } from 'node:fs';
import { open, rename, rm } from 'node:fs/promises';
import { basename, dirname, join, resolve } from 'node:path';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import type { ReadableStream as WebReadableStream } from 'node:stream/web';
import { parseArgs } from 'node:util';
import { createApiClient, type ApiClient, type components } from '../client/index.ts';
import { SCOPES } from '../server/http/spec.ts';
import { runningServerOf } from '../server/localServer.ts';
import type { BackupManifest } from '../server/db/backup.ts';

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
  npm run admin -- import --user <userId> --source simply_plural|pluralkit|native --file <export file> [--dry-run] [--no-wait]
                                  (sends the file, then waits for the import and prints it; exit 1 when it failed)
  npm run admin -- export --user <userId> --out <file>       (waits for the account's native export, then downloads it)
  npm run admin -- backup --out <file>                       (the running embedded server: database, DATA_DIR keys, objects)
  npm run admin -- restore --from <file> --data-dir <dir>    (offline, into a new or empty directory)
through a server: --url <server origin> --token <admin token>   (else ADMIN_URL, ADMIN_TOKEN; see docs/operations.md)
without a server: --direct   (works on DATABASE_URL itself, in one transaction per command, audited as the API)`;

function fail(message: string): never {
  console.error(message);
  process.exit(2);
}

const { positionals, values } = parseArgs({
  allowPositionals: true,
  options: {
    url: { type: 'string' },
    token: { type: 'string' },
    direct: { type: 'boolean' },
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
    out: { type: 'string' },
    from: { type: 'string' },
    'data-dir': { type: 'string' },
    source: { type: 'string' },
    file: { type: 'string' },
    'dry-run': { type: 'boolean' },
    'no-wait': { type: 'boolean' },
    help: { type: 'boolean', short: 'h' },
  },
});

const command = positionals[0];
if (values.help || !command) {
  console.log(USAGE);
  process.exit(values.help ? 0 : 2);
}

/** An environment variable, empty counting as unset (as the server's configuration reads them). */
function env(name: string): string | undefined {
  return process.env[name] || undefined;
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

/** `ok` overrides the response's status (an archive that arrived whole but fails its checks); `line`: one line of JSON. */
type Outcome = { data?: unknown; error?: unknown; response: Response; ok?: boolean; line?: boolean };

/** The command's request, built (and its arguments checked) before anything is opened or sent. */
function plan(command: string): (api: ApiClient, target: Target) => Promise<Outcome> {
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
      return (api) => api.POST('/admin/v1/accounts', { body });
    }
    case 'create-key': {
      const user = values.user ?? fail('create-key needs --user <userId>');
      const body = {
        scopes: parseScopes(),
        ...(values.name ? { name: values.name } : {}),
        ...(values['expires-at'] ? { expiresAt: parseTime(values['expires-at']) } : {}),
      };
      return (api) => api.POST('/admin/v1/accounts/{userId}/api-keys', { params: { path: { userId: user } }, body });
    }
    case 'list-accounts': {
      const query = { limit: parseLimit(), cursor: values.cursor, usernamePrefix: values.prefix };
      return (api) => api.GET('/admin/v1/accounts', { params: { query } });
    }
    case 'show-account': {
      const id = userId(command);
      return (api) => api.GET('/admin/v1/accounts/{userId}', { params: { path: { userId: id } } });
    }
    case 'list-keys': {
      const path = { userId: userId(command) };
      const query = { limit: parseLimit(), cursor: values.cursor };
      return (api) => api.GET('/admin/v1/accounts/{userId}/api-keys', { params: { path, query } });
    }
    case 'delete-account': {
      const id = userId(command);
      if (!values.yes) fail('delete-account removes the account and all its data for good; add --yes to confirm');
      return async (api) => {
        const result = await api.DELETE('/admin/v1/accounts/{userId}', { params: { path: { userId: id } } });
        return { ...result, data: result.response.ok ? { deleted: id } : undefined };
      };
    }
    case 'revoke-key': {
      const keyId = values.key ?? fail('revoke-key needs --key <keyId>');
      return async (api) => {
        const result = await api.DELETE('/admin/v1/api-keys/{keyId}', { params: { path: { keyId } } });
        return { ...result, data: result.response.ok ? { revoked: keyId } : undefined };
      };
    }
    case 'import': {
      const user = userId(command);
      const source = values.source ?? fail('import needs --source simply_plural|pluralkit|native');
      if (source !== 'simply_plural' && source !== 'pluralkit' && source !== 'native')
        fail(`--source must be simply_plural, pluralkit or native, got "${source}"`);
      const path = resolve(values.file ?? fail('import needs --file <export file>'));
      let file: Buffer;
      try {
        file = readFileSync(path);
      } catch (err) {
        return fail(`--file: cannot read ${path}: ${(err as Error).message}`);
      }
      return (api) => importFile(api, user, { source, dryRun: values['dry-run'] ?? false, file }, !values['no-wait']);
    }
    case 'export': {
      const user = userId(command);
      const out = resolve(values.out ?? fail('export needs --out <file>'));
      try {
        accessSync(dirname(out), constants.W_OK);
      } catch {
        fail(`--out: the directory ${dirname(out)} does not exist or is not writable`);
      }
      return (api, target) => exportArchive(api, target, user, out);
    }
    case 'backup': {
      const out = resolve(values.out ?? fail('backup needs --out <file>'));
      try {
        accessSync(dirname(out), constants.W_OK);
      } catch {
        fail(`--out: the directory ${dirname(out)} does not exist or is not writable`);
      }
      if (values.direct)
        fail(
          'backup takes a snapshot of the running embedded server; a database on PostgreSQL is backed up with pg_dump (docs/operations.md, "Backups")',
        );
      return (api) => backup(api, out);
    }
    default:
      return fail(`unknown command "${command}"\n${USAGE}`);
  }
}

/** How often `import` asks how the import is going. */
const IMPORT_POLL_MS = 500;

/** `import`: sends the file; unless told not to wait, polls until the import has finished and prints it. */
async function importFile(
  api: ApiClient,
  userId: string,
  input: { source: 'simply_plural' | 'pluralkit' | 'native'; dryRun: boolean; file: Buffer },
  wait: boolean,
): Promise<Outcome> {
  const sent = await api.POST('/admin/v1/accounts/{userId}/imports', {
    params: { path: { userId }, query: { source: input.source, dryRun: input.dryRun } },
    body: input.file as unknown as string,
    bodySerializer: (body: unknown) => body as BodyInit,
    headers: { 'Content-Type': input.source === 'native' ? 'application/x-tar' : 'application/json' },
  });
  if (!sent.data || !wait) return sent;
  const path = { userId, importId: sent.data.id };
  for (;;) {
    const polled = await api.GET('/admin/v1/accounts/{userId}/imports/{importId}', { params: { path } });
    if (!polled.data) return polled;
    if (polled.data.status === 'succeeded') return polled;
    if (polled.data.status === 'failed') return { ...polled, error: polled.data, ok: false };
    await new Promise((r) => setTimeout(r, IMPORT_POLL_MS));
  }
}

/**
 * `export`: queues the account's native export, waits for it, and downloads the archive to `out`
 * (a temporary file renamed into place once whole, so `out` is the previous file or the archive).
 */
async function exportArchive(api: ApiClient, target: Target, userId: string, out: string): Promise<Outcome> {
  const queued = await api.POST('/admin/v1/accounts/{userId}/exports', { params: { path: { userId } } });
  if (!queued.data) return queued;
  const path = { userId, exportId: queued.data.id };
  for (;;) {
    const polled = await api.GET('/admin/v1/accounts/{userId}/exports/{exportId}', { params: { path } });
    if (!polled.data) return polled;
    if (polled.data.status === 'failed') return { ...polled, error: polled.data, ok: false };
    if (polled.data.status === 'succeeded' && polled.data.downloadUrl) {
      const url = new URL(polled.data.downloadUrl, target.baseUrl);
      // A URL of this server goes through the target's own fetch (in-process with --direct).
      const download = await (url.origin === new URL(target.baseUrl).origin ? target.fetch : globalThis.fetch)(url);
      if (!download.ok || !download.body)
        return {
          response: download,
          error: { code: 'DOWNLOAD_FAILED', message: `The archive download answered ${download.status}` },
        };
      const partial = `${out}.partial-${process.pid}`;
      try {
        await pipeline(
          Readable.fromWeb(download.body as WebReadableStream),
          createWriteStream(partial, { mode: 0o600 }),
        );
        await rename(partial, out);
      } catch (err) {
        await rm(partial, { force: true });
        return {
          response: download,
          error: { code: 'DOWNLOAD_FAILED', message: `The archive was not written: ${(err as Error).message}` },
        };
      }
      return { ...polled, data: { export: polled.data.id, out, sizeBytes: statSync(out).size }, line: true };
    }
    await new Promise((r) => setTimeout(r, IMPORT_POLL_MS));
  }
}

/** What backup and restore print about an archive. */
function describeArchive(manifest: BackupManifest) {
  const warnings = [
    ...manifest.keys.fromEnvironment.map(
      (name) =>
        `${name} comes from the server's environment and is not in the backup: keep it with the backup${name === 'MESSAGE_ENCRYPTION_KEYS' ? ' (without it no message text can be read)' : ''}`,
    ),
    ...(manifest.objects.included ? [] : [`stored objects are not in the backup: ${manifest.objects.reason}`]),
  ];
  return {
    createdAt: manifest.createdAt,
    serverVersion: manifest.server.version,
    database: manifest.database,
    keys: manifest.keys.included,
    objects: manifest.objects.included ? manifest.parts.objects.files : null,
    files: manifest.files.length,
    warnings,
  };
}

/**
 * Downloads the archive into a private temp file next to `out`, reads it back whole against its
 * manifest, then renames it into place: `out` is either the previous file or a complete backup.
 */
async function backup(api: ApiClient, out: string): Promise<Outcome> {
  const { data, error, response } = await api.POST('/admin/v1/backup', { parseAs: 'stream' });
  if (!response.ok || !data) return { error, response };
  const { BackupArchiveError, readBackup } = await import('../server/db/backup.ts');
  const temp = join(dirname(out), `.${basename(out)}.${process.pid}.${randomBytes(4).toString('hex')}.tmp`);
  try {
    const file = await open(temp, 'wx', 0o600); // the archive holds the keys
    await pipeline(Readable.fromWeb(data as WebReadableStream<Uint8Array>), file.createWriteStream());
    const synced = await open(temp, 'r+');
    await synced.sync();
    await synced.close();
    const hash = createHash('sha256');
    let bytes = 0;
    const manifest = await readBackup(
      (async function* () {
        for await (const chunk of createReadStream(temp) as AsyncIterable<Buffer>) {
          hash.update(chunk);
          bytes += chunk.length;
          yield chunk;
        }
      })(),
    );
    await rename(temp, out);
    return { data: { out, bytes, sha256: hash.digest('hex'), ...describeArchive(manifest) }, response, line: true };
  } catch (err) {
    await rm(temp, { force: true });
    // An archive that fails its checks, a download cut short, a full disk: no backup was written.
    const cause = (err as { cause?: { message?: string } }).cause?.message;
    const message = `The backup was not written: ${(err as Error).message}${cause ? ` (${cause})` : ''}`;
    return {
      error: { code: err instanceof BackupArchiveError ? 'BAD_ARCHIVE' : 'BACKUP_FAILED', message },
      response,
      ok: false,
    };
  }
}

/** `restore`: offline, into a new or empty DATA_DIR that no process holds. */
async function restore(): Promise<never> {
  const from = resolve(values.from ?? fail('restore needs --from <backup file>'));
  const dataDir = resolve(values['data-dir'] ?? fail('restore needs --data-dir <directory>'));
  if (values.direct || values.url || values.token)
    fail('restore works on files only: it takes no --direct, --url or --token, and no server may run on --data-dir');
  const { BackupArchiveError, restoreEmbeddedBackup, RestoreRefusedError } = await import('../server/db/backup.ts');
  try {
    const restored = await restoreEmbeddedBackup(from, dataDir);
    console.log(
      JSON.stringify({
        restored: restored.dataDir,
        from,
        ...describeArchive(restored.manifest),
        database: restored.database,
      }),
    );
    process.exit(0);
  } catch (err) {
    if (!(err instanceof RestoreRefusedError || err instanceof BackupArchiveError)) throw err;
    const code = err instanceof RestoreRefusedError ? 'RESTORE_REFUSED' : 'BAD_ARCHIVE';
    console.error(JSON.stringify({ code, message: err.message }));
    process.exit(1);
  }
}

interface Target {
  api: ApiClient;
  /** Named when it cannot be reached. */
  where: string;
  /** Where a relative URL the server hands out (a signed download) resolves, and how it is fetched. */
  baseUrl: string;
  fetch: typeof globalThis.fetch;
  close?: () => Promise<void>;
}

/** A server, and the admin token for it; DATA_DIR/admin-token only for the running server of DATA_DIR. */
function serverTarget(): Target {
  const explicitUrl = values.url ?? env('ADMIN_URL');
  const databaseUrl = env('DATABASE_URL');
  const dataDir = resolve(env('DATA_DIR') ?? './data');
  // A server on PostgreSQL never reads DATA_DIR, so its contents say nothing about it.
  const local = databaseUrl ? undefined : runningServerOf(dataDir);
  const localUrl = local && 'url' in local ? local.url : undefined;
  const baseUrl = explicitUrl ?? localUrl ?? `http://127.0.0.1:${env('PORT') ?? 3000}`;
  const target = (token: string): Target => ({
    api: createApiClient({ baseUrl, apiKey: token }),
    where: baseUrl,
    baseUrl,
    fetch: globalThis.fetch,
  });
  const token = values.token ?? env('ADMIN_TOKEN');
  if (token) return target(token);

  const file = join(dataDir, 'admin-token');
  const fix = 'pass --token or set ADMIN_TOKEN';
  if (databaseUrl)
    fail(
      `No admin token: ${fix}. DATABASE_URL is set, and a server on PostgreSQL does not use ${file}; ` +
        'without ADMIN_TOKEN its admin API is disabled, and --direct works on DATABASE_URL without it.',
    );
  if (!localUrl)
    fail(
      `No admin token: ${fix}. ${file} is used only with the running server of that DATA_DIR, and ${local && 'reason' in local ? local.reason : 'there is none'}.`,
    );
  if (explicitUrl && !sameOrigin(explicitUrl, localUrl))
    fail(
      `No admin token for ${explicitUrl}: ${fix}. ${file} belongs to the server of that DATA_DIR, which listens on ${localUrl}, and is sent nowhere else.`,
    );
  let fromFile: string;
  try {
    fromFile = readFileSync(file, 'utf8').trim();
  } catch {
    return fail(`No admin token: ${fix}. The server of ${dataDir} runs, but ${file} cannot be read.`);
  }
  return target(fromFile);
}

function sameOrigin(a: string, b: string): boolean {
  try {
    return new URL(a).origin === new URL(b).origin;
  } catch {
    return false;
  }
}

/** --direct: the admin API in this process, on DATABASE_URL. */
async function directTarget(): Promise<Target> {
  if (values.url || values.token) fail('--direct works on DATABASE_URL without a server; it takes no --url or --token');
  const [{ ConfigError, loadConfig }, { createLogger }, { openDirectAdmin }, { StartupError, describeUrl }] =
    await Promise.all([
      import('../server/config.ts'),
      import('../server/logger.ts'),
      import('../server/directAdmin.ts'),
      import('../server/runtime.ts'),
    ]);
  let config: ReturnType<typeof loadConfig>;
  try {
    config = loadConfig();
  } catch (err) {
    if (err instanceof ConfigError) fail(`Configuration error: ${err.message}`);
    throw err;
  }
  if (!config.databaseUrl)
    fail(
      '--direct works on the PostgreSQL database of DATABASE_URL, which is not set. On the embedded default, run without --direct: the running server of DATA_DIR is used with its DATA_DIR/admin-token.',
    );
  try {
    const direct = await openDirectAdmin(config, createLogger(env('LOG_LEVEL') ?? 'warn', process.stderr));
    return {
      api: createApiClient({ baseUrl: 'http://direct.invalid', apiKey: direct.token, fetch: direct.fetch }),
      where: `${describeUrl(config.databaseUrl, 5432)} (DATABASE_URL, --direct)`,
      baseUrl: 'http://direct.invalid',
      fetch: direct.fetch,
      close: direct.close,
    };
  } catch (err) {
    if (!(err instanceof StartupError)) throw err;
    console.error(JSON.stringify({ code: 'PRECONDITION_FAILED', message: err.message }, null, 2));
    process.exit(1);
  }
}

if (command === 'restore') await restore();
const request = plan(command);
const target = values.direct ? await directTarget() : serverTarget();
let exitCode = 0;
try {
  const { data, error, response, ok = response.ok, line } = await request(target.api, target);
  if (ok) {
    console.log(line ? JSON.stringify(data) : JSON.stringify(data, null, 2));
  } else {
    console.error(JSON.stringify(error ?? { status: response.status }, null, 2));
    exitCode = 1;
  }
} catch (err) {
  console.error(
    JSON.stringify({ code: 'UNREACHABLE', message: `Could not reach ${target.where}: ${(err as Error).message}` }),
  );
  exitCode = 1;
} finally {
  await target.close?.();
}
process.exit(exitCode);
