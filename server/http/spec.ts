/**
 * The bundled contract (generated/openapi.json) indexed for routing: each operation's path
 * template, method and security requirement. The required scope of an operation is read from
 * its security requirement here, so openapi.yaml is the only table of scopes.
 */
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { SCOPES, type Scope, type ScopeLevel } from '../core/scopes.ts';
import type { OperationId } from './handlers.ts';

export { SCOPES, type Scope, type ScopeLevel };

export type OperationSecurity =
  /**
   * `scope:level` of the first requirement; `alternatives` are the further requirements an operation
   * may list (`security: [{apiKey: [a]}, {apiKey: [b]}]`): any one of them lets the key in.
   */
  | { kind: 'apiKey'; scope: Scope; level: ScopeLevel; alternatives: Array<{ scope: Scope; level: ScopeLevel }> }
  /** `apiKey: []`: any valid key, whatever its scopes (GET /api/v1/me). */
  | { kind: 'anyKey' }
  | { kind: 'admin' }
  /** GET /metrics: the server's METRICS_TOKEN when it has one, otherwise open. */
  | { kind: 'metrics' }
  /** /storage/v1/objects: the URL's own signature, which the handler verifies (it covers the path and query). */
  | { kind: 'signedUrl' }
  | { kind: 'public' };

export interface OperationInfo {
  operationId: OperationId;
  method: string;
  /** OpenAPI path template, e.g. /api/v1/members/{memberId} */
  path: string;
  security: OperationSecurity;
  hasRequestBody: boolean;
  requestBodyRequired: boolean;
  /** `x-streamed-body: true`: the handler reads the request stream itself (no parsing, no size limit of the pipeline's). */
  streamsBody: boolean;
  /** Media types the request body may have (empty without a body). */
  requestContentTypes: string[];
  /** Every status the operation's responses declare. */
  declaredStatuses: number[];
  /** Query and path parameters declared as integers (their raw text is checked before validation). */
  integerParams: Array<{ name: string; in: 'query' | 'path' }>;
  /** Whether the operation declares any parameter (path, query, header or cookie). */
  hasParameters: boolean;
  /** Whether every parameter it declares (if any) is a path parameter. */
  pathParamsOnly: boolean;
  /** The query parameters a request may give: those declared, and an API key the security scheme reads from the query. */
  queryParams: string[];
}

interface CompiledPath {
  template: string;
  regex: RegExp;
  paramNames: string[];
  staticSegments: number;
  operations: Map<string, OperationInfo>;
}

export interface MatchedOperation {
  operation: OperationInfo;
  params: Record<string, string>;
}

export type MatchResult =
  | { kind: 'match'; match: MatchedOperation }
  | { kind: 'method-not-allowed'; allow: string[] }
  | { kind: 'not-found' };

const METHODS = ['get', 'put', 'post', 'delete', 'patch'];

export const BUNDLED_SPEC_PATH = resolve(import.meta.dirname, '../../generated/openapi.json');

export function loadBundledSpec(): OpenApiDocument {
  return JSON.parse(readFileSync(BUNDLED_SPEC_PATH, 'utf8')) as OpenApiDocument;
}

export interface OpenApiDocument {
  paths: Record<string, Record<string, OpenApiOperation | unknown>>;
  [key: string]: unknown;
}
interface OpenApiParameter {
  $ref?: string;
  name?: string;
  in?: string;
  schema?: { type?: string | string[]; $ref?: string };
}
interface OpenApiOperation {
  operationId?: string;
  parameters?: OpenApiParameter[];
  security?: Array<Record<string, string[]>>;
  requestBody?: { required?: boolean; content?: Record<string, unknown> };
  'x-streamed-body'?: boolean;
  responses?: Record<string, unknown>;
}

