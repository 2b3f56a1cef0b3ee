/**
 * The bench's bare baseline (`npm run bench -- --with-bare`): express 5 over the same pg pool
 * settings, calling the same service functions (so the same SQL and the same JSON), with no
 * contract validation, no authentication, no rate limit and no request logging. The account is
 * fixed by BENCH_USER_ID. The ratio full/bare therefore measures what the pipeline costs; the
 * bench's reference is the independent baseline (independent.ts), which measures the data layer too.
 */
import express from 'express';
import { DatabaseAuditSink } from '../../server/audit/index.ts';
import { loadConfig } from '../../server/config.ts';
import { backgroundContextFor } from '../../server/context.ts';
import { openDatabase } from '../../server/db/knex.ts';
import { listEntries } from '../../server/features/entries/service.ts';
import { getFront, getHistory } from '../../server/features/front/service.ts';
import { listMembersPage } from '../../server/features/members/service.ts';
import { JobQueue } from '../../server/jobs/queue.ts';
import { createLogger } from '../../server/logger.ts';

const userId = process.env.BENCH_USER_ID!;
const db = await openDatabase({
  databaseUrl: process.env.DATABASE_URL,
  poolMax: Number(process.env.DB_POOL_MAX ?? 10),
});
const knex = db.knex;
const logger = createLogger('silent');
const parts = {
  db: knex,
  config: loadConfig({}),
  logger,
  audit: new DatabaseAuditSink(),
  jobs: new JobQueue(knex, { clock: Date.now, logger }),
};
/** The same service context a request builds (a fresh `now` per request). */
const ctx = () => backgroundContextFor(parts, { kind: 'system', job: 'bench_bare' }, userId);
const num = (v: unknown) => (v === undefined ? undefined : Number(v));

const app = express();
app.disable('x-powered-by');
app.get('/api/v1/front', async (_req, res) => {
  res.json(await getFront(ctx()));
});
app.get('/api/v1/entries', async (req, res) => {
  res.json(await listEntries(ctx(), { limit: num(req.query.limit) }));
});
app.get('/api/v1/members/page', async (req, res) => {
  res.json(
    await listMembersPage(ctx(), { limit: Number(req.query.limit), cursor: req.query.cursor as string | undefined }),
  );
});
app.get('/api/v1/front/history', async (req, res) => {
  const q = req.query as Record<string, string | undefined>;
  res.json(
    await getHistory(ctx(), {
      limit: num(q.limit),
      cursorStartedAt: num(q.cursorStartedAt),
      cursorId: q.cursorId,
      startTime: num(q.startTime),
      endTime: num(q.endTime),
    }),
  );
});
const server = app.listen(Number(process.env.PORT), '127.0.0.1', () =>
  process.stdout.write(`bare listening on ${process.env.PORT}\n`),
);
process.on('SIGTERM', () => server.close(() => void db.close().then(() => process.exit(0))));
