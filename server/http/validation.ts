/** express-openapi-validator setup and the translation of its errors into specific messages and `details`. */
import { createHash } from 'node:crypto';
import { createRequire } from 'node:module';
import * as OpenApiValidator from 'express-openapi-validator';
import type { Request, RequestHandler, Response } from 'express';
import { runChain } from './chain.ts';
import { invalidInput, pointerTo, type ValidationProblem } from './errors.ts';
import type { MatchedOperation } from './spec.ts';
import type { OpenApiDocument } from './spec.ts';

/**
 * The options every per-path validator instance is created with. `forDetails`: the instance that
 * lists every problem of a request the main one refused (see requestProblems).
 */
function validatorOptions(apiSpec: OpenApiDocument, validateResponses: boolean, forDetails = false) {
  return {
    apiSpec: apiSpec as never,
    validateRequests: {
      // The validator stops at the first unknown query parameter; requestProblems lists them itself.
      allowUnknownQueryParameters: forDetails,
      coerceTypes: false,
      removeAdditional: false,
      allErrors: forDetails,
    },
    validateResponses: validateResponses && !forDetails ? { removeAdditional: false } : (false as const),
    validateSecurity: false,
    validateFormats: true,
    // Formats as JSON Schema defines them (a `uri` is an RFC 3986 URI: no spaces, no raw
    // non-ASCII), not ajv-formats' fast approximations, which let such values in.
    ajvFormats: { mode: 'full' as const },
    // Bodies are parsed (and their type checked) by our own middleware before this runs.
    fileUploader: false,
  };
}

/**
 * The document express-openapi-validator needs for one path: that path item and the components
 * it reaches through `$ref`, transitively (security schemes too). The validator dereferences and
 * compiles everything it is given; with every component of the contract, a path's first request
 * took about 5× longer.
 */
export function pathDocument(spec: OpenApiDocument, path: string): OpenApiDocument {
  const all = (spec.components ?? {}) as Record<string, Record<string, unknown>>;
  const components: Record<string, Record<string, unknown>> = {};
  if (all.securitySchemes) components.securitySchemes = all.securitySchemes;
  // A reference is a `$ref`, or a value of a discriminator's `mapping` (a pointer in a plain string).
  const pending: Array<{ node: unknown; inMapping: boolean }> = [{ node: spec.paths[path], inMapping: false }];
  const follow = (pointer: string) => {
    const m = /^#\/components\/([^/]+)\/([^/]+)$/.exec(pointer);
    if (!m) throw new Error(`${path}: unsupported reference ${pointer} (only #/components/<kind>/<name>)`);
    const [, kind, name] = m as unknown as [string, string, string];
    const target = all[kind]?.[name];
    if (target === undefined) throw new Error(`${path}: reference ${pointer} resolves to nothing`);
    components[kind] ??= {};
    if (name in components[kind]) return;
    components[kind][name] = target;
    pending.push({ node: target, inMapping: false });
  };
  while (pending.length > 0) {
    const { node, inMapping } = pending.pop()!;
    if (typeof node !== 'object' || node === null) continue;
    for (const [key, value] of Object.entries(node)) {
      if (typeof value === 'string' && (key === '$ref' || inMapping)) follow(value);
      else pending.push({ node: value, inMapping: key === 'mapping' && !Array.isArray(node) });
    }
  }
  // In the contract's order (the validator's discriminator handling depends on it).
  const ordered = Object.fromEntries(
    Object.entries(all)
      .filter(([kind]) => components[kind])
      .map(([kind, byName]) => [
        kind,
        Object.fromEntries(Object.entries(byName).filter(([name]) => name in components[kind]!)),
      ]),
  );
  return { ...spec, paths: { [path]: spec.paths[path] }, components: ordered } as OpenApiDocument;
}

type PathToRegexp = (path: unknown, options?: Record<string, unknown>) => { regexp: RegExp; keys: unknown[] };

/** A module as express-openapi-validator itself loads it (resolved from its own directory). */
function fromValidator<T>(id: string): T {
  const fromHere = createRequire(import.meta.filename);
  return createRequire(fromHere.resolve('express-openapi-validator'))(id) as T;
}

/** The path-to-regexp module express-openapi-validator itself loads. */
export function validatorsPathToRegexp(): { pathToRegexp: PathToRegexp } {
  return fromValidator('path-to-regexp');
}