function securityOf(op: OpenApiOperation, where: string): OperationSecurity {
  const requirements = op.security;
  if (!requirements) throw new Error(`${where} declares no security requirement`);
  if (requirements.length === 0) return { kind: 'public' };
  if (requirements.length > 1) {
    // Alternatives: each one API-key requirement naming one scope; the first is the primary.
    const all = requirements.map((r, i) => securityOf({ security: [r] }, `${where} (requirement ${i + 1})`));
    if (!all.every((r) => r.kind === 'apiKey'))
      throw new Error(`${where}: alternative security requirements must each name one API-key scope`);
    const [first, ...rest] = all as Array<Extract<OperationSecurity, { kind: 'apiKey' }>>;
    return { ...first!, alternatives: rest.map(({ scope, level }) => ({ scope, level })) };
  }
  const [requirement] = requirements;
  const schemes = Object.keys(requirement ?? {});
  if (schemes.length !== 1) throw new Error(`${where} must use exactly one security scheme`);
  if (schemes[0] === 'adminToken') return { kind: 'admin' };
  if (schemes[0] === 'metricsToken') return { kind: 'metrics' };
  if (schemes[0] === 'storageSignature') return { kind: 'signedUrl' };
  if (schemes[0] !== 'apiKey') throw new Error(`${where} uses unknown security scheme ${schemes[0]}`);
  const roles = requirement!.apiKey ?? [];
  if (roles.length === 0) return { kind: 'anyKey' };
  const [role] = roles;
  const m = roles.length === 1 && role ? /^([A-Za-z]+):(read|read_write)$/.exec(role) : null;
  if (!m || !(SCOPES as readonly string[]).includes(m[1]!)) {
    throw new Error(`${where} must list exactly one "<scope>:<level>" for apiKey, got ${JSON.stringify(roles)}`);
  }
  return { kind: 'apiKey', scope: m[1] as Scope, level: m[2] as ScopeLevel, alternatives: [] };
}

function compile(template: string): Omit<CompiledPath, 'operations'> {
  const paramNames: string[] = [];
  let staticSegments = 0;
  const pattern = template
    .split('/')
    .map((segment) => {
      const param = /^\{([^}]+)\}$/.exec(segment);
      if (param) {
        paramNames.push(param[1]!);
        return '([^/]+)';
      }
      if (segment) staticSegments++;
      return segment.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
    })
    .join('/');
  return { template, regex: new RegExp(`^${pattern}/?$`), paramNames, staticSegments };
}

