/**
 * Named 400 examples from the real server: for every operation, each kind of mistake its request
 * can make (scripts/error-examples/mistakes.ts) is sent to the app, started in this process on a
 * fresh embedded database, and the answer is written into the operation's 400 examples in
 * openapi/paths/*.yaml, with the request that produced it in `x-request`.
 *
 *   npm run examples:errors            write the examples (then `npm run gen`)
 *   npm run examples:errors -- --check fail when the contract's examples differ from the answers
 *
 * Examples without `x-request` (a business rule's refusal, written by hand, with the request that
 * gets it from a fixture-mode server in `x-fixture-request`: test/businessRuleExamples.test.ts) are
 * kept after the generated ones, line for line, except those whose message is the validator's
 * wording of a mistake a generated example now shows with its `details`.
 */
import { execFileSync } from 'node:child_process';
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { isDeepStrictEqual } from 'node:util';
import { SCOPES } from '../../server/http/spec.ts';
import { Contract, type Operation } from '../fuzz/contract.ts';
import { startFuzzServer, type FuzzServer } from '../fuzz/server.ts';
import { httpRequest, KINDS, mistakesOf } from './mistakes.ts';
import { replaceExamples, type NamedExample } from './yamlText.ts';

const root = resolve(import.meta.dirname, '../..');
const PATHS_DIR = join(root, 'openapi/paths');

/** The validator's wording of a contract mistake: superseded by the generated examples. */
const VALIDATOR_WORDING = [
  /^Unknown (query parameter|field) /,
  / is required$/,
  / must be (<=|>=|<|>) -?\d+$/,
  / must NOT have (more|fewer) than \d+ (characters|items|properties)$/,
  / must match (format|pattern) /,
  / must be equal to one of the allowed values/,
  / must be one of: /,
  / must be (string|integer|number|boolean|array|object|null)$/,
  / must be a valid UUID$/,
  /^must have required property /,
  /^Missing required query parameter /,
  /^Request body must contain at least one field$/,
  /^must NOT have fewer than 1 properties$/,
  / must be an integer written in decimal digits$/,
  /^Request body is required /,
];

type Json = Record<string, unknown>;

async function answers(contract: Contract, server: FuzzServer): Promise<Map<string, NamedExample[]>> {
  const admin = `Bearer ${server.adminToken}`;
  const post = async (path: string, body: unknown) => {
    const res = await fetch(server.baseUrl + path, {
      method: 'POST',
      headers: { Authorization: admin, 'Content-Type': 'application/json' },
      body: JSON.stringify(body),
    });
    if (!res.ok) throw new Error(`${path}: ${res.status} ${await res.text()}`);
    return (await res.json()) as Json;
  };
  const account = await post('/admin/v1/accounts', { username: 'examples', plan: 'pro' });
  const key = await post(`/admin/v1/accounts/${String(account.userId)}/api-keys`, {
    scopes: Object.fromEntries(SCOPES.map((s) => [s, 'read_write'])),
  });
  const auth = (op: Operation) =>
    op.security === 'admin'
      ? admin
      : op.security === 'metrics'
        ? `Bearer ${server.metricsToken}`
        : op.security === 'apiKey'
          ? `Bearer ${String(key.apiKey)}`
          : undefined;
  const out = new Map<string, NamedExample[]>();
  for (const op of contract.operations) {
    const examples: NamedExample[] = [];
    for (const mistake of mistakesOf(contract, op)) {
      const { url, init } = httpRequest(op, mistake.request, server.baseUrl, auth(op));
      const res = await fetch(url, init);
      const text = await res.text();
      if (res.status !== 400) {
        console.warn(`${op.operationId} ${mistake.name}: ${res.status}, not 400; left out (${text.slice(0, 200)})`);
        continue;
      }
      examples.push({
        name: mistake.name,
        summary: KINDS[mistake.name],
        request: mistake.request,
        value: JSON.parse(text),
      });
    }
    if (examples.length > 0) out.set(op.operationId, examples);
  }
  return out;
}

/** The 400 examples of an operation as the bundle has them, by name, in order. */
function bundledExamples(contract: Contract, op: Operation): Array<[string, Json]> {
  const item = contract.deref<Json>((contract.doc.paths as Json)[op.path]);
  const response = contract.deref<Json | undefined>(((item[op.method.toLowerCase()] as Json).responses as Json)['400']);
  const media = (response?.content as Json | undefined)?.['application/json'] as Json | undefined;
  return Object.entries((media?.examples as Json | undefined) ?? {}).map(([k, v]) => [k, contract.deref<Json>(v)]);
}

function check(contract: Contract, generated: Map<string, NamedExample[]>): number {
  let problems = 0;
  for (const op of contract.operations) {
    const want = (generated.get(op.operationId) ?? []).map((e) => ({
      name: e.name,
      summary: e.summary,
      'x-request': e.request,
      value: e.value,
    }));
    const have = bundledExamples(contract, op)
      .filter(([, e]) => e['x-request'] !== undefined)
      .map(([name, e]) => ({ name, ...e }));
    if (!isDeepStrictEqual(have, want)) {
      problems++;
      console.error(`${op.operationId}: the contract's named 400 examples differ from the server's answers`);
    }
  }
  return problems;
}

function write(contract: Contract, generated: Map<string, NamedExample[]>): void {
  const files = readdirSync(PATHS_DIR).filter((f) => f.endsWith('.yaml'));
  const texts = new Map(files.map((f) => [f, readFileSync(join(PATHS_DIR, f), 'utf8')]));
  for (const op of contract.operations) {
    const examples = generated.get(op.operationId);
    if (!examples) continue;
    const file = files.find((f) => texts.get(f)!.includes(`\n    operationId: ${op.operationId}\n`));
    if (!file) throw new Error(`${op.operationId}: not found in openapi/paths/`);
    const old = new Map(bundledExamples(contract, op));
    const keep = (name: string) => {
      const message = (old.get(name)?.value as Json | undefined)?.message;
      return !(typeof message === 'string' && VALIDATOR_WORDING.some((re) => re.test(message)));
    };
    texts.set(file, replaceExamples(texts.get(file)!, op.operationId, examples, keep));
  }
  const written: string[] = [];
  for (const [file, text] of texts) {
    if (text === readFileSync(join(PATHS_DIR, file), 'utf8')) continue;
    writeFileSync(join(PATHS_DIR, file), text);
    written.push(join(PATHS_DIR, file));
  }
  // Biome formats YAML too (long flow mappings broken over lines): written as it would leave them.
  if (written.length > 0)
    execFileSync(join(root, 'node_modules/.bin/biome'), ['format', '--write', ...written], { stdio: 'ignore' });
}

const contract = new Contract();
const server = await startFuzzServer();
try {
  const generated = await answers(contract, server);
  const count = [...generated.values()].reduce((n, e) => n + e.length, 0);
  if (process.argv.includes('--check')) {
    const problems = check(contract, generated);
    if (problems > 0) {
      console.error(`${problems} operations: run npm run examples:errors, then npm run gen`);
      process.exitCode = 1;
    } else console.log(`${count} named 400 examples of ${generated.size} operations match the server`);
  } else {
    write(contract, generated);
    console.log(`${count} named 400 examples of ${generated.size} operations written; now run npm run gen`);
  }
} finally {
  await server.close();
}