interface DocumentCheckModule {
  OpenAPISchemaValidator: new (options: { version: string; validateApiSpec: boolean }) => DocumentCheck;
}
interface DocumentCheck {
  validate(document: unknown): { errors: unknown[] };
}

/** The validator's check of a document against the OpenAPI schema, as it loads it. */
export function validatorsDocumentCheck(): DocumentCheckModule {
  return fromValidator('./framework/openapi.schema.validator');
}

const documentChecks = new Map<string, DocumentCheck>();

/**
 * Each express-openapi-validator instance checks its document against the OpenAPI schema first, and
 * builds that check anew (ajv compiles the whole OpenAPI 3.1 schema: about 30 ms) in every instance,
 * which here is one or two per path: half the time of a path's first request. The check holds no
 * state between calls (`validate` is synchronous), so every instance gets the one built for its
 * OpenAPI version and options, and still checks its own document with it.
 */
function shareDocumentChecks(): void {
  const module = validatorsDocumentCheck();
  const build = module.OpenAPISchemaValidator as DocumentCheckModule['OpenAPISchemaValidator'] & { shared?: boolean };
  if (build.shared) return;
  function shared(options: { version: string; validateApiSpec: boolean }): DocumentCheck {
    const key = `${options.version}:${options.validateApiSpec}`;
    let check = documentChecks.get(key);
    if (!check) {
      check = new build(options);
      documentChecks.set(key, check);
    }
    return check;
  }
  // Called with `new`: a constructor that returns an object gives that object.
  module.OpenAPISchemaValidator = Object.assign(shared, { shared: true }) as never;
}

/** How many document checks this process has built (one per OpenAPI version and options). */
export const documentChecksBuilt = (): number => documentChecks.size;

const routeMatchers = new Map<string, ReturnType<PathToRegexp>>();

/** The routes whose matcher the validator has had compiled so far (`s`/`t`: sensitive, strict; then the route). */
export const routeMatcherKeys = (): string[] => [...routeMatchers.keys()];

/**
 * express-openapi-validator compiles its route's path-to-regexp matcher anew on every request it
 * validates (`lookupRoute`, openapi.metadata.js: about 5 µs and 4 KB a request; upstream,
 * cdimascio/express-openapi-validator#1217 caches them). Its calls (a route of the contract, with
 * only `sensitive` and `strict` set) get the matcher compiled the first time; any other call
 * (express's router builds its layers with more options) goes to path-to-regexp as before. A
 * matcher is read only (`regexp.exec`, `keys`), and without the `g` flag its `exec` keeps no state.
 */
/** Whether a call sets no option but `sensitive` and `strict` (the validator's), without allocating. */
function onlyRouteOptions(options: Record<string, unknown> | undefined): boolean {
  for (const name in options) if (name !== 'sensitive' && name !== 'strict') return false;
  return true;
}

function cacheRouteMatchers(): void {
  const module = validatorsPathToRegexp();
  const compile = module.pathToRegexp;
  if ((compile as { cached?: boolean }).cached) return;
  const cached: PathToRegexp = (path, options) => {
    if (typeof path !== 'string' || !onlyRouteOptions(options) || routeMatchers.size >= 5_000)
      return compile(path, options);
    const key = `${options?.sensitive === true ? 's' : '-'}${options?.strict === true ? 't' : '-'}${path}`;
    let matcher = routeMatchers.get(key);
    if (!matcher) {
      matcher = compile(path, options);
      routeMatchers.set(key, matcher);
    }
    return matcher;
  };
  module.pathToRegexp = Object.assign(cached, { cached: true });
}

interface ParameterMutator {
  _apiDocs: unknown;
  ajv: unknown;
  modifyRequest(req: Request & { openapi?: { schema?: { parameters?: unknown[] } } }): void;
}
interface ParameterUtil {
  dereferenceParameter(docs: unknown, parameter: unknown): { in?: string; content?: unknown; style?: string };
  normalizeParameter(ajv: unknown, parameter: unknown): { schema?: { type?: unknown } };
}

/** Operations (their contract objects) whose parameters are all plain path parameters, as decided once. */
const pathOnly = new WeakMap<object, boolean>();
const PLAIN_TYPES = new Set(['string', 'integer', 'number', 'boolean']);
let idleSkips = 0;

/** How many requests in this process skipped the validator's parameter mutator (skipIdleParameterMutator). */
export const parameterMutatorSkips = (): number => idleSkips;