/** Follows a local `#/components/...` reference of the bundled document. */
function deref<T>(spec: OpenApiDocument, value: T & { $ref?: string }): T {
  let current: unknown = value;
  for (let hops = 0; hops < 10 && current && typeof current === 'object' && '$ref' in current; hops++) {
    const path = String((current as { $ref: string }).$ref)
      .replace(/^#\//, '')
      .split('/');
    current = path.reduce<unknown>(
      (node, key) => (node as Record<string, unknown> | undefined)?.[key.replace(/~1/g, '/').replace(/~0/g, '~')],
      spec,
    );
  }
  return current as T;
}

function queryParams(spec: OpenApiDocument, params: OpenApiParameter[], op: OpenApiOperation): string[] {
  const declared = params.map((raw) => deref(spec, raw)).filter((p) => p?.in === 'query' && p.name);
  const schemes = ((spec.components as { securitySchemes?: Record<string, { in?: string; name?: string }> } | undefined)
    ?.securitySchemes ?? {}) as Record<string, { in?: string; name?: string }>;
  const fromSecurity = (op.security ?? []).flatMap((requirement) =>
    Object.keys(requirement)
      .map((key) => schemes[key])
      .filter((scheme) => scheme?.in === 'query' && scheme.name),
  );
  return [...new Set([...declared, ...fromSecurity].map((p) => p!.name!))];
}

function integerParams(spec: OpenApiDocument, params: OpenApiParameter[]): OperationInfo['integerParams'] {
  const out: OperationInfo['integerParams'] = [];
  for (const raw of params) {
    const param = deref(spec, raw);
    if (!param?.name || (param.in !== 'query' && param.in !== 'path')) continue;
    const schema = param.schema ? deref(spec, param.schema) : undefined;
    const types = Array.isArray(schema?.type) ? schema.type : [schema?.type];
    if (types.includes('integer')) out.push({ name: param.name, in: param.in });
  }
  return out;
}

/** The number of segments of a path, after the one trailing slash a template also matches. */
function depthOf(path: string): number {
  let depth = 0;
  const end = path.length > 1 && path.endsWith('/') ? path.length - 1 : path.length;
  for (let i = 0; i < end; i++) if (path.charCodeAt(i) === 47) depth++;
  return depth;
}

export class OperationIndex {
  private readonly paths: CompiledPath[] = [];
  /**
   * The same paths, in the same order, by depth (a template matches only paths of its own depth:
   * each segment is a literal or a non-empty parameter), so a request tries only those.
   */
  private readonly byDepth = new Map<number, CompiledPath[]>();
  /** Templates without parameters, by their text: a request for one of them needs no pattern. */
  private readonly literal = new Map<string, CompiledPath>();
  readonly operations: OperationInfo[] = [];

  constructor(spec: OpenApiDocument) {
    for (const [template, item] of Object.entries(spec.paths)) {
      const compiled: CompiledPath = { ...compile(template), operations: new Map() };
      const shared = (item.parameters as OpenApiParameter[] | undefined) ?? [];
      for (const method of METHODS) {
        const op = item[method] as OpenApiOperation | undefined;
        if (!op) continue;
        const where = `${method.toUpperCase()} ${template}`;
        if (!op.operationId) throw new Error(`${where} has no operationId`);
        const info: OperationInfo = {
          operationId: op.operationId as OperationId,
          method: method.toUpperCase(),
          path: template,
          security: securityOf(op, where),
          hasRequestBody: op.requestBody !== undefined,
          requestBodyRequired: op.requestBody?.required === true,
          streamsBody: op['x-streamed-body'] === true,
          requestContentTypes: Object.keys(op.requestBody?.content ?? {}),
          declaredStatuses: Object.keys(op.responses ?? {})
            .map(Number)
            .filter(Number.isInteger),
          integerParams: integerParams(spec, [...shared, ...(op.parameters ?? [])]),
          hasParameters: shared.length + (op.parameters?.length ?? 0) > 0,
          pathParamsOnly: [...shared, ...(op.parameters ?? [])].every((raw) => deref(spec, raw)?.in === 'path'),
          queryParams: queryParams(spec, [...shared, ...(op.parameters ?? [])], op),
        };
        compiled.operations.set(info.method, info);
        this.operations.push(info);
      }
      this.paths.push(compiled);
    }
    // Static segments win over parameters: /members/page before /members/{memberId}.
    this.paths.sort((a, b) => b.staticSegments - a.staticSegments || a.paramNames.length - b.paramNames.length);
    for (const compiled of this.paths) {
      if (compiled.template.length > 1 && compiled.template.endsWith('/'))
        throw new Error(`${compiled.template}: a path template must not end with a slash`);
      const depth = depthOf(compiled.template);
      const list = this.byDepth.get(depth) ?? [];
      list.push(compiled);
      this.byDepth.set(depth, list);
      if (compiled.paramNames.length === 0) this.literal.set(compiled.template, compiled);
    }
  }

  match(method: string, path: string): MatchResult {
    const wanted = method === 'HEAD' ? 'GET' : method;
    // A template without parameters that has the method: the first of the paths it could match,
    // since a template of that depth with a parameter has fewer static segments and sorts after it.
    const operation = this.literal.get(path)?.operations.get(wanted);
    if (operation) return { kind: 'match', match: { operation, params: {} } };
    const allow = new Set<string>();
    for (const compiled of this.byDepth.get(depthOf(path)) ?? []) {
      const m = compiled.regex.exec(path);
      if (!m) continue;
      const operation = compiled.operations.get(wanted);
      if (operation) {
        const params: Record<string, string> = {};
        compiled.paramNames.forEach((name, i) => {
          params[name] = safeDecode(m[i + 1]!);
        });
        return { kind: 'match', match: { operation, params } };
      }
      for (const key of compiled.operations.keys()) allow.add(key);
    }
    if (allow.size > 0) return { kind: 'method-not-allowed', allow: [...allow].sort() };
    return { kind: 'not-found' };
  }
}

function safeDecode(value: string): string {
  try {
    return decodeURIComponent(value);
  } catch {
    return value;
  }
}
