/**
 * npm run bench:webhooks [-- --webhooks N --seconds N --rate N --burst N]: webhook deliveries to a
 * local receiver, on the real server (a child process, NODE_ENV=production) and PostgreSQL.
 *
 * `webhooks` accounts with one webhook each (member.created), all pointing at a receiver in this
 * process that verifies every signature and answers 204. Three phases:
 * - the steady writes below before any webhook exists: the server's CPU per write alone;
 * - steady: members created at `rate` a second in all for `seconds`; the delay of each delivery
 *   from its write's answer (p50/p99), and the server's CPU per write and delivery;
 * - burst: `burst` members created as fast as 16 writers can, then the time until every delivery
 *   has arrived: the delivery throughput.
 * Every delivery is checked: signed with its webhook's secret, once, in event order per webhook.
 * Needs DATABASE_URL; creates and drops its own database.
 */
import type { ChildProcess } from 'node:child_process';
import { createHmac, randomBytes } from 'node:crypto';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { parseArgs } from 'node:util';
import {
  benchAccount,
  benchDatabase,
  call,
  percentile,
  startBenchServer,
  stopBenchServer,
  usageOf,
} from './support.ts';

const { values } = parseArgs({
  options: {
    webhooks: { type: 'string' },
    seconds: { type: 'string' },
    rate: { type: 'string' },
    burst: { type: 'string' },
  },
});
const WEBHOOKS = Number(values.webhooks ?? 50);
const SECONDS = Number(values.seconds ?? 20);
const RATE = Number(values.rate ?? 50);
const BURST = Number(values.burst ?? 3000);
const log = (m: string) => process.stdout.write(`[webhooks] ${m}\n`);

const database = benchDatabase('webhooks');
const ADMIN_TOKEN = randomBytes(24).toString('hex');

interface Hook {
  index: number;
  auth: Record<string, string>;
  key: Buffer;
  /** Member id → when its create was answered. */
  answered: Map<string, number>;
  lastEventId: number;
}

const problems = { badSignature: 0, duplicate: 0, outOfOrder: 0 };
const arrivals: Array<{ hook: number; memberId: string; at: number }> = [];
const seen = new Set<string>();

function receiver(hooks: Hook[]) {
  return createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const at = performance.now();
      const body = Buffer.concat(chunks).toString('utf8');
      const hook = hooks[Number(req.url!.slice(1))]!;
      const id = String(req.headers['webhook-id']);
      const expected = `v1,${createHmac('sha256', hook.key).update(`${id}.${req.headers['webhook-timestamp']}.${body}`).digest('base64')}`;
      if (req.headers['webhook-signature'] !== expected) problems.badSignature++;
      if (seen.has(`${hook.index}:${id}`)) problems.duplicate++;
      seen.add(`${hook.index}:${id}`);
      if (Number(id) < hook.lastEventId) problems.outOfOrder++;
      hook.lastEventId = Math.max(hook.lastEventId, Number(id));
      const event = JSON.parse(body) as { data: { memberId: string } };
      arrivals.push({ hook: hook.index, memberId: event.data.memberId, at });
      res.statusCode = 204;
      res.end();
    });
  });
}

async function until(done: () => boolean, ms: number): Promise<boolean> {
  const deadline = performance.now() + ms;
  while (!done()) {
    if (performance.now() > deadline) return false;
    await new Promise((r) => setTimeout(r, 20));
  }
  return true;
}