/**
 * express-openapi-validator's parameter mutator (req.parameter.mutator.js) runs on every request
 * it validates: a `url.parse` of the URL, then for each parameter of the operation a dereference
 * and a normalisation of its schema (most of the validator's 15–20 µs a request in issue 30's
 * profile), to reshape query values (arrays, objects, deep objects) and `content` parameters. A
 * path parameter is reshaped only when it is an array or styled `form`, so on a request without a
 * query string to an operation whose parameters (if any) are all path parameters of a plain type
 * (GET /friends/{friendUserId}/front …) it changes nothing: such requests skip it. Which
 * operations qualify is decided once each, by the validator's own dereference and normalisation;
 * every other request runs the mutator as before.
 */
function skipIdleParameterMutator(): void {
  const { RequestParameterMutator } = fromValidator<{ RequestParameterMutator: { prototype: ParameterMutator } }>(
    './middlewares/parsers/req.parameter.mutator.js',
  );
  const util = fromValidator<ParameterUtil>('./middlewares/parsers/util.js');
  const proto = RequestParameterMutator.prototype;
  const modify = proto.modifyRequest as ParameterMutator['modifyRequest'] & { skipsIdle?: boolean };
  if (modify.skipsIdle) return;
  const qualifies = (mutator: ParameterMutator, parameters: unknown[]): boolean =>
    parameters.every((raw) => {
      const parameter = util.dereferenceParameter(mutator._apiDocs, raw);
      if (parameter?.in !== 'path' || parameter.content !== undefined) return false;
      const { schema } = util.normalizeParameter(mutator.ajv, parameter);
      return (parameter.style ?? 'simple') === 'simple' && PLAIN_TYPES.has(schema?.type as string);
    });
  const skipping: ParameterMutator['modifyRequest'] = function (this: ParameterMutator, req) {
    const operation = req.openapi?.schema;
    if (operation && !req.originalUrl.includes('?')) {
      let plain = pathOnly.get(operation);
      if (plain === undefined) {
        plain = qualifies(this, operation.parameters ?? []);
        pathOnly.set(operation, plain);
      }
      if (plain) {
        idleSkips++;
        return;
      }
    }
    modify.call(this, req);
  };
  proto.modifyRequest = Object.assign(skipping, { skipsIdle: true });
}

/**
 * Validators already built in this process, by contract text, response validation (or `details`)
 * and path: a second app on the same contract (several servers in one test process) reuses them.
 */
const built = new Map<string, RequestHandler[]>();

function validatorFor(spec: OpenApiDocument, key: string, path: string, options: (doc: OpenApiDocument) => object) {
  let chain = built.get(key);
  if (!chain) {
    chain = OpenApiValidator.middleware(
      options(structuredClone(pathDocument(spec, path))) as never,
    ) as RequestHandler[];
    built.set(key, chain);
  }
  return chain;
}

/** How many requests in this process were let through on a verdict the validator gave before (createValidator). */
let verdictHits = 0;
export const cachedVerdicts = (): number => verdictHits;

/** How many passed requests' verdicts each app keeps (createValidator). */
const VERDICTS_KEPT = 4096;
/**
 * The longest request path whose verdict is kept. Every path parameter of the contract is bounded
 * (a UUID, an enum, a digest), so a path it accepts is far shorter; this keeps the bound if that
 * changes.
 */
const LINE_KEPT_CHARS = 256;

/**
 * Contract validation per path item. express-openapi-validator finds the route of each request
 * by compiling and trying every path's pattern in turn, which costs more than the rest of the
 * pipeline together on a contract this size. The operation is already resolved by then, so each
 * path gets its own validator instance holding just that path and the components it uses,
 * created on its first request.
 */
