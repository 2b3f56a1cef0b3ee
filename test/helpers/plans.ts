/** Query plans of the statements the server runs, for tests that prove a path stays on an index. */
import type { Knex } from 'knex';

export interface Statement {
  sql: string;
  bindings: unknown[];
}

export interface PlanNode {
  'Node Type': string;
  'Relation Name'?: string;
  'Index Name'?: string;
  'Actual Rows'?: number;
  'Actual Loops'?: number;
  Plans?: PlanNode[];
}

/** Runs `action` and returns every statement knex sent meanwhile whose SQL matches `match`. */
export async function captureStatements(knex: Knex, match: RegExp, action: () => Promise<unknown>): Promise<Statement[]> {
  const seen: Statement[] = [];
  const capture = (q: { sql: string; bindings?: unknown[] }) => {
    if (match.test(q.sql)) seen.push({ sql: q.sql, bindings: q.bindings ?? [] });
  };
  knex.on('query', capture);
  try {
    await action();
  } finally {
    knex.off('query', capture);
  }
  return seen;
}

/**
 * The plan of a captured statement (`analyze` runs it, so only for reads). The query event carries
 * the native statement ($1, $2, …); knex.raw takes ? placeholders in order.
 */
export async function explain(knex: Knex, statement: Statement, options: { analyze?: boolean } = {}): Promise<PlanNode> {
  const ordered: unknown[] = [];
  const sql = statement.sql.replace(/\$(\d+)/g, (_m, n: string) => (ordered.push(statement.bindings[Number(n) - 1]), '?'));
  const explained = await knex.raw(`explain (${options.analyze ? 'analyze, ' : ''}format json) ${sql}`, ordered as never);
  const row = (explained.rows as Array<Record<string, unknown>>)[0]!;
  const raw = row['QUERY PLAN'];
  const plan = (typeof raw === 'string' ? JSON.parse(raw) : raw) as Array<{ Plan: PlanNode }>;
  return plan[0]!.Plan;
}

/** Every node of a plan, depth first. */
export function planNodes(node: PlanNode): PlanNode[] {
  return [node, ...(node.Plans ?? []).flatMap(planNodes)];
}
