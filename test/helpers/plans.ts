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
  'Rows Removed by Filter'?: number;
  Plans?: PlanNode[];
}

/**
 * The event hub's own reads (server/events/stream.ts), which run whenever a write commits, and a
 * test's own wait for a lock (untilWaitingForLock, helpers/db.ts): never a request's.
 */
const BACKGROUND = /from events\s+where id >|from api_keys where id = any|from pg_locks/;

/**
 * The statements a request runs for its own work: not the key check, the rate limit or the job
 * queue's own polling (claims, completions and schedules name `locked_by` or `job_schedules`); a
 * job enqueued by the request (its `insert into jobs`) counts.
 */
export const REQUEST_WORK = /^(?![\s\S]*\b(api_keys|rate_limit_windows|job_schedules|locked_by)\b)/;

/** Runs `action` and returns every statement knex sent meanwhile whose SQL matches `match`. */
export async function captureStatements(
  knex: Knex,
  match: RegExp,
  action: () => Promise<unknown>,
): Promise<Statement[]> {
  const seen: Statement[] = [];
  const capture = (q: { sql: string; bindings?: unknown[] }) => {
    if (match.test(q.sql) && !BACKGROUND.test(q.sql)) seen.push({ sql: q.sql, bindings: q.bindings ?? [] });
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
 * the native statement ($1, $2, …); knex.raw takes ? placeholders in order. With `generic`, the
 * plan PostgreSQL caches for a named prepared statement (server/db/prepared.ts) and runs once it
 * stops planning per execution: the statement is PREPAREd and EXPLAINed under
 * plan_cache_mode = force_generic_plan, so the plan cannot use the values.
 */
let probes = 0;

/** A SQL literal of a captured value (untyped: PostgreSQL infers each parameter's type from the statement). */
function literal(value: unknown): string {
  if (value === null || value === undefined) return 'null';
  if (typeof value === 'number' || typeof value === 'boolean') return String(value);
  const text = Array.isArray(value)
    ? `{${value.map((v) => `"${String(v).replace(/["\\]/g, '\\$&')}"`).join(',')}}`
    : typeof value === 'string'
      ? value
      : JSON.stringify(value);
  return `'${text.replace(/'/g, "''")}'`;
}

export async function explain(
  knex: Knex,
  statement: Statement,
  options: { analyze?: boolean; generic?: boolean } = {},
): Promise<PlanNode> {
  const mode = `${options.analyze ? 'analyze, ' : ''}format json`;
  const planOf = (raw: unknown) => (typeof raw === 'string' ? JSON.parse(raw) : raw) as Array<{ Plan: PlanNode }>;
  if (options.generic) {
    // A prepared statement outlives a failed transaction, so each probe has its own name.
    const name = `generic_plan_probe_${++probes}`;
    return knex.transaction(async (trx) => {
      await trx.raw('set local plan_cache_mode = force_generic_plan');
      await trx.raw(`prepare ${name} as ${statement.sql.replace(/\?/g, '\\?')}`);
      // EXECUTE takes its values as expressions (a utility statement has no bind parameters).
      const explained = await trx.raw(
        `explain (${mode}) execute ${name}(${statement.bindings.map(literal).join(', ')})`.replace(/\?/g, '\\?'),
      );
      await trx.raw(`deallocate ${name}`);
      return planOf((explained.rows as Array<Record<string, unknown>>)[0]!['QUERY PLAN'])[0]!.Plan;
    });
  }
  const ordered: unknown[] = [];
  const sql = statement.sql.replace(
    /\$(\d+)/g,
    (_m, n: string) => (ordered.push(statement.bindings[Number(n) - 1]), '?'),
  );
  const explained = await knex.raw(`explain (${mode}) ${sql}`, ordered as never);
  return planOf((explained.rows as Array<Record<string, unknown>>)[0]!['QUERY PLAN'])[0]!.Plan;
}

/** Every node of a plan, depth first. */
export function planNodes(node: PlanNode): PlanNode[] {
  return [node, ...(node.Plans ?? []).flatMap(planNodes)];
}

/**
 * The two plans a one-statement read (server/db/prepared.ts) may run with: the plan for its values
 * and the generic plan PostgreSQL caches for it, both executed (EXPLAIN ANALYZE).
 */
export async function bothPlans(
  knex: Knex,
  statement: Statement,
): Promise<Array<{ kind: 'custom' | 'generic'; plan: PlanNode }>> {
  return [
    { kind: 'custom', plan: await explain(knex, statement, { analyze: true }) },
    { kind: 'generic', plan: await explain(knex, statement, { analyze: true, generic: true }) },
  ];
}

/** Sequential scans that read more than `small` rows (kept or filtered out): reads of a whole table that is not tiny. */
export function largeSeqScans(root: PlanNode, small = 100): PlanNode[] {
  return planNodes(root).filter(
    (n) => n['Node Type'] === 'Seq Scan' && (n['Actual Rows'] ?? 0) + (n['Rows Removed by Filter'] ?? 0) > small,
  );
}