export function createValidator(spec: OpenApiDocument, validateResponses: boolean): RequestHandler {
  cacheRouteMatchers();
  skipIdleParameterMutator();
  shareDocumentChecks();
  const specKey = createHash('sha256').update(JSON.stringify(spec)).digest('hex');
  const forPath = (path: string) =>
    validatorFor(spec, `${specKey}:${validateResponses}:${path}`, path, (doc) =>
      validatorOptions(doc, validateResponses),
    );
  // Built on a path's first refused request: valid requests never run it.
  const forDetails = (path: string) =>
    validatorFor(spec, `${specKey}:details:${path}`, path, (doc) => validatorOptions(doc, false, true));
  // The request lines the validator passed whose verdict depends on that line alone, the least
  // recently seen first (a Set keeps insertion order; a hit moves to the end).
  const passed = new Set<string>();
  return (req, res, next) => {
    const matched = (res.locals as { operation?: MatchedOperation }).operation;
    if (!matched) return next();
    const { operation } = matched;
    // Nothing to validate: an operation without parameters or body, called without a query string
    // or body (GET /front, GET /me …). The validator would find nothing; skipping it saves its
    // per-request work (about a twentieth of such a read). Responses are validated in res.json.
    if (
      !validateResponses &&
      !operation.hasParameters &&
      !operation.hasRequestBody &&
      !req.url.includes('?') &&
      req.body === undefined
    )
      return next();
    // A request whose verdict depends on its method and path alone: an operation whose parameters
    // are all path parameters and which takes no body, called without a query string or body.
    // The validator checks no header or cookie there (validateSecurity is off), so the same line
    // gets the same verdict: one it passed is let through again without running it (GET
    // /friends/{id}/front, GET /members/{id} …). Refusals are not kept: each runs it again; nor
    // are lines longer than LINE_KEPT_CHARS, so the kept lines stay small.
    const line =
      !validateResponses &&
      operation.pathParamsOnly &&
      !operation.hasRequestBody &&
      req.body === undefined &&
      req.url.length <= LINE_KEPT_CHARS &&
      !req.url.includes('?')
        ? `${req.method} ${req.url}`
        : undefined;
    if (line !== undefined && passed.delete(line)) {
      passed.add(line);
      verdictHits++;
      return next();
    }
    runChain(forPath(operation.path), req, res, (err?: unknown) => {
      if (!err && line !== undefined) {
        passed.add(line);
        if (passed.size > VERDICTS_KEPT) passed.delete(passed.values().next().value!);
      }
      if (!isValidatorError(err) || err.status !== 400 || isResponseViolation(err)) return next(err);
      const message = validationMessage(err);
      requestProblems(forDetails(operation.path), operation.queryParams, req, res).then(
        (problems) =>
          next(invalidInput(problems.length > 0 ? problems : err.errors.map((issue) => problemOf(issue)), message)),
        next,
      );
    });
  };
}

/**
 * Every problem of a request the validator refused. The validator that refused it stops at the first
 * problem of the parameters and the first of the body, and its wording of those stays the 400's
 * `message`; a second instance with ajv's `allErrors` then lists them all. Valid requests never
 * run it.
 */
async function requestProblems(
  validator: RequestHandler[],
  knownQuery: string[],
  req: Request,
  res: Response,
): Promise<ValidationProblem[]> {
  // The validator's own query check throws at the first unknown or empty parameter; all of them here.
  const problems: ValidationProblem[] = [];
  for (const [name, value] of Object.entries((req.query ?? {}) as Record<string, unknown>)) {
    if (!knownQuery.includes(name))
      problems.push({
        in: 'query',
        pointer: name,
        rule: 'additionalProperties',
        message: `Unknown query parameter '${name}'`,
      });
    else if (value === '')
      problems.push({
        in: 'query',
        pointer: name,
        rule: 'allowEmptyValue',
        message: `Empty value found for query parameter '${name}'`,
      });
  }
  const err = await new Promise<unknown>((resolve) => runChain(validator, req, res, resolve));
  if (isValidatorError(err)) problems.push(...err.errors.map((issue) => problemOf(issue, req.body)));
  // Two keywords can say the same of one value (a UUID's `format` and `pattern`): listed once.
  const seen = new Set<string>();
  return problems.filter((p) => {
    const key = JSON.stringify([p.in, p.pointer, p.message]);
    return !seen.has(key) && seen.add(key);
  });
}

const LOCATIONS: Record<string, ValidationProblem['in']> = {
  body: 'body',
  query: 'query',
  params: 'path',
  headers: 'header',
};

/**
 * One validator issue as a problem. Its path is ajv's instance path (`/body/members/0`, escaped as
 * RFC 6901 asks) with, for `required` and `additionalProperties`, the property's name appended
 * unescaped; that name is found again here so that the pointer names it correctly.
 */
