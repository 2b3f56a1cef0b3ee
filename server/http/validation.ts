/** express-openapi-validator setup and the translation of its errors into specific messages. */
import * as OpenApiValidator from 'express-openapi-validator';
import type { RequestHandler } from 'express';
import type { OpenApiDocument } from './spec.ts';

export function createValidator(spec: OpenApiDocument, validateResponses: boolean): RequestHandler[] {
  return OpenApiValidator.middleware({
    apiSpec: structuredClone(spec) as never,
    validateRequests: { allowUnknownQueryParameters: false, coerceTypes: false, removeAdditional: false },
    validateResponses: validateResponses ? { removeAdditional: false } : false,
    validateSecurity: false,
    validateFormats: true,
    // Bodies are parsed (and their type checked) by our own middleware before this runs.
    fileUploader: false,
  }) as unknown as RequestHandler[];
}

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
  return typeof err === 'object' && err !== null && typeof (err as ValidatorError).status === 'number' && Array.isArray((err as ValidatorError).errors);
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
      const name = m && !(field === m[1] || field.endsWith(`.${m[1]}`)) ? (field ? `${field}.${m[1]}` : m[1]) : field || m?.[1];
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