async function main(): Promise<void> {
  await database.create();
  let server: ChildProcess | undefined;
  const hooks: Hook[] = [];
  const sink = receiver(hooks);
  await new Promise<void>((r) => sink.listen(0, '127.0.0.1', r));
  const sinkUrl = `http://127.0.0.1:${(sink.address() as AddressInfo).port}`;
  try {
    const launched = await startBenchServer(database.url, ADMIN_TOKEN, { FETCH_ALLOW_PRIVATE: 'true' });
    server = launched.child;
    const { url } = launched;
    const accounts: Array<{ auth: Record<string, string> }> = [];
    for (let i = 0; i < WEBHOOKS; i++) accounts.push(await benchAccount(url, ADMIN_TOKEN, `hooked${i}`));

    let writes = 0;
    const create = async (auth: Record<string, string>, name: string) => {
      const { id } = (await call(`${url}/api/v1/members`, {
        method: 'POST',
        headers: auth,
        body: JSON.stringify({ name }),
      })) as {
        id: string;
      };
      writes++;
      return id;
    };
    /** `rate` writes a second spread over the accounts for `seconds`; the server's CPU over it. */
    const steady = async (write: (i: number, k: number) => Promise<void>) => {
      const before = usageOf(server!.pid!);
      const started = performance.now();
      const gap = (1000 * WEBHOOKS) / RATE;
      await Promise.all(
        accounts.map(async (_, i) => {
          await new Promise((r) => setTimeout(r, (i * gap) / WEBHOOKS));
          for (let k = 0; performance.now() - started < SECONDS * 1000; k++) {
            const sent = performance.now();
            await write(i, k);
            const next = sent + gap - performance.now();
            if (next > 0) await new Promise((r) => setTimeout(r, next));
          }
        }),
      );
      return before;
    };

    // The same writes without webhooks first: the server's CPU per write alone.
    const bare = await steady(async (i, k) => void (await create(accounts[i]!.auth, `bare ${k}`)));
    const bareWrites = writes;
    const bareCpu = (usageOf(server.pid!).cpuMs - bare.cpuMs) / bareWrites;
    log(`without webhooks: ${bareWrites} writes, ${bareCpu.toFixed(2)} ms of server CPU each`);

    for (const [i, account] of accounts.entries()) {
      const { secret } = (await call(`${url}/api/v1/webhooks`, {
        method: 'POST',
        headers: account.auth,
        body: JSON.stringify({ url: `${sinkUrl}/${i}`, types: ['member.created'] }),
      })) as { secret: string };
      hooks.push({
        index: i,
        auth: account.auth,
        key: Buffer.from(secret.slice('whsec_'.length), 'base64'),
        answered: new Map(),
        lastEventId: 0,
      });
    }
    log(`${WEBHOOKS} accounts with a webhook each`);
    const answered = async (hook: Hook, name: string) => {
      const id = await create(hook.auth, name);
      hook.answered.set(id, performance.now());
    };

    writes = 0;
    const before = await steady((i, k) => answered(hooks[i]!, `steady ${k}`));
    const steadyWrites = writes;
    const allSteady = await until(() => arrivals.length >= steadyWrites, 30_000);
    const after = usageOf(server.pid!);
    const delays = arrivals
      .map((a) => a.at - hooks[a.hook]!.answered.get(a.memberId)!)
      .filter((d) => Number.isFinite(d))
      .sort((x, y) => x - y);
    const steadyDelivered = arrivals.length;
    log(`steady: ${steadyWrites} writes, ${steadyDelivered} delivered${allSteady ? '' : ' (timed out waiting)'}`);

    // Burst: as fast as 16 writers go, then the drain.
    const burstStart = performance.now();
    const burstFrom = arrivals.length;
    writes = 0;
    let next = 0;
    await Promise.all(
      Array.from({ length: 16 }, async () => {
        while (next < BURST) {
          const k = next++;
          await answered(hooks[k % WEBHOOKS]!, `burst ${k}`);
        }
      }),
    );
    const written = performance.now();
    const allBurst = await until(() => arrivals.length >= burstFrom + BURST, 120_000);
    const drained = performance.now();
    const burstDelivered = arrivals.length - burstFrom;
    const end = usageOf(server.pid!);
    log(`burst: ${BURST} writes in ${((written - burstStart) / 1000).toFixed(1)} s, ${burstDelivered} delivered`);

    const ms = (n: number) => n.toFixed(1);
    const perSteady = (after.cpuMs - before.cpuMs) / Math.max(1, steadyDelivered);
    const perBurst = (end.cpuMs - after.cpuMs) / Math.max(1, burstDelivered);
    process.stdout.write(
      [
        '',
        `Webhooks: ${WEBHOOKS} webhooks on ${WEBHOOKS} accounts, a local receiver (PostgreSQL, a server of its own, JOB_POLL_INTERVAL_MS and WEBHOOK_CONCURRENCY at their defaults):`,
        '',
        "| phase | writes | delivered | delay from the write's answer, p50 / p99 ms | deliveries a second | server CPU per write and its delivery, ms | of which the delivery (less the write alone), ms | server peak RSS, MB |",
        '|---|---|---|---|---|---|---|---|',
        `| steady, ${RATE}/s for ${SECONDS} s, no webhooks | ${bareWrites} | — | — | — | ${bareCpu.toFixed(2)} | — | ${bare.peakMb} |`,
        `| steady, ${RATE}/s for ${SECONDS} s | ${steadyWrites} | ${steadyDelivered} | ${ms(percentile(delays, 50))} / ${ms(percentile(delays, 99))} | ${(steadyDelivered / SECONDS).toFixed(0)} | ${perSteady.toFixed(2)} | ${(perSteady - bareCpu).toFixed(2)} | ${after.peakMb} |`,
        `| burst of ${BURST}${allBurst ? '' : ' (timed out)'} | ${BURST} | ${burstDelivered} | — | ${(burstDelivered / ((drained - burstStart) / 1000)).toFixed(0)} (all delivered ${((drained - written) / 1000).toFixed(1)} s after the last write) | ${perBurst.toFixed(2)} | — | ${end.peakMb} |`,
        '',
        `Checks: ${problems.badSignature} bad signatures, ${problems.duplicate} duplicates, ${problems.outOfOrder} out of order.`,
        '',
      ].join('\n'),
    );
    if (problems.badSignature + problems.duplicate + problems.outOfOrder > 0 || !allSteady || !allBurst)
      process.exitCode = 1;
  } finally {
    await stopBenchServer(server);
    sink.close();
    await database.drop();
  }
}

await main();
