/** express-openapi-validator setup and the translation of its errors into specific messages. */
import { createHash } from 'node:crypto';
import * as OpenApiValidator from 'express-openapi-validator';
import type { RequestHandler } from 'express';
import { runChain } from './chain.ts';
import type { MatchedOperation } from './spec.ts';
import type { OpenApiDocument } from './spec.ts';

/** The options every per-path validator instance is created with. */
function validatorOptions(apiSpec: OpenApiDocument, validateResponses: boolean) {
  return {
    apiSpec: apiSpec as never,
    validateRequests: { allowUnknownQueryParameters: false, coerceTypes: false, removeAdditional: false },
    validateResponses: validateResponses ? { removeAdditional: false } : (false as const),
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

/**
 * Validators already built in this process, by contract text, response validation and path: a
 * second app on the same contract (several servers in one test process) reuses them.
 */
const built = new Map<string, RequestHandler[]>();

/**
 * Contract validation per path item. express-openapi-validator finds the route of each request
 * by compiling and trying every path's pattern in turn, which costs more than the rest of the
 * pipeline together on a contract this size. The operation is already resolved by then, so each
 * path gets its own validator instance holding just that path and the components it uses,
 * created on its first request.
 */
export function createValidator(spec: OpenApiDocument, validateResponses: boolean): RequestHandler {
  const specKey = `${createHash('sha256').update(JSON.stringify(spec)).digest('hex')}:${validateResponses}:`;
  const forPath = (path: string): RequestHandler[] => {
    let chain = built.get(specKey + path);
    if (!chain) {
      const options = validatorOptions(structuredClone(pathDocument(spec, path)), validateResponses);
      chain = OpenApiValidator.middleware(options) as unknown as RequestHandler[];
      built.set(specKey + path, chain);
    }
    return chain;
  };
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
    runChain(forPath(operation.path), req, res, next);
  };
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
