/**
 * Writes an operation's named 400 examples into its paths file by replacing lines, so everything
 * else in the file (comments, quoting, line breaks) stays byte for byte as it was. The paths files
 * share one layout (two-space indents: an operation's `operationId` at 4, its `"400":` at 6, that
 * response's `examples:` at 12 and each example's name at 14), which is what this relies on; it
 * fails loudly when a file does not have it.
 */
import type { ExampleRequest, Kind } from './mistakes.ts';

export interface NamedExample {
  name: Kind;
  summary: string;
  request: ExampleRequest;
  value: unknown;
}

const PLAIN = /^[A-Za-z][A-Za-z0-9_]*$/;
const RESERVED = /^(true|false|null|yes|no|on|off|y|n|~)$/i;

/** A value as YAML flow (JSON is YAML; plain words stay unquoted for readability). */
export function flow(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(flow).join(', ')}]`;
  if (value !== null && typeof value === 'object') {
    const entries = Object.entries(value);
    if (entries.length === 0) return '{}';
    return `{ ${entries.map(([k, v]) => `${PLAIN.test(k) && !RESERVED.test(k) ? k : JSON.stringify(k)}: ${flow(v)}`).join(', ')} }`;
  }
  if (typeof value === 'string') return PLAIN.test(value) && !RESERVED.test(value) ? value : JSON.stringify(value);
  return JSON.stringify(value);
}

function exampleLines(example: NamedExample): string[] {
  const pad = (n: number) => ' '.repeat(n);
  const lines = [`${pad(14)}${example.name}:`, `${pad(16)}summary: ${example.summary}`];
  const parts = Object.entries(example.request);
  if (parts.length === 0) lines.push(`${pad(16)}x-request: {}`);
  else lines.push(`${pad(16)}x-request:`, ...parts.map(([key, v]) => `${pad(18)}${key}: ${flow(v)}`));
  lines.push(`${pad(16)}value:`);
  const { details, ...rest } = example.value as { details?: unknown[] };
  for (const [key, v] of Object.entries(rest)) lines.push(`${pad(18)}${key}: ${flow(v)}`);
  if (details) {
    lines.push(`${pad(18)}details:`);
    for (const d of details) lines.push(`${pad(20)}- ${flow(d)}`);
  }
  return lines;
}

const indentOf = (line: string) =>
  line.trim() === '' ? Number.POSITIVE_INFINITY : line.length - line.trimStart().length;

/** The end (exclusive) of the block that starts after line `start` and is indented more than `indent`. */
function blockEnd(lines: string[], start: number, indent: number): number {
  let end = start + 1;
  while (end < lines.length && indentOf(lines[end]!) > indent) end++;
  // Trailing blank lines belong to what follows.
  while (end > start + 1 && lines[end - 1]!.trim() === '') end--;
  return end;
}

/**
 * The file's text with the operation's 400 examples replaced: `generated` first (the first is what
 * a mock answers by default), then the examples already there that `keep` accepts by name.
 */
export function replaceExamples(
  text: string,
  operationId: string,
  generated: NamedExample[],
  keep: (name: string, lines: string[]) => boolean,
): string {
  const lines = text.split('\n');
  const at = lines.indexOf(`    operationId: ${operationId}`);
  if (at < 0) throw new Error(`${operationId}: no "    operationId: ${operationId}" line`);
  const opEnd = blockEnd(lines, at, 2);
  const status = lines.slice(at, opEnd).indexOf('      "400":');
  if (status < 0) throw new Error(`${operationId}: no "400" response at indent 6`);
  const start = at + status;
  const end = blockEnd(lines, start, 6);
  const block = lines.slice(start + 1, end);
  const fresh = generated.flatMap(exampleLines);
  let replacement: string[];
  if (block.length === 1 && block[0]!.trim().startsWith('$ref:')) {
    replacement = [
      '        description: The request is malformed or breaks a validation or business rule.',
      '        content:',
      '          application/json:',
      '            schema:',
      '              $ref: "../components/schemas/common.yaml#/Error"',
      '            examples:',
      ...fresh,
    ];
  } else {
    const ex = block.indexOf('            examples:');
    if (ex < 0) throw new Error(`${operationId}: its 400 has no "examples:" at indent 12`);
    const exEnd = blockEnd(block, ex, 12);
    const kept: string[] = [];
    let i = ex + 1;
    while (i < exEnd) {
      const m = /^ {14}([^\s:]+):/.exec(block[i]!);
      if (!m) throw new Error(`${operationId}: unexpected line in its 400 examples: ${block[i]}`);
      const j = blockEnd(block, i, 14);
      const entry = block.slice(i, j);
      if (!entry.some((l) => l.trimStart().startsWith('x-request:')) && keep(m[1]!, entry)) kept.push(...entry);
      i = j;
    }
    replacement = [...block.slice(0, ex + 1), ...fresh, ...kept, ...block.slice(exEnd)];
  }
  return [...lines.slice(0, start + 1), ...replacement, ...lines.slice(end)].join('\n');
}