function problemOf(issue: ValidatorIssue, body?: unknown): ValidationProblem {
  const [, where = '', ...tokens] = (issue.path ?? '').split('/');
  const rule = issue.errorCode?.split('.')[0] ?? 'invalid';
  const message = describe(issue);
  const location = LOCATIONS[where];
  // The validator's own refusals that name no location (a body's discriminator) are the body's.
  if (!location) return { in: 'body', pointer: '', rule, message };
  if (location !== 'body') return { in: location, pointer: tokens.join('/'), rule, message };
  if (rule !== 'required' && rule !== 'additionalProperties' && rule !== 'unevaluatedProperties')
    return { in: location, pointer: tokens.map((t) => `/${t}`).join(''), rule, message };
  // The name is the last token, unless an unknown name holds a `/`: then it is the tail of tokens
  // that the object before it has as a key.
  const hasKey = (i: number) => {
    const parent = tokens.slice(0, i).reduce<unknown>((node, t) => at(node, t), body);
    return typeof parent === 'object' && parent !== null && Object.hasOwn(parent, tokens.slice(i).join('/'));
  };
  let split = tokens.length - 1;
  if (rule !== 'required' && !hasKey(split)) {
    for (let i = split - 1; i >= 0; i--) {
      if (hasKey(i)) {
        split = i;
        break;
      }
    }
  }
  const parent = tokens
    .slice(0, split)
    .map((t) => `/${t}`)
    .join('');
  return { in: location, pointer: pointerTo(parent, tokens.slice(split).join('/')), rule, message };
}

/** The value under one escaped reference token. */
function at(node: unknown, token: string): unknown {
  if (typeof node !== 'object' || node === null) return undefined;
  return (node as Record<string, unknown>)[token.replace(/~1/g, '/').replace(/~0/g, '~')];
}

const UUID_PATTERN = '^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$';

interface ValidatorIssue {
  path?: string;
  message?: string;
  errorCode?: string;
}

export interface ValidatorError {
  status: number;
  errors: ValidatorIssue[];
  message: string;
}

export function isValidatorError(err: unknown): err is ValidatorError {
  return (
    typeof err === 'object' &&
    err !== null &&
    typeof (err as ValidatorError).status === 'number' &&
    Array.isArray((err as ValidatorError).errors)
  );
}

export function isResponseViolation(err: ValidatorError): boolean {
  return err.status >= 500 || err.errors.some((e) => e.path?.startsWith('/response'));
}

/** `/body/items/0/type` → `items[0].type`; `/query/limit` → `limit`. */
function fieldName(path: string): string {
  const parts = path.split('/').filter(Boolean).slice(1);
  return parts.reduce((acc, part) => (/^\d+$/.test(part) ? `${acc}[${part}]` : acc ? `${acc}.${part}` : part), '');
}

function describe(issue: ValidatorIssue): string {
  const raw = issue.message ?? 'is invalid';
  const path = issue.path ?? '';
  const field = fieldName(path);
  const where = path.split('/')[1] ?? '';
  if (!raw.startsWith('must') && !raw.startsWith('should')) return raw; // already a sentence ("Unknown query parameter 'x'")
  const code = issue.errorCode?.split('.')[0];
  const subject = field || (where === 'body' ? 'Request body' : where || 'value');
  switch (code) {
    case 'additionalProperties':
      return field ? `Unknown field '${field}'` : 'Request body has an unknown field';
    case 'required': {
      const m = /required property '([^']+)'/.exec(raw);
      const name =
        m && !(field === m[1] || field.endsWith(`.${m[1]}`)) ? (field ? `${field}.${m[1]}` : m[1]) : field || m?.[1];
      return `${name} is required`;
    }
    case 'minProperties':
      if (!field && where === 'body') return 'Request body must contain at least one field';
      break;
    case 'enum': {
      const m = /allowed values: (.*)$/.exec(raw);
      if (m) return `${subject} must be one of: ${m[1]}`;
      break;
    }
    case 'format':
      if (raw.includes('"uuid"')) return `${subject} must be a valid UUID`;
      break;
    case 'pattern':
      // The contract pins UUIDs to the canonical 36-character form with this pattern.
      if (raw.includes(UUID_PATTERN)) return `${subject} must be a valid UUID`;
      break;
    default:
      break;
  }
  return `${subject} ${raw}`;
}

export function validationMessage(err: ValidatorError): string {
  const issues = err.errors.length > 0 ? err.errors : [{ message: err.message }];
  const messages = [...new Set(issues.map(describe))];
  return messages.join('; ');
}
